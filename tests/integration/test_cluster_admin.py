"""WorkerManager on a real 3-primary Redis Cluster: key schema v2, no CROSSSLOT anywhere.

The keys are read back by their literal v2 names (not through the key factory) so the
documented shape is what is checked.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import cast

import pytest
from redis.asyncio.cluster import RedisCluster as ClusterClient
from redis.crc import key_slot
from redis.exceptions import CrossSlotTransactionError

from tests.cluster import RedisCluster
from worker_runtime.admin import UnknownWorkerError, WorkerManager, WorkerOnlineError
from worker_runtime.connection import create_redis, is_cluster
from worker_runtime.keys import Keys
from worker_runtime.messages import decode_command
from worker_runtime.models import CommandAction, Lease, Lifecycle, now_ms
from worker_runtime.settings import RedisSettings, load

V2 = "byai_gateway:v2"
OPERATOR = "ops@test"


@pytest.fixture
async def cluster_client(redis_cluster: RedisCluster) -> AsyncIterator[ClusterClient]:
    settings = load(RedisSettings, cluster_host=redis_cluster.host, cluster_port=redis_cluster.port)
    assert settings.key_schema == "v2"
    client = create_redis(settings)
    assert is_cluster(client)
    assert isinstance(client, ClusterClient)
    yield client
    await client.aclose()


@pytest.fixture
def manager(cluster_client: ClusterClient) -> WorkerManager:
    return WorkerManager(cluster_client, Keys("v2"), operator=OPERATOR)


async def register(
    client: ClusterClient, worker_id: str, types: list[str], *, applied_at: int = 0
) -> None:
    """What a worker's registration leaves behind, written by hand under v2 names."""
    lease = Lease(
        worker_id=worker_id,
        instance_id="host-1:42",
        agent_types=types,
        lifecycle="active",
        last_seen=now_ms(),
        admin_applied_at=applied_at,
    )
    await client.sadd(f"{V2}:registry:workers", worker_id)
    await client.set(f"{V2}:registry:worker:{{{worker_id}}}:online", lease.dump(), ex=60)
    await client.sadd(f"{V2}:registry:worker:{{{worker_id}}}:agent_types", *types)
    await client.sadd(f"{V2}:registry:agent_types", *types)
    for agent_type in types:
        await client.sadd(f"{V2}:registry:agent_type:{{{agent_type}}}:workers", worker_id)


async def xrange(client: ClusterClient, key: str) -> list[tuple[str, dict[str, str]]]:
    """Every entry of a stream (the client decodes responses to ``str``)."""
    return cast(list[tuple[str, dict[str, str]]], await client.xrange(key) or [])


async def commands(client: ClusterClient, worker_id: str) -> list[dict[str, object]]:
    entries = await xrange(client, f"{V2}:ctrl:worker:{{{worker_id}}}")
    decoded = [decode_command(fields) for _, fields in entries]
    assert all(c is not None for c in decoded)
    return [c.model_dump(mode="json") for c in decoded if c is not None]


async def audit_actions(client: ClusterClient) -> list[tuple[str, str]]:
    entries = await xrange(client, f"{V2}:audit")
    return [(fields["action"], fields["target"]) for _, fields in entries]


async def test_lifecycle_commands_write_v2_keys(
    cluster_client: ClusterClient, manager: WorkerManager
) -> None:
    await register(cluster_client, "w1", ["chat", "embed"])

    result = await manager.suspend_worker("w1", reason="disk full")
    admin = await cluster_client.hgetall(f"{V2}:registry:worker:{{w1}}:admin")
    assert admin["lifecycle"] == "suspended"
    assert admin["reason"] == "disk full"
    assert admin["updated_by"] == OPERATOR
    assert int(admin["updated_at"]) == result.updated_at
    assert result.online is True
    # Routing reflects the suspension at once, for every declared type.
    assert not await cluster_client.sismember(f"{V2}:registry:agent_type:{{chat}}:workers", "w1")
    assert not await cluster_client.sismember(f"{V2}:registry:agent_type:{{embed}}:workers", "w1")
    pushed = await commands(cluster_client, "w1")
    assert pushed[-1]["action"] == CommandAction.LIFECYCLE
    assert pushed[-1]["lifecycle"] == "suspended"
    assert pushed[-1]["updated_at"] == result.updated_at

    await manager.resume_worker("w1")
    assert (await manager.get_worker_admin_state("w1")).lifecycle == "active"

    await manager.drain_worker("w1", reason="rollout")
    state = await manager.get_worker_admin_state("w1")
    assert (state.lifecycle, state.reason) == ("draining", "rollout")

    evicted = await manager.evict_worker("w1", force=True, reason="hung")
    assert evicted.action == "force-evict"
    # The lease stays until the worker drops it itself (nothing fakes an eviction).
    assert await cluster_client.exists(f"{V2}:registry:worker:{{w1}}:online")
    assert await cluster_client.sismember(f"{V2}:registry:worker:admin_workers", "w1")
    admin = await cluster_client.hgetall(f"{V2}:registry:worker:{{w1}}:admin")
    assert admin["lifecycle"] == "evicted"
    pushed = await commands(cluster_client, "w1")
    assert [c["lifecycle"] for c in pushed] == ["suspended", "active", "draining", "evicted"]
    assert pushed[-1]["force"] is True

    cleared = await manager.clear_worker_admin_state("w1")
    assert cleared.online is True  # the seeded lease was not deleted by the eviction
    assert not await cluster_client.exists(f"{V2}:registry:worker:{{w1}}:admin")
    assert not await cluster_client.sismember(f"{V2}:registry:worker:admin_workers", "w1")
    assert (await manager.get_worker_admin_state("w1")).lifecycle is None

    assert await audit_actions(cluster_client) == [
        ("suspend", "w1"),
        ("resume", "w1"),
        ("drain", "w1"),
        ("force-evict", "w1"),
        ("clear", "w1"),
    ]


async def test_unknown_worker_is_refused(manager: WorkerManager) -> None:
    with pytest.raises(UnknownWorkerError):
        await manager.suspend_worker("ghost")


async def test_deny_and_allow_use_v2_type_sets(
    cluster_client: ClusterClient, manager: WorkerManager
) -> None:
    await register(cluster_client, "w1", ["chat"])
    await register(cluster_client, "w2", ["chat"])

    await manager.deny_worker_for_type("chat", "w2", reason="bad gpu")
    await manager.deny_worker_for_type("chat", "w1")
    assert await cluster_client.smembers(f"{V2}:registry:agent_type:{{chat}}:denied") == {
        "w1",
        "w2",
    }
    assert await manager.get_type_denylist("chat") == ["w1", "w2"]
    assert await cluster_client.smembers(f"{V2}:registry:agent_type:{{chat}}:workers") == set()

    await manager.allow_worker_for_type("chat", "w1")
    assert await manager.get_type_denylist("chat") == ["w2"]
    pushed = await commands(cluster_client, "w1")
    assert [(c["action"], c["agent_type"]) for c in pushed] == [("deny", "chat"), ("allow", "chat")]


async def test_scale_targets_and_overrides(
    cluster_client: ClusterClient, manager: WorkerManager
) -> None:
    await manager.scale_instance("chat", "host-1:42", 3)
    await manager.scale_instance("chat", "host-2:7", 0)
    assert await cluster_client.hgetall(f"{V2}:scale:overrides:chat") == {
        "host-1:42": "3",
        "host-2:7": "0",
    }
    assert await manager.get_scale("chat") == (None, {"host-1:42": 3, "host-2:7": 0})

    # A global target clears the per-instance overrides of that type.
    await manager.scale_type("chat", 5)
    assert await cluster_client.hgetall(f"{V2}:scale:targets") == {"chat": "5"}
    assert not await cluster_client.exists(f"{V2}:scale:overrides:chat")
    assert await manager.get_scale("chat") == (5, {})
    fleet = await xrange(cluster_client, f"{V2}:ctrl:fleet")
    rescales = [decode_command(fields) for _, fields in fleet]
    assert [(c.instance_id, c.count) for c in rescales if c is not None] == [
        ("host-1:42", 3),
        ("host-2:7", 0),
        (None, 5),
    ]
    with pytest.raises(ValueError, match="out of range"):
        await manager.scale_type("chat", 1_000_001)


async def test_wait_applied_on_hand_written_lease(
    cluster_client: ClusterClient, manager: WorkerManager
) -> None:
    await register(cluster_client, "w1", ["chat"])
    result = await manager.suspend_worker("w1")
    # The lease still reports an older applied state: the command stays pending.
    assert await manager.wait_applied(result, timeout=0.2, poll=0.02) is None

    lease = Lease.parse(await cluster_client.get(f"{V2}:registry:worker:{{w1}}:online"))
    confirmed = lease.model_copy(
        update={"lifecycle": Lifecycle.SUSPENDED.value, "admin_applied_at": result.updated_at}
    )
    await cluster_client.set(f"{V2}:registry:worker:{{w1}}:online", confirmed.dump(), ex=60)
    latency = await manager.wait_applied(result, timeout=2.0, poll=0.02)
    assert latency is not None and latency >= 0

    evicted = await manager.evict_worker("w1")
    # Confirmed only when the worker drops its own lease; the admin never deletes it.
    assert await manager.wait_applied(evicted, timeout=0.2, poll=0.02) is None
    await cluster_client.delete(f"{V2}:registry:worker:{{w1}}:online")
    assert await manager.wait_applied(evicted, timeout=2.0, poll=0.02) is not None


async def test_forget_removes_every_key_of_the_worker(
    cluster_client: ClusterClient, manager: WorkerManager
) -> None:
    await register(cluster_client, "w1", ["chat"])
    await manager.deny_worker_for_type("chat", "w1")
    with pytest.raises(WorkerOnlineError):
        await manager.forget_worker("w1")
    assert await manager.worker_exists("w1")

    await cluster_client.delete(f"{V2}:registry:worker:{{w1}}:online")
    await cluster_client.hset(f"{V2}:registry:worker:{{w1}}:active_snapshots", "e1", "{}")
    assert await manager.forget_worker("w1", reason="decommissioned") is True
    for key in Keys("v2").all_worker_keys("w1"):
        assert not await cluster_client.exists(key), key
    assert not await cluster_client.sismember(f"{V2}:registry:workers", "w1")
    assert await manager.get_type_denylist("chat") == []
    assert not await manager.worker_exists("w1")
    assert await manager.forget_worker("w1") is False
    await manager.audit("restart", "host-1:42", "deploy")
    actions = await audit_actions(cluster_client)
    assert ("forget", "w1") in actions
    assert actions[-1] == ("restart", "host-1:42")


@pytest.mark.parametrize("worker_id", ["worker-07", "w{x}", "wörker 7:\u00e9", "a}b"])
async def test_server_agrees_same_worker_keys_share_a_slot(
    redis_cluster: RedisCluster, cluster_client: ClusterClient, worker_id: str
) -> None:
    keys = Keys("v2").all_worker_keys(worker_id)
    slots = {
        await cluster_client.execute_command(
            "CLUSTER KEYSLOT", key, target_nodes=ClusterClient.RANDOM
        )
        for key in keys
    }
    assert slots == {key_slot(keys[0].encode())}
    # So the server runs one multi-key command and one transaction over all of them.
    reply = redis_cluster.cli(redis_cluster.port, "-c", "EXISTS", *keys)
    assert reply == "0", reply
    async with cluster_client.pipeline(transaction=True) as pipe:
        for key in keys:
            pipe.exists(key)
        assert await pipe.execute() == [0] * len(keys)


async def test_v1_keys_of_one_worker_cross_slots(
    redis_cluster: RedisCluster, cluster_client: ClusterClient
) -> None:
    # Why v2 exists: the same multi-key operations over v1 keys are refused.
    keys = Keys("v1").all_worker_keys("w1")
    reply = redis_cluster.cli(redis_cluster.port, "-c", "EXISTS", *keys)
    assert "CROSSSLOT" in reply
    with pytest.raises(CrossSlotTransactionError):
        async with cluster_client.pipeline(transaction=True) as pipe:
            for key in keys:
                pipe.exists(key)
            await pipe.execute()


async def test_lease_written_by_camelcase_runtime_is_read(
    cluster_client: ClusterClient, manager: WorkerManager
) -> None:
    raw = {"workerId": "java-1", "instanceId": "jvm:9", "queues": ["chat"], "lastSeen": 5}
    await cluster_client.set(f"{V2}:registry:worker:{{java-1}}:online", json.dumps(raw))
    lease = await manager.get_lease("java-1")
    assert lease is not None
    assert (lease.worker_id, lease.instance_id, lease.agent_types) == ("java-1", "jvm:9", ["chat"])


async def test_admin_state_survives_a_primary_failover(
    redis_cluster_replicas: RedisCluster,
) -> None:
    cluster = redis_cluster_replicas
    settings = load(RedisSettings, cluster_host=cluster.host, cluster_port=cluster.port)
    client = create_redis(settings)
    assert isinstance(client, ClusterClient)
    manager = WorkerManager(client, settings.keys, operator=OPERATOR)
    try:
        await register(client, "w1", ["chat"])
        await manager.suspend_worker("w1", reason="before failover")
        primary = cluster.port_for_slot(key_slot(f"{V2}:registry:worker:{{w1}}:admin".encode()))
        # Acknowledged by a replica before the primary goes away.
        assert cluster.cli(primary, "WAIT", "1", "5000") == "1"

        promoted = cluster.fail_over(primary)
        assert promoted != primary
        assert promoted == cluster.port_for_slot(
            key_slot(f"{V2}:registry:worker:{{w1}}:admin".encode())
        )

        state = await manager.get_worker_admin_state("w1")
        assert (state.lifecycle, state.reason) == ("suspended", "before failover")
        await manager.resume_worker("w1")
        assert (await manager.get_worker_admin_state("w1")).lifecycle == "active"

        # The old primary comes back as a replica of the promoted one.
        cluster.start_node(primary)
        cluster.wait_ok(timeout=30)
        assert primary in cluster.replica_ports()
    finally:
        await client.aclose()


async def test_an_id_starting_with_a_brace_uses_the_sdks_keys_and_stays_manageable(
    cluster_client: ClusterClient, manager: WorkerManager
) -> None:
    """by-framework's key factories spell ``registry:worker:{}x}:online`` (an empty tag:
    each key hashes on its whole name, in every SDK): the admin finds that worker, and
    its writes and ``forget`` go key by key, never one multi-slot command."""
    await cluster_client.sadd(f"{V2}:registry:workers", "}x")
    lease = json.dumps({"version": 1, "token": "t", "last_seen": now_ms(), "ip_address": ""})
    await cluster_client.set(f"{V2}:registry:worker:{{}}x}}:online", lease, ex=15)
    result = await manager.suspend_worker("}x", "odd id")
    assert result.runtime == "by-framework"
    admin = await cluster_client.hgetall(f"{V2}:registry:worker:{{}}x}}:admin")
    assert admin["lifecycle"] == "suspended"
    await cluster_client.delete(f"{V2}:registry:worker:{{}}x}}:online")
    assert await manager.forget_worker("}x") is True
    assert not await cluster_client.exists(f"{V2}:registry:worker:{{}}x}}:admin")
