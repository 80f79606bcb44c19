"""The key factory: v1 strings pinned to docs/protocol.md, v2 shape and slot safety."""

from __future__ import annotations

import fnmatch

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from redis.crc import key_slot

from worker_runtime.keys import CONSUMER_GROUP, Keys, stream_agent_type

V1 = Keys()
V2 = Keys("v2")


def slot(key: str) -> int:
    return int(key_slot(key.encode()))


# -- v1: byte for byte what the other runtimes write ------------------------------------


def test_default_schema_is_v1() -> None:
    assert Keys().schema == "v1"
    assert Keys() == Keys("v1")


@pytest.mark.parametrize(
    ("rendered", "expected"),
    [
        (V1.workers, "byai_gateway:registry:workers"),
        (V1.worker_online("w1"), "byai_gateway:registry:worker:online:w1"),
        (V1.worker_lock("w1"), "byai_gateway:registry:worker:lock:w1"),
        (V1.worker_agent_types("w1"), "byai_gateway:registry:worker:agent_types:w1"),
        (V1.type_workers("chat"), "byai_gateway:registry:agent_type:workers:chat"),
        (V1.worker_status("w1"), "byai_gateway:registry:worker:status:w1"),
        (V1.worker_admin("w1"), "byai_gateway:registry:worker:admin:w1"),
        (V1.type_denied("chat"), "byai_gateway:registry:agent_type:denied:chat"),
        (V1.type_stream("chat"), "byai_gateway:ctrl:agent_type:chat"),
        (V1.worker_stream("w1"), "byai_gateway:ctrl:worker:w1"),
        (V1.session_data_stream("s1"), "byai_gateway:session:s1:data_stream"),
        (V1.session_registry("s1"), "byai_gateway:session:s1:registry"),
        (V1.worker_executions("w1"), "byai_gateway:registry:worker:executions:w1"),
        (
            V1.worker_active_executions("w1"),
            "byai_gateway:registry:worker:active_execution_index:w1",
        ),
        (V1.worker_active_snapshots("w1"), "byai_gateway:registry:worker:active_snapshots:w1"),
        (V1.worker_history_snapshots("w1"), "byai_gateway:registry:worker:history_snapshots:w1"),
        (V1.collector_lock, "by_framework:obs:collector_lock"),
        (V1.metrics_history, "by_framework:obs:history"),
        (V1.admin_workers, "byai_gateway:registry:worker:admin_workers"),
    ],
)
def test_v1_keys_of_spec_section_3(rendered: str, expected: str) -> None:
    assert rendered == expected


def test_consumer_group_name() -> None:
    assert CONSUMER_GROUP == "byai_gateway:consumer_group:agent_engines"


def test_v1_ids_are_embedded_verbatim() -> None:
    # Other runtimes spell keys with the raw id; no escaping or normalisation here.
    assert V1.worker_online("host:1:chat:0") == "byai_gateway:registry:worker:online:host:1:chat:0"
    assert V1.worker_admin("wörker {7}") == "byai_gateway:registry:worker:admin:wörker {7}"
    assert V1.type_stream("a b") == "byai_gateway:ctrl:agent_type:a b"


def test_project_keys_stay_in_the_namespace() -> None:
    # The keys this project adds follow the same namespace rules (docs/protocol.md).
    added = [
        V1.agent_types,
        V1.instances,
        V1.instance_online("host:1"),
        V1.leader_lock,
        V1.leader_epoch,
        V1.scale_targets,
        V1.scale_overrides("chat"),
        V1.fleet_stream,
        V1.audit_stream,
        V1.type_stats,
        V1.scheduler_runs,
        V1.dead_letter_stream("chat"),
    ]
    assert all(k.startswith("byai_gateway:") and "{" not in k for k in added)
    assert len(set(added)) == len(added)
    assert V1.instance_online("host:1") == "byai_gateway:registry:instance:online:host:1"
    assert V1.scale_overrides("chat") == "byai_gateway:scale:overrides:chat"
    assert V1.dead_letter_stream("chat") == "byai_gateway:dead_letter:agent_type:chat"


# -- v2: prefix + hash tag around the entity id ------------------------------------------


@pytest.mark.parametrize(
    ("rendered", "expected"),
    [
        (V2.workers, "byai_gateway:v2:registry:workers"),
        (V2.worker_online("worker-07"), "byai_gateway:v2:registry:worker:{worker-07}:online"),
        (V2.worker_lock("worker-07"), "byai_gateway:v2:registry:worker:{worker-07}:lock"),
        (
            V2.worker_agent_types("worker-07"),
            "byai_gateway:v2:registry:worker:{worker-07}:agent_types",
        ),
        (V2.worker_status("worker-07"), "byai_gateway:v2:registry:worker:{worker-07}:status"),
        (V2.worker_admin("worker-07"), "byai_gateway:v2:registry:worker:{worker-07}:admin"),
        (
            V2.worker_executions("worker-07"),
            "byai_gateway:v2:registry:worker:{worker-07}:executions",
        ),
        (
            V2.worker_active_executions("worker-07"),
            "byai_gateway:v2:registry:worker:{worker-07}:active_execution_index",
        ),
        (
            V2.worker_active_snapshots("worker-07"),
            "byai_gateway:v2:registry:worker:{worker-07}:active_snapshots",
        ),
        (
            V2.worker_history_snapshots("worker-07"),
            "byai_gateway:v2:registry:worker:{worker-07}:history_snapshots",
        ),
        (V2.worker_stream("worker-07"), "byai_gateway:v2:ctrl:worker:{worker-07}"),
        (V2.session_data_stream("s1"), "byai_gateway:v2:session:{s1}:data_stream"),
        (V2.session_registry("s1"), "byai_gateway:v2:session:{s1}:registry"),
        (V2.instance_online("host:1"), "byai_gateway:v2:registry:instance:{host:1}:online"),
        # Single-key families: the prefix only, no hash tag.
        (V2.type_stream("chat"), "byai_gateway:v2:ctrl:agent_type:chat"),
        (V2.scale_overrides("chat"), "byai_gateway:v2:scale:overrides:chat"),
        (V2.audit_stream, "byai_gateway:v2:audit"),
        # by-framework's v2 spelling (common/constants.py, all three SDKs): tagged by type.
        (V2.type_workers("chat"), "byai_gateway:v2:registry:agent_type:{chat}:workers"),
        (V2.type_denied("chat"), "byai_gateway:v2:registry:agent_type:{chat}:denied"),
        (V2.admin_workers, "byai_gateway:v2:registry:worker:admin_workers"),
        # by-framework keeps the observability keys unversioned in v2.
        (V2.collector_lock, "by_framework:obs:collector_lock"),
        (V2.metrics_history, "by_framework:obs:history"),
    ],
)
def test_v2_shape(rendered: str, expected: str) -> None:
    assert rendered == expected


def test_every_v2_key_differs_from_its_v1_twin() -> None:
    # v1 -> v2 renames every key; no v2 key may alias a v1 one (old data is not read).
    for name in ("workers", "agent_types", "instances", "leader_lock", "leader_epoch",
                 "scale_targets", "fleet_stream", "audit_stream", "type_stats",
                 "scheduler_runs", "admin_workers", "metrics_fence"):  # fmt: skip
        assert getattr(V1, name) != getattr(V2, name), name
    v1_worker = set(V1.all_worker_keys("w1"))
    assert v1_worker.isdisjoint(V2.all_worker_keys("w1"))
    assert all(k.startswith("byai_gateway:v2:") for k in V2.all_worker_keys("w1"))


def test_all_worker_keys_covers_every_per_worker_family() -> None:
    keys = V2.all_worker_keys("w1")
    assert len(keys) == len(set(keys)) == 10
    for method in (
        V2.worker_online,
        V2.worker_lock,
        V2.worker_agent_types,
        V2.worker_status,
        V2.worker_admin,
        V2.worker_executions,
        V2.worker_active_executions,
        V2.worker_active_snapshots,
        V2.worker_history_snapshots,
        V2.worker_stream,
    ):
        assert method("w1") in keys


# -- slot safety -------------------------------------------------------------------------

HOSTILE_IDS = [
    "worker-07",
    "w1",
    "host.example.com:4242:chat:0",
    "a}b",  # Redis hashes "a": still one tag for every key of the entity
    "{x}",
    "{",
    "a{b}c",
    "wörker 7",
    "日本語",
    "tab\tnew\nline\x1b[31m",
    "x" * 10_000,
    "::",
    " ",
]


UNTAGGABLE_IDS = ["}x", "}}{{", ""]
"""Ids whose hash tag is empty in every SDK's spelling (``{}x}``): their keys hash on
their whole names, in by-framework's SDKs as here (docs/protocol.md)."""


@pytest.mark.parametrize("entity_id", UNTAGGABLE_IDS)
def test_ids_starting_with_a_closing_brace_are_spelled_as_every_sdk_spells_them(
    entity_id: str,
) -> None:
    """by-framework's key factories: Python ``RedisKeys.worker_online_lease`` /
    ``worker_admin_state`` / ``session_data_stream`` (by_framework/common/constants.py),
    TypeScript ``RegistryKeys.worker_online_lease`` / ``QueueNames.session_data_stream``
    / ``trace_meta`` (src/constants.ts), Java ``Constants.RegistryKeys.workerOnlineLease``
    / ``workerAdminState`` / ``QueueNames.workerCtrlStream``: ``prefix{id}suffix``."""
    root = "byai_gateway:v2:"
    assert V2.worker_online(entity_id) == f"{root}registry:worker:{{{entity_id}}}:online"
    assert V2.worker_admin(entity_id) == f"{root}registry:worker:{{{entity_id}}}:admin"
    assert V2.worker_stream(entity_id) == f"{root}ctrl:worker:{{{entity_id}}}"
    assert V2.session_data_stream(entity_id) == f"{root}session:{{{entity_id}}}:data_stream"
    assert V2.type_workers(entity_id) == f"{root}registry:agent_type:{{{entity_id}}}:workers"
    assert V2.trace_meta(entity_id) == f"{root}trace:{{{entity_id}}}"
    assert V1.trace_meta_ts(entity_id) == f"byai_gateway:trace:{entity_id}:meta"


@pytest.mark.parametrize("worker_id", HOSTILE_IDS)
def test_all_keys_of_one_worker_share_a_slot(worker_id: str) -> None:
    keys = V2.all_worker_keys(worker_id)
    assert len({slot(k) for k in keys}) == 1, keys


@pytest.mark.parametrize("instance_id", HOSTILE_IDS)
def test_instance_key_is_tagged_by_the_instance_id(instance_id: str) -> None:
    # One key per instance today; it must carry the same tag rule as every entity, so
    # any key added for the instance later lands in the same slot.
    assert slot(V2.instance_online(instance_id)) == slot(V2.session_registry(instance_id))
    assert slot(V2.instance_online(instance_id)) == slot(V2.worker_admin(instance_id))


@pytest.mark.parametrize("session_id", HOSTILE_IDS)
def test_session_keys_share_a_slot(session_id: str) -> None:
    keys = [V2.session_data_stream(session_id), V2.session_registry(session_id)]
    assert slot(keys[0]) == slot(keys[1])


@pytest.mark.parametrize("agent_type", HOSTILE_IDS)
def test_routing_set_and_denylist_of_a_type_share_a_slot(agent_type: str) -> None:
    assert slot(V2.type_workers(agent_type)) == slot(V2.type_denied(agent_type))


def test_metrics_fence_shares_the_unversioned_history_slot() -> None:
    # The fenced history write is one script: both keys must live in one slot.
    assert slot(V2.metrics_fence) == slot(V2.metrics_history)
    assert V2.metrics_fence.startswith("byai_gateway:v2:")


def test_metrics_tiers_are_ours_and_share_the_fence_slot() -> None:
    # Our long history: keys no other collector knows (so none trims them), written by
    # one fenced script per tier (the fence's slot in v2).
    assert V1.metrics_tier("10s") == "byai_gateway:metrics:history:10s"
    assert V2.metrics_tier("1m") == "byai_gateway:v2:{by_framework:obs:history}:metrics:1m"
    assert slot(V2.metrics_tier("10m")) == slot(V2.metrics_fence)
    assert V1.metrics_tier("10s") != V1.metrics_history


def test_different_workers_spread_over_slots() -> None:
    # The hash tag is the id, not a constant: a fleet does not pile onto one node.
    slots = {slot(V2.worker_online(f"worker-{i}")) for i in range(100)}
    assert len(slots) > 50


def test_v1_keys_of_one_worker_do_not_share_a_slot() -> None:
    # Why v2 exists: v1 scatters one worker's keys over the cluster.
    assert len({slot(k) for k in V1.all_worker_keys("worker-07")}) > 1


@pytest.mark.parametrize("entity_id", ["", "}", "}x", "}}{{", "}{a}"])
def test_ids_without_a_usable_hash_tag_use_the_sdks_key(entity_id: str) -> None:
    # Redis takes the text between the first "{" and the next "}"; these ids leave it
    # empty, in by-framework's SDKs too: the key must be theirs to be found at all.
    assert V2.worker_online(entity_id) == f"byai_gateway:v2:registry:worker:{{{entity_id}}}:online"


def test_fixed_tag_never_collides_with_a_regular_id() -> None:
    # "~}x" / "~" are regular ids; the ids above must not reuse their keys.
    regular = {V2.worker_online(i) for i in ("~", "~}", "~}x", "~}}x", "~}}")}
    hostile = {V2.worker_online(i) for i in ("", "}", "}x", "}}x", "}}")}
    assert regular.isdisjoint(hostile)
    assert len(hostile) == 5


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300).filter(lambda i: i != "" and not i.startswith("}")))
def test_any_id_keeps_its_entity_in_one_slot(entity_id: str) -> None:
    # Ids starting with "}" (or empty) have no tag in any SDK's spelling (see above).
    assert len({slot(k) for k in V2.all_worker_keys(entity_id)}) == 1
    assert slot(V2.session_data_stream(entity_id)) == slot(V2.session_registry(entity_id))
    assert slot(V2.instance_online(entity_id)) == slot(V2.worker_online(entity_id))


@settings(max_examples=200, deadline=None)
@given(
    st.text(max_size=300) | st.sampled_from(["", "}", "~", "~}", "}}"]),
    st.text(max_size=300) | st.sampled_from(["", "}", "~", "~}", "}}"]),
)
def test_distinct_ids_give_distinct_keys(a: str, b: str) -> None:
    if a != b:
        for keys in (V1, V2):
            assert keys.worker_online(a) != keys.worker_online(b)
            assert keys.worker_stream(a) != keys.worker_stream(b)
            assert keys.type_stream(a) != keys.type_stream(b)


def test_type_pause_hash_in_both_schemas() -> None:
    # One hash for every paused type: the heartbeat reads it with one HGETALL.
    assert V1.type_pauses == "byai_gateway:pause:agent_types"
    assert V2.type_pauses == "byai_gateway:v2:pause:agent_types"


@pytest.mark.parametrize("schema", ["v1", "v2"])
def test_stream_patterns_match_the_streams_and_give_back_the_type(schema: str) -> None:
    keys = Keys(schema)  # type: ignore[arg-type]
    for name in ("chat", "a:b", "x*y", "dead_letter:agent_type:z"):
        for key in (keys.type_stream(name), keys.dead_letter_stream(name)):
            assert any(fnmatch.fnmatchcase(key, p) for p in keys.acl_patterns)
            pattern = keys.type_stream_pattern if "ctrl" in key else keys.dead_letter_stream_pattern
            assert fnmatch.fnmatchcase(key, pattern), (key, pattern)
            assert stream_agent_type(keys, key) == name
    assert stream_agent_type(keys, keys.worker_stream("w1")) is None
    assert stream_agent_type(keys, keys.type_stream("")) is None
    other = Keys("v1" if schema == "v2" else "v2")
    assert not fnmatch.fnmatchcase(other.type_stream("chat"), keys.type_stream_pattern)
