"""FleetReader derivations and its tolerance of bad data (fakeredis, no server needed)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import fakeredis
import pytest

from worker_runtime.fleet import FleetReader
from worker_runtime.keys import CONSUMER_GROUP, Keys
from worker_runtime.metrics import build_point
from worker_runtime.models import AdminState, Lease, Status, now_ms
from worker_runtime.replies import sections
from worker_runtime.snapshot import APPLIED_FADE_MS, CommandState
from worker_runtime.verdicts import derive_status
from worker_runtime.views import build_worker_view, derive_command_state

K = Keys()


@pytest.fixture
async def fake() -> AsyncIterator[fakeredis.FakeAsyncRedis]:
    client = fakeredis.FakeAsyncRedis(decode_responses=True)
    yield client
    await client.aclose()


def test_status_thresholds_use_the_lease_heartbeat_interval() -> None:
    now = 1_000_000
    assert derive_status(None, now) is Status.OFFLINE
    # A lease without our last_seen (another runtime's) is not stale.
    assert derive_status(Lease(), now) is Status.ONLINE
    assert derive_status(Lease(last_seen=now - 10_000), now) is Status.ONLINE  # 2 x 5 s
    assert derive_status(Lease(last_seen=now - 10_001), now) is Status.STALE
    assert derive_status(Lease(last_seen=now - 2_001, heartbeat_interval=1), now) is Status.STALE
    assert derive_status(Lease(last_seen=now - 1_999, heartbeat_interval=1), now) is Status.ONLINE
    # A nonsense interval falls back to the default; a clock ahead of ours is fresh.
    assert derive_status(Lease(last_seen=now - 9_000, heartbeat_interval=-3), now) is Status.ONLINE
    assert derive_status(Lease(last_seen=now + 5_000), now) is Status.ONLINE


def test_status_from_the_remaining_ttl_ignores_the_workers_clock() -> None:
    now = 1_000_000
    # Lease TTL 15 s, beat every 5 s: online while at most 10 s since the renewal.
    lease = Lease(last_seen=now - 30_000, heartbeat_interval=5, lease_ttl=15)
    assert derive_status(lease, now, ttl_ms=14_000) is Status.ONLINE  # clock 30 s behind
    assert derive_status(lease, now, ttl_ms=5_000) is Status.ONLINE
    assert derive_status(lease, now, ttl_ms=4_999) is Status.STALE
    ahead = Lease(last_seen=now + 3_600_000, heartbeat_interval=5, lease_ttl=15)
    assert derive_status(ahead, now, ttl_ms=1_000) is Status.STALE  # clock 1 h ahead
    assert derive_status(lease, now, ttl_ms=0) is Status.OFFLINE
    # A lease stating no TTL in the plain heartbeat shape (docs/protocol.md: TTL 90 s, beat
    # 30 s): online while at most two beats old, i.e. 30 s or more left.
    assert derive_status(Lease(), now, ttl_ms=30_000) is Status.ONLINE
    assert derive_status(Lease(), now, ttl_ms=20_000) is Status.STALE
    # No expiry at all (-1): the last beat decides.
    assert derive_status(lease, now, ttl_ms=-1) is Status.STALE


def test_command_state() -> None:
    admin = AdminState(lifecycle="suspended", updated_at=500)
    online = Status.ONLINE
    assert derive_command_state(AdminState(), Lease(), online) is None
    assert derive_command_state(admin, Lease(admin_applied_at=499), online) is CommandState.PENDING
    applied = Lease(admin_applied_at=500, lifecycle="suspended")
    assert derive_command_state(admin, applied, online) is CommandState.APPLIED
    # The stamp but not the lifecycle (another write applied at the same ms): pending.
    assert derive_command_state(admin, Lease(admin_applied_at=500), online) is CommandState.PENDING
    assert derive_command_state(admin, Lease(), online) is CommandState.PENDING
    # Offline: nothing was applied; the worker applies it when it starts.
    assert derive_command_state(admin, None, Status.OFFLINE) is CommandState.ON_START
    frozen = Lease(admin_applied_at=100)  # a lease left behind by a worker that froze
    assert derive_command_state(admin, frozen, Status.OFFLINE) is CommandState.ON_START
    # "applied" fades once the command is old; "pending" never does.
    fade = APPLIED_FADE_MS
    applied = Lease(admin_applied_at=500, lifecycle="suspended")
    assert derive_command_state(admin, applied, online, 500 + fade) is CommandState.APPLIED
    assert derive_command_state(admin, applied, online, 501 + fade) is None
    stuck = Lease(admin_applied_at=1)
    assert derive_command_state(admin, stuck, online, 10 * fade) is CommandState.PENDING
    evicted = AdminState(lifecycle="evicted", updated_at=500)
    lease = Lease(admin_applied_at=900)
    assert derive_command_state(evicted, lease, Status.STALE) is CommandState.PENDING
    assert derive_command_state(evicted, None, Status.OFFLINE) is CommandState.APPLIED


def test_admin_hash_wins_over_the_lease() -> None:
    now = now_ms()
    lease = {"lifecycle": "active", "status": "busy", "last_seen": now, "agent_types": ["b", "a"]}
    admin = AdminState(lifecycle="suspended", reason="maint", updated_at=now, updated_by="op@h")
    view = build_worker_view("w-1", lease, admin, {"c", "a"}, {"a"}, now)
    assert view.lifecycle == "suspended"
    assert view.applied_lifecycle == "active"
    assert view.reason == "maint"
    assert view.runtime_status == "busy"
    assert view.status is Status.ONLINE
    assert view.agent_types == ["b", "a", "c"]  # lease order, then declared extras
    assert view.denied_types == ["a"]
    assert view.command_state is CommandState.PENDING
    assert view.admin_updated_by == "op@h"


def test_malformed_lease_is_listed_stale_and_flagged() -> None:
    for raw in ("not json", [1, 2], "null", 42):
        view = build_worker_view("w", raw, AdminState(), (), (), now_ms())
        assert view.status is Status.STALE
        assert view.lease_valid is False
        assert view.lifecycle == "active"


def test_wrong_typed_fields_are_dropped_not_fatal() -> None:
    now = now_ms()
    lease = {
        "workerId": "other",
        "lastSeen": now,
        "activeJobCount": "many",
        "pid": {"x": 1},
        "agentTypes": "chat",
        "ipAddress": "10.1.2.3",
    }
    view = build_worker_view("w", lease, AdminState(), (), (), now)
    assert view.worker_id == "w"  # the registry id, not the lease's claim
    assert view.ip_address == "10.1.2.3"
    assert view.active_jobs is None and view.pid is None
    assert view.status is Status.ONLINE


async def test_read_tolerates_wrong_key_types(fake: fakeredis.FakeAsyncRedis) -> None:
    now = now_ms()
    await fake.sadd(K.workers, "w1", "w2")
    await fake.set(K.worker_online("w1"), json.dumps({"last_seen": now, "agent_types": ["t"]}))
    await fake.set(K.worker_admin("w1"), "a string, not a hash")
    await fake.hset(K.worker_online("w2"), "x", "1")  # a hash where a lease should be
    await fake.set(K.agent_types, "not a set")
    await fake.set(K.type_stream("t"), "not a stream")
    await fake.set(K.scale_targets, "nope")
    await fake.set(K.metrics_history, "nope")
    await fake.set(K.audit_stream, "nope")
    await fake.set(K.instances, "nope")
    snap = await FleetReader(fake, K).read()
    assert [w.worker_id for w in snap.workers] == ["w1", "w2"]
    assert snap.workers[0].status is Status.ONLINE
    assert snap.workers[0].lifecycle == "active"
    assert snap.workers[1].status is Status.OFFLINE
    assert [t.name for t in snap.types] == ["t"]
    assert snap.types[0].depth == 0
    assert snap.metrics.history == [] and snap.events == []


async def test_depth_is_undelivered_plus_pending(fake: fakeredis.FakeAsyncRedis) -> None:
    """One definition: depth = undelivered (group lag, else length) + pending; dead apart."""
    await fake.sadd(K.agent_types, "grouped", "plain")
    await fake.xgroup_create(K.type_stream("grouped"), CONSUMER_GROUP, id="0", mkstream=True)
    for _ in range(4):
        await fake.xadd(K.type_stream("grouped"), {"kind": "task", "data": "{}"})
        await fake.xadd(K.type_stream("plain"), {"kind": "task", "data": "{}"})
    await fake.xreadgroup(CONSUMER_GROUP, "c1", {K.type_stream("grouped"): ">"}, count=3)
    await fake.xadd(K.dead_letter_stream("plain"), {"x": "1"})
    snap = await FleetReader(fake, K).read()
    by_name = {t.name: t for t in snap.types}
    grouped, plain = by_name["grouped"], by_name["plain"]
    assert (grouped.depth, grouped.undelivered, grouped.pending) == (4, 1, 3)
    assert (plain.depth, plain.undelivered, plain.pending, plain.dead) == (4, 4, 0, 1)
    assert snap.metrics.queue_depth == 8 == sum(t.depth for t in snap.types)
    # The metrics history point built from this snapshot says the same (no double count).
    point = build_point(snap, {}, None, 0.0, None)
    assert point.queue_depth == snap.metrics.queue_depth
    assert {n: (m.depth, m.pending) for n, m in point.per_type.items()} == {
        "grouped": (4, 3),
        "plain": (4, 0),
    }


async def test_leader_lock_parsed_leniently(fake: fakeredis.FakeAsyncRedis) -> None:
    await fake.set(K.leader_epoch, "7")
    await fake.set(K.leader_lock, "opaque-token")
    snap = await FleetReader(fake, K).read()
    assert (snap.leader.instance_id, snap.leader.epoch) == (None, 7)
    await fake.set(K.leader_lock, json.dumps({"instance_id": "i-1", "token": "t", "epoch": 9}))
    snap = await FleetReader(fake, K).read()
    assert (snap.leader.instance_id, snap.leader.epoch) == ("i-1", 9)


async def test_instance_quota_uses_the_shared_rule(fake: fakeredis.FakeAsyncRedis) -> None:
    now = now_ms()
    for iid in ("i-a", "i-b", "i-c"):
        await fake.zadd(K.instances, {iid: now})
        lease = {"instance_id": iid, "agent_types": ["chat"], "replicas": {"chat": ["x"]}}
        await fake.set(K.instance_online(iid), json.dumps(lease))
    await fake.zadd(K.instances, {"i-dead": now - 60_000})  # no lease: not live
    await fake.hset(K.scale_targets, mapping={"chat": "8"})
    await fake.hset(K.scale_overrides("chat"), mapping={"i-c": "1", "i-dead": "4", "bad": "-2"})
    await fake.set(K.leader_lock, json.dumps({"instance_id": "i-b"}))
    # A worker of another runtime names an instance that never registered: listed,
    # but it is not part of the split (the runtime would not count it either).
    await fake.sadd(K.workers, "foreign")
    foreign = {"instance_id": "i-foreign", "agent_types": ["chat"], "last_seen": now}
    await fake.set(K.worker_online("foreign"), json.dumps(foreign))
    snap = await FleetReader(fake, K).read()
    quotas = {i.instance_id: i.quota.get("chat") for i in snap.instances}
    # i-c runs its override; the others keep their share of 8 as if none existed.
    assert quotas == {"i-a": 3, "i-b": 3, "i-c": 1, "i-dead": 4, "i-foreign": None}
    assert [i.instance_id for i in snap.instances if i.is_leader] == ["i-b"]
    assert [i.online for i in snap.instances] == [True, True, True, False, True]
    assert snap.instances[-1].replicas == {"chat": 1}
    chat = snap.types[0]
    assert chat.overrides == {"i-c": 1, "i-dead": 4}  # the negative count is ignored
    assert chat.target == 8


async def test_types_from_workers_only_take_a_third_round_trip(
    fake: fakeredis.FakeAsyncRedis,
) -> None:
    reader = FleetReader(fake, K)
    await reader.read()
    assert reader.round_trips == 1  # empty fleet: nothing per entity to read
    await fake.sadd(K.workers, "w1")
    await fake.sadd(K.agent_types, "indexed")
    await reader.read()
    assert reader.round_trips == 2
    await fake.sadd(K.worker_agent_types("w1"), "only-declared")
    await fake.xadd(K.type_stream("only-declared"), {"x": "1"})
    snap = await reader.read()
    assert reader.round_trips == 3
    assert {t.name: t.depth for t in snap.types} == {"indexed": 0, "only-declared": 1}


async def test_detail_orders_executions_and_finds_denials(
    fake: fakeredis.FakeAsyncRedis,
) -> None:
    now = now_ms()
    await fake.sadd(K.workers, "w1")
    await fake.sadd(K.agent_types, "chat", "embed")
    await fake.sadd(K.type_denied("embed"), "w1")
    await fake.set(K.worker_online("w1"), json.dumps({"last_seen": now, "agent_types": ["chat"]}))
    await fake.hset(K.worker_status("w1"), "runtime_status", "busy")
    for i in range(5):
        snap = {"execution_id": f"e{i}", "state": "succeeded", "started_at": now + i}
        await fake.hset(K.worker_history_snapshots("w1"), f"e{i}", json.dumps(snap))
        await fake.zadd(K.worker_executions("w1"), {f"e{i}": now + i})
    await fake.hset(K.worker_history_snapshots("w1"), "e-bad", "{{{")
    await fake.hset(K.worker_active_snapshots("w1"), "run1", json.dumps({"state": "running"}))
    await fake.zadd(K.worker_active_executions("w1"), {"run1": now})
    detail = await FleetReader(fake, K).read_worker_detail("w1", limit=3)
    assert detail.known
    assert detail.runtime_status == "busy"
    assert detail.denied_types == ["embed"]
    assert [e.execution_id for e in detail.recent_executions] == ["e4", "e3", "e2"]
    assert [e.execution_id for e in detail.active_executions] == ["run1"]
    assert detail.lease == {"last_seen": now, "agent_types": ["chat"]}
    unknown = await FleetReader(fake, K).read_worker_detail("nobody")
    assert not unknown.known and unknown.worker.status is Status.OFFLINE


def test_views_share_one_set_of_given_field_names_and_a_copy_keeps_its_own() -> None:
    now = 1_000_000
    views = [build_worker_view(f"w-{i}", None, AdminState(), [], [], now) for i in range(3)]
    lease = {"worker_id": "w-9", "role": "all"}
    leased = build_worker_view("w-9", lease, AdminState(), [], [], now)
    shared = views[0].__pydantic_fields_set__
    assert all(v.__pydantic_fields_set__ is shared for v in views)
    assert leased.model_fields_set > shared  # the lease's fields were given too
    assert "hostname" not in shared
    copy = views[0].model_copy(update={"hostname": "h1"})
    assert "hostname" in copy.model_fields_set
    assert "hostname" not in views[1].model_fields_set  # the shared set is untouched
    assert "hostname" not in views[1].model_dump(exclude_unset=True)
    assert copy.model_dump(exclude_unset=True)["hostname"] == "h1"


def test_sections_cut_replies_by_name_and_refuse_a_mismatch() -> None:
    replies = list(range(7))
    cut = sections(replies, {"workers": 3, "types": 0, "instances": 4})
    assert cut == {"workers": [0, 1, 2], "types": [], "instances": [3, 4, 5, 6]}
    with pytest.raises(ValueError, match="7 replies for parts of 6"):
        sections(replies, {"workers": 3, "instances": 3})
