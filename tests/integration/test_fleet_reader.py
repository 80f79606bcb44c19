"""FleetReader against a real redis-server: foreign payloads, bad data, constant round trips."""

from __future__ import annotations

import json
from typing import Any

import pytest
from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster as ClusterClient
from redis.exceptions import ConnectionError as RedisConnectionError

from tests.backends import Backend
from tests.cluster import RedisCluster
from tests.redis_server import free_port
from worker_runtime.admin import WorkerManager
from worker_runtime.connection import create_redis
from worker_runtime.fleet import FleetReader
from worker_runtime.keys import CONSUMER_GROUP, Keys
from worker_runtime.models import Lease, MetricsPoint, Status, cut_text, now_ms
from worker_runtime.settings import RedisSettings, load
from worker_runtime.snapshot import CommandState

K = Keys()

# Spelled by hand on purpose (docs/protocol.md, Redis keys): this is what another runtime writes.
V1 = {
    "workers": "byai_gateway:registry:workers",
    "online": "byai_gateway:registry:worker:online:{}",
    "admin": "byai_gateway:registry:worker:admin:{}",
    "agent_types": "byai_gateway:registry:worker:agent_types:{}",
    "routable": "byai_gateway:registry:agent_type:workers:{}",
    "denied": "byai_gateway:registry:agent_type:denied:{}",
    "stream": "byai_gateway:ctrl:agent_type:{}",
    "history": "by_framework:obs:history",
}


class CountingRedis:
    """Counts round trips on the wire: an independent check of the reader's own count.

    On a single Redis every connection the pool hands out is watched: a write after
    the connection read a reply (or its first write) starts a round trip. A cluster
    pipeline talks to every node at once, so there its executions are counted. The
    client is wrapped in place, so the reader still sees the real client class (it
    reads leases differently on a cluster).
    """

    def __init__(self, client: Redis | ClusterClient) -> None:
        self.client = client
        self.executes = 0
        if isinstance(client, ClusterClient):
            self._count_pipelines(client)
        else:
            self._count_writes(client)

    def _count_pipelines(self, client: ClusterClient) -> None:
        make_pipeline = client.pipeline

        def pipeline(transaction: bool = True) -> Any:
            pipe = make_pipeline(transaction=transaction)
            original = pipe.execute

            async def execute(raise_on_error: bool = True) -> Any:
                self.executes += 1
                return await original(raise_on_error=raise_on_error)

            pipe.execute = execute  # type: ignore[method-assign, assignment]
            return pipe

        client.pipeline = pipeline  # type: ignore[method-assign, assignment]

    def _count_writes(self, client: Redis) -> None:
        pool = client.connection_pool
        get_connection = pool.get_connection
        watched: set[int] = set()

        def watch(conn: Any) -> None:
            writing = False
            send, read = conn.send_packed_command, conn.read_response

            async def send_packed_command(*args: Any, **kwargs: Any) -> Any:
                nonlocal writing
                if not writing:
                    self.executes += 1
                writing = True
                return await send(*args, **kwargs)

            async def read_response(*args: Any, **kwargs: Any) -> Any:
                nonlocal writing
                writing = False
                return await read(*args, **kwargs)

            conn.send_packed_command = send_packed_command
            conn.read_response = read_response

        async def counted(*args: Any, **kwargs: Any) -> Any:
            conn = await get_connection(*args, **kwargs)  # type: ignore[no-untyped-call]
            if id(conn) not in watched:
                watched.add(id(conn))
                watch(conn)
            return conn

        pool.get_connection = counted  # type: ignore[method-assign]


async def test_foreign_v1_workers_snake_camel_offline_malformed(redis: Redis) -> None:
    now = now_ms()
    await redis.sadd(V1["workers"], "w-snake", "w-camel", "w-gone", "w-bad")
    snake = {
        "worker_id": "w-snake",
        "instance_id": "host-a:100",
        "hostname": "host-a",
        "ip_address": "10.0.0.7",
        "pid": 100,
        "role": "all",
        "agent_types": ["chat", "embed"],
        "lifecycle": "active",
        "status": "busy",
        "concurrency": 8,
        "active_jobs": 3,
        "processed": 42,
        "failed": 1,
        "started_at": now - 60_000,
        "last_seen": now - 1_000,
        "app_version": "2.4.1",
        "runtime_version": "0.1.0",
        "heartbeat_interval": 5,
        "lease_ttl": 15,
    }
    camel = {
        "workerId": "w-camel",
        "instanceId": "host-b:7",
        "ipAddress": "10.0.0.8",
        "lastSeen": now - 2_000,
        "startedAt": now - 5_000,
        "appVersion": "ts-1.0",
        "activeJobCount": 5,
        "queues": ["chat"],
        "somethingElse": {"nested": True},
    }
    await redis.set(V1["online"].format("w-snake"), json.dumps(snake), px=15_000)
    # A lease stating no TTL is judged as the plain heartbeat shape's (TTL 90 s, beat 30 s).
    await redis.set(V1["online"].format("w-camel"), json.dumps(camel), px=90_000)
    await redis.set(V1["online"].format("w-bad"), "{not json", px=15_000)
    await redis.sadd(V1["agent_types"].format("w-snake"), "chat", "embed")
    await redis.sadd(V1["agent_types"].format("w-gone"), "chat")
    await redis.sadd(V1["routable"].format("chat"), "w-snake", "w-camel")
    await redis.sadd(V1["denied"].format("embed"), "w-snake")
    await redis.hset(
        V1["admin"].format("w-camel"),
        mapping={"lifecycle": "suspended", "reason": "maintenance", "updated_at": str(now)},
    )
    await redis.xgroup_create(V1["stream"].format("chat"), CONSUMER_GROUP, id="0", mkstream=True)
    for _ in range(3):
        await redis.xadd(V1["stream"].format("chat"), {"kind": "task", "data": "{}"})

    reader = FleetReader(redis, K, endpoint="test")
    snap = await reader.read()
    by_id = {w.worker_id: w for w in snap.workers}
    assert list(by_id) == ["w-bad", "w-camel", "w-gone", "w-snake"]

    s = by_id["w-snake"]
    assert (s.status, s.lifecycle, s.runtime_status) == (Status.ONLINE, "active", "busy")
    assert (s.instance_id, s.hostname, s.ip_address, s.pid) == (
        "host-a:100",
        "host-a",
        "10.0.0.7",
        100,
    )
    assert (s.active_jobs, s.processed, s.failed, s.concurrency) == (3, 42, 1, 8)
    assert s.agent_types == ["chat", "embed"] and s.denied_types == ["embed"]
    assert (s.app_version, s.runtime_version, s.role) == ("2.4.1", "0.1.0", "all")
    assert s.command_state is None

    c = by_id["w-camel"]
    assert (c.status, c.instance_id, c.ip_address) == (Status.ONLINE, "host-b:7", "10.0.0.8")
    assert (c.active_jobs, c.app_version, c.agent_types) == (5, "ts-1.0", ["chat"])
    assert (c.lifecycle, c.reason, c.applied_lifecycle) == ("suspended", "maintenance", None)
    assert c.command_state is CommandState.PENDING  # lease has no admin_applied_at

    g = by_id["w-gone"]
    assert (g.status, g.agent_types, g.last_seen) == (Status.OFFLINE, ["chat"], None)

    b = by_id["w-bad"]
    assert (b.status, b.lease_valid) == (Status.STALE, False)

    chat = next(t for t in snap.types if t.name == "chat")
    assert (chat.workers, chat.depth, chat.pending, chat.length) == (
        ["w-camel", "w-snake"],
        3,
        0,
        3,
    )
    embed = next(t for t in snap.types if t.name == "embed")
    assert embed.denied == ["w-snake"]
    assert {i.instance_id for i in snap.instances} == {"host-a:100", "host-b:7"}
    assert snap.metrics.workers_online == 2 and snap.metrics.active_executions == 8
    assert snap.redis.round_trips == reader.round_trips <= 3
    json.dumps(snap.model_dump(mode="json"))  # the --format json document serialises


async def test_wrong_key_types_never_break_a_read(backend: Backend) -> None:
    redis, k = backend.redis, backend.keys
    now = now_ms()
    await redis.sadd(k.workers, "w1", "w2", "w3")
    await redis.set(k.worker_online("w1"), json.dumps({"last_seen": now, "agent_types": ["t"]}))
    await redis.set(k.worker_admin("w1"), "admin as a string")
    await redis.hset(k.worker_online("w2"), mapping={"a": "1"})  # lease as a hash
    await redis.rpush(k.worker_agent_types("w2"), "t")  # a list where a set belongs
    await redis.set(k.worker_online("w3"), json.dumps(["a", "list"]))
    await redis.sadd(k.agent_types, "t", "u")
    await redis.set(k.type_workers("t"), "x")
    await redis.hset(k.type_denied("t"), mapping={"a": "b"})
    await redis.sadd(k.type_stream("t"), "not a stream")
    await redis.set(k.type_stream("u"), "not a stream")
    await redis.sadd(k.scale_overrides("t"), "x")
    await redis.sadd(k.scale_targets, "x")
    await redis.hset(k.leader_lock, mapping={"x": "y"})
    await redis.sadd(k.instances, "i1")
    await redis.sadd(k.metrics_history, "x")
    await redis.set(k.audit_stream, "x")

    reader = FleetReader(redis, k)
    snap = await reader.read()
    statuses = {w.worker_id: w.status for w in snap.workers}
    assert statuses == {"w1": Status.ONLINE, "w2": Status.OFFLINE, "w3": Status.STALE}
    assert [t.name for t in snap.types] == ["t", "u"]
    assert all(t.depth == 0 and t.workers == [] for t in snap.types)
    assert snap.instances == [] and snap.events == [] and snap.metrics.history == []
    assert snap.leader.instance_id is None
    detail = await reader.read_worker_detail("w2")
    assert detail.known and detail.lease is None


async def test_hostile_strings_are_kept_as_data(backend: Backend) -> None:
    redis, k = backend.redis, backend.keys
    now = now_ms()
    hostile = "[bold red]boom[/] [@click=app.quit]x[/] \x1b]0;pwned\x07 \x1b[2J"
    await redis.sadd(k.workers, hostile, "big")
    lease = {"last_seen": now, "hostname": hostile, "agent_types": [hostile], "reason": "x"}
    await redis.set(k.worker_online(hostile), json.dumps(lease))
    await redis.set(
        k.worker_online("big"),
        json.dumps({"last_seen": now, "hostname": "h" * 1_000_000, "app_version": "1"}),
    )
    await redis.hset(k.worker_admin(hostile), mapping={"lifecycle": hostile, "reason": hostile})
    await redis.set(k.worker_online("bytes"), b"\xff\xfe{")
    await redis.sadd(k.workers, "bytes")
    # Readers use create_redis's client: invalid UTF-8 decodes with replacement characters.
    client = create_redis(backend.settings, retries=0)
    try:
        snap = await FleetReader(client, k).read()
    finally:
        await client.aclose()
    by_id = {w.worker_id: w for w in snap.workers}
    w = by_id[hostile]
    # The reader keeps the data verbatim; renderers sanitise (byconsole.text.safe_text).
    assert (w.hostname, w.lifecycle, w.reason, w.agent_types) == (
        hostile,
        hostile,
        hostile,
        [hostile],
    )
    # An oversize field is cut with a marker saying how much was stored, never blanked.
    big = by_id["big"]
    assert big.hostname == cut_text("h" * 1_000_000) and big.app_version == "1"
    assert big.hostname.endswith("… [1,000,000 chars, cut]") and len(big.hostname) < 5_000
    assert by_id["bytes"].lease_valid is False
    assert hostile in [t.name for t in snap.types]
    json.dumps(snap.model_dump(mode="json"))


# 2,500 workers span three chunks of the single-Redis bulk script.
@pytest.mark.parametrize("n_workers", [1, 500, 2500])
async def test_round_trips_do_not_grow_with_the_fleet(backend: Backend, n_workers: int) -> None:
    redis, k = backend.redis, backend.keys
    now = now_ms()
    types = ["chat", "embed", "rank"]
    pipe = redis.pipeline(transaction=False)
    for i in range(n_workers):
        wid = f"w-{i:04d}"
        t = types[i % 3]
        iid = f"inst-{i % 5}"
        pipe.sadd(k.workers, wid)
        pipe.sadd(k.worker_agent_types(wid), t)
        pipe.set(
            k.worker_online(wid),
            json.dumps({"instance_id": iid, "agent_types": [t], "last_seen": now}),
        )
        pipe.sadd(k.type_workers(t), wid)
        if i % 7 == 0:
            pipe.hset(k.worker_admin(wid), mapping={"lifecycle": "suspended", "updated_at": now})
    for i in range(5):
        pipe.zadd(k.instances, {f"inst-{i}": now})
        pipe.set(k.instance_online(f"inst-{i}"), json.dumps({"agent_types": types}))
    pipe.sadd(k.agent_types, *types)
    pipe.hset(k.scale_targets, mapping={"chat": 7})
    await pipe.execute()

    counting = CountingRedis(redis)
    reader = FleetReader(counting.client, k)
    await reader.read()  # the first read also discovers stream-only types (SCAN)
    before = counting.executes
    snap = await reader.read()
    assert len(snap.workers) == n_workers
    assert reader.round_trips == counting.executes - before
    assert reader.round_trips <= 3
    suspended = [w.worker_id for w in snap.workers if w.lifecycle == "suspended"]
    assert suspended == [f"w-{i:04d}" for i in range(0, n_workers, 7)]
    assert [w.agent_types for w in snap.workers] == [[types[i % 3]] for i in range(n_workers)]
    quotas = {i.instance_id: i.quota.get("chat") for i in snap.instances}
    assert quotas == {"inst-0": 2, "inst-1": 2, "inst-2": 1, "inst-3": 1, "inst-4": 1}


async def test_pending_until_the_worker_confirms(backend: Backend) -> None:
    redis, k = backend.redis, backend.keys
    now = now_ms()
    await redis.sadd(k.workers, "w1")
    lease = Lease(worker_id="w1", last_seen=now, agent_types=["chat"], heartbeat_interval=5)
    await redis.set(k.worker_online("w1"), lease.dump())
    manager = WorkerManager(redis, k, operator="ops@test")
    result = await manager.suspend_worker("w1", reason="maint")
    reader = FleetReader(redis, k)
    w = (await reader.read()).workers[0]
    assert (w.lifecycle, w.command_state, w.admin_updated_by) == (
        "suspended",
        CommandState.PENDING,
        "ops@test",
    )
    confirmed = lease.model_copy(
        update={"lifecycle": "suspended", "admin_applied_at": result.updated_at}
    )
    await redis.set(k.worker_online("w1"), confirmed.dump())
    snap = await reader.read()
    w = snap.workers[0]
    assert (w.command_state, w.applied_lifecycle) == (CommandState.APPLIED, "suspended")
    assert [(e.action, e.target, e.reason) for e in snap.events] == [("suspend", "w1", "maint")]
    await manager.evict_worker("w1")
    # The admin leaves the lease alone: a graceful eviction is pending until the worker
    # drops it, once its running tasks have finished (until then they must not be
    # reclaimed).
    w = (await reader.read()).workers[0]
    assert (w.status, w.lifecycle, w.command_state) == (
        Status.ONLINE,
        "evicted",
        CommandState.PENDING,
    )
    await manager.evict_worker("w1", force=True)
    # Forced or not, the lease is the worker's to drop (docs/protocol.md, Leases).
    w = (await reader.read()).workers[0]
    assert (w.status, w.lifecycle, w.command_state) == (
        Status.ONLINE,
        "evicted",
        CommandState.PENDING,
    )
    await redis.delete(k.worker_online("w1"))  # the worker complied and left
    w = (await reader.read()).workers[0]
    assert (w.status, w.lifecycle, w.command_state) == (
        Status.OFFLINE,
        "evicted",
        CommandState.APPLIED,
    )


async def test_a_by_framework_lease_is_unconfirmable_never_pending(backend: Backend) -> None:
    redis, k = backend.redis, backend.keys
    # by-framework's presence payload (core/registry.py), no admin_applied_at ever.
    lease = {"version": 1, "token": "t0k", "last_seen": now_ms(), "ip_address": "10.0.0.9"}
    await redis.sadd(k.workers, "bf1")
    await redis.set(k.worker_online("bf1"), json.dumps(lease))
    manager = WorkerManager(redis, k, operator="ops@test")
    reader = FleetReader(redis, k)
    result = await manager.suspend_worker("bf1")
    assert (result.runtime, result.confirmable) == ("by-framework", False)
    assert await manager.wait_applied(result, timeout=5.0) is None  # at once, not 5 s
    w = (await reader.read()).workers[0]
    assert (w.runtime, w.command_state, w.lifecycle) == (
        "by-framework",
        CommandState.UNCONFIRMABLE,
        "suspended",
    )
    assert await redis.sismember(k.admin_workers, "bf1")
    evicted = await manager.evict_worker("bf1", force=True)
    assert evicted.confirmation.value == "lease_gone"
    assert (await reader.read()).workers[0].command_state is CommandState.SENT
    # It leaves the registry on exit (as by-framework does): still listed, by the index.
    await redis.delete(k.worker_online("bf1"))
    await redis.srem(k.workers, "bf1")
    w = (await reader.read()).workers[0]
    assert (w.worker_id, w.status, w.lifecycle) == ("bf1", Status.OFFLINE, "evicted")
    await manager.clear_worker_admin_state("bf1")
    assert not await redis.sismember(k.admin_workers, "bf1")
    assert (await reader.read()).workers == []


async def test_metrics_history_tail_and_leader(backend: Backend) -> None:
    redis, k = backend.redis, backend.keys
    start = now_ms() - 60_000
    for i in range(10):
        point = MetricsPoint(ts=start + i, workers_online=i, queue_depth=2 * i)
        await redis.zadd(k.metrics_history, {point.model_dump_json(): start + i})
    await redis.zadd(k.metrics_history, {"{broken": start + 100})
    await redis.set(k.leader_lock, json.dumps({"instance_id": "i-9", "token": "t", "epoch": 3}))
    snap = await FleetReader(redis, k, history_limit=4).read()
    # No tier written yet: our own points of the shared history, the newest 4 read.
    assert [p.workers_online for p in snap.metrics.history] == [7, 8, 9]
    assert (snap.metrics.tier, snap.metrics.history_range) == (None, "15m")
    # The malformed member is nobody's: kept apart, never in our series.
    assert [(p.ts, p.source) for p in snap.metrics.foreign] == [(0, "unknown")]
    assert (snap.leader.instance_id, snap.leader.epoch) == ("i-9", 3)


async def test_unreachable_redis_raises_connection_error() -> None:
    settings = load(RedisSettings, url=f"redis://127.0.0.1:{free_port()}/0")
    client = create_redis(settings, retries=0)
    try:
        with pytest.raises(RedisConnectionError):
            await FleetReader(client, settings.keys).read()
    finally:
        await client.aclose()


async def test_cluster_v2_read_has_no_crossslot(redis_cluster: RedisCluster) -> None:
    settings = load(RedisSettings, cluster_host=redis_cluster.host, cluster_port=redis_cluster.port)
    client = create_redis(settings)
    keys = settings.keys
    try:
        now = now_ms()
        for i in range(20):
            wid = f"cw-{i}"
            await client.sadd(keys.workers, wid)
            await client.set(
                keys.worker_online(wid), json.dumps({"last_seen": now, "agent_types": ["chat"]})
            )
            await client.hset(
                keys.worker_admin(wid), mapping={"lifecycle": "active", "updated_at": now}
            )
        await client.sadd(keys.agent_types, "chat", "embed")
        await client.xgroup_create(keys.type_stream("chat"), CONSUMER_GROUP, id="0", mkstream=True)
        await client.xadd(keys.type_stream("chat"), {"kind": "task", "data": "{}"})
        reader = FleetReader(client, keys)
        snap = await reader.read()
        assert len(snap.workers) == 20 and all(w.status is Status.ONLINE for w in snap.workers)
        assert {t.name: t.depth for t in snap.types} == {"chat": 1, "embed": 0}
        assert snap.redis.cluster and snap.redis.schema_version == "v2"
        assert reader.round_trips <= 3
        detail = await reader.read_worker_detail("cw-3")
        assert detail.known and detail.worker.status is Status.ONLINE
    finally:
        await client.aclose()
