"""byconsole and worker_runtime beside by-framework's TypeScript and Java SDKs (docs/protocol.md).

Neither SDK can be installed here: :mod:`tests.interop.foreign_sdk` behaves on the wire
as their sources say, and each test names the SDK file and function it stands for. Real
``redis-server``; our workers are real processes where the property is about them.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
from pathlib import Path
from typing import Any

from redis.asyncio import Redis

from tests.backends import Backend
from tests.integration.cli_helpers import cli_env, run
from tests.integration.runtime_helpers import eventually, spawn_worker, stop_process
from tests.interop.foreign_sdk import ForeignAdmin, ForeignWorker, history_point, presence
from worker_runtime.admin import WorkerManager
from worker_runtime.fleet import FleetReader
from worker_runtime.keys import Keys
from worker_runtime.models import (
    SOURCE_BF_TS_JAVA,
    AdminAction,
    Lease,
    Lifecycle,
    MetricsPoint,
    Status,
    now_ms,
)
from worker_runtime.snapshot import FleetSnapshot, WorkerView

K = Keys()


async def _read(reader: FleetReader) -> FleetSnapshot:
    return await reader.read()


def _worker(snap: FleetSnapshot, worker_id: str) -> WorkerView:
    return next(w for w in snap.workers if w.worker_id == worker_id)


async def test_foreign_liveness_follows_each_sdks_known_lease_ttl(backend: Backend) -> None:
    """TS ``src/registry.ts`` ``claimWorkerId`` / ``heartbeatWorker`` and Java
    ``core/WorkerRegistry.java`` ``claimWorkerId`` / ``heartbeatWorker`` (claim 60 s with
    ``last_seen: 0``, lease 15 s, beat 5 s); Python ``core/registry.py`` (lease 30 s);
    a lease in the plain heartbeat shape (TTL 90 s, beat 30 s). Stale once two beats were missed,
    judged by the TTL left, never by the writer's clock. On a cluster (v2 keys) too, with
    an id starting with ``}`` spelled as the SDKs spell it (``prefix{id}suffix``)."""
    redis: Any = backend.redis
    K = backend.keys
    odd = ForeignWorker(redis, K, "}odd", ["chat"], "ts")
    await odd.start()
    reader = FleetReader(redis, K, discover_every=None)
    ts = ForeignWorker(redis, K, "ts-1", ["chat"], "ts")
    java = ForeignWorker(redis, K, "java-1", ["chat"], "java")
    await ts.claim()
    await java.claim()
    snap = await _read(reader)
    # Claimed, never beaten: starting (it used to look online for a minute).
    assert _worker(snap, "ts-1").status is Status.STARTING
    assert _worker(snap, "java-1").status is Status.STARTING
    await ts.start()
    await java.start()
    snap = await _read(reader)
    assert _worker(snap, "ts-1").status is Status.ONLINE
    assert _worker(snap, "java-1").status is Status.ONLINE
    assert _worker(snap, "}odd").status is Status.ONLINE
    if K.schema == "v2":
        assert await redis.exists("byai_gateway:v2:registry:worker:{}odd}:online")
    # 11 s since the last renewal of a 15 s lease (killed): two beats missed.
    await redis.pexpire(K.worker_online("ts-1"), 4_000)
    await redis.pexpire(K.worker_online("java-1"), 9_000)  # 6 s: one beat late, fine
    snap = await _read(reader)
    assert _worker(snap, "ts-1").status is Status.STALE
    assert _worker(snap, "java-1").status is Status.ONLINE
    # The Python SDK renews to 30 s: 18 s left is 12 s without a beat.
    await redis.sadd(K.workers, "py-1", "py-2")
    await redis.set(K.worker_online("py-1"), presence("t1", now_ms()), px=18_000)
    await redis.set(K.worker_online("py-2"), presence("t2", now_ms() - 90_000), px=27_000)
    snap = await _read(reader)
    assert _worker(snap, "py-1").status is Status.STALE
    # Its clock 90 s behind says nothing: 3 s since the renewal by Redis's clock.
    assert _worker(snap, "py-2").status is Status.ONLINE
    # Seen with 27 s left once, the reader knows py-2's TTL is 30 s: 12 s left is stale
    # (a 15 s lease with 12 s left would be fresh).
    await redis.pexpire(K.worker_online("py-2"), 12_000)
    snap = await _read(reader)
    assert _worker(snap, "py-2").status is Status.STALE
    # The plain heartbeat shape: TTL 90 s, beat 30 s; 20 s left is 70 s since the beat.
    seed = {"instanceId": "seed-1", "queues": ["chat"], "activeJobCount": 0, "hostname": "h"}
    await redis.sadd(K.workers, "seed-1", "seed-2")
    await redis.set(K.worker_online("seed-1"), json.dumps(seed), px=20_000)
    await redis.set(K.worker_online("seed-2"), json.dumps(seed), px=85_000)
    snap = await _read(reader)
    assert _worker(snap, "seed-1").status is Status.STALE
    assert _worker(snap, "seed-2").status is Status.ONLINE


async def test_a_foreign_beat_unrenewed_on_the_readers_clock_is_stale(redis: Redis) -> None:
    """TS ``src/heartbeat.ts`` ``start`` (a killed worker stops renewing, its lease still
    has TTL left): a reader that saw the same beat for more than two intervals of its own
    monotonic clock shows it stale."""
    reader = FleetReader(redis, K, discover_every=None)
    ts = ForeignWorker(redis, K, "ts-k", ["chat"], "ts")
    await ts.start()
    assert _worker(await _read(reader), "ts-k").status is Status.ONLINE
    # The reader's record of that beat, 11 s of its clock ago (no renewal since).
    last_seen, first_seen, most = reader._beats["ts-k"]
    reader._beats["ts-k"] = (last_seen, first_seen - 11.0, most)
    assert _worker(await _read(reader), "ts-k").status is Status.STALE
    await ts.heartbeat()  # a renewal: a new beat, fresh again
    await asyncio.sleep(0.002)
    assert _worker(await _read(reader), "ts-k").status is Status.ONLINE


async def test_active_jobs_of_a_worker_without_a_status_hash_are_its_pending_entries(
    redis: Redis,
) -> None:
    """TS ``src/runner.ts`` ``poll`` (XREADGROUP as consumer ``workerId`` in the runner's
    group) and Java ``worker/WorkerRunner.java``: no status hash is ever written."""
    ts = ForeignWorker(redis, K, "ts-busy", ["chat"], "ts")
    await ts.start()
    for n in range(5):
        await redis.xadd(K.type_stream("chat"), {"data": json.dumps({"n": n})})
    assert len(await ts.take("chat", 3)) == 3
    assert not await redis.exists(K.worker_status("ts-busy"))
    reader = FleetReader(redis, K, discover_every=None)
    assert _worker(await _read(reader), "ts-busy").active_jobs == 3
    assert (await reader.read_worker_detail("ts-busy")).worker.active_jobs == 3  # worker info
    await ts.finish()
    assert _worker(await _read(reader), "ts-busy").active_jobs == 0


async def test_overtaken_commands_report_superseded_and_the_worker_converges(
    redis_url: str, redis: Redis, tmp_path: Path
) -> None:
    """On a real worker process: two operators alternate suspend and
    resume; a command overtaken by the other operator's is never reported applied."""
    # A lease long enough to outlive the CLI's start while the worker is stopped.
    proc = spawn_worker(
        redis_url,
        "tests.handlers:record",
        ["alt"],
        "alt",
        extra_env={"BYAI_LEASE_TTL": "10"},
        log_path=tmp_path / "w.log",
    )
    alice = WorkerManager(redis, K, operator="alice@a")
    bob_client: Redis = Redis.from_url(redis_url, decode_responses=True)
    bob = WorkerManager(bob_client, K, operator="bob@b")
    wid = "alt-r0"
    try:
        await eventually(lambda: redis.exists(K.worker_online(wid)), timeout=15)
        # Back to back, before the worker can apply the first: it is overtaken.
        first = await alice.suspend_worker(wid, "alice")
        second = await bob.resume_worker(wid, "bob")
        overtaken = await alice.wait_outcome(first, timeout=5)
        applied = await bob.wait_outcome(second, timeout=5)
        assert overtaken.latency is None
        assert overtaken.superseded_line is not None
        assert overtaken.superseded_line.startswith("superseded by resume at ")
        assert overtaken.superseded_line.endswith(" by bob@b")
        assert applied.latency is not None and applied.superseded is None

        # Alternating at random: every outcome is applied or superseded, none times out,
        # and every applied one was the hash's write when the lease reported it.
        async def operator(manager: WorkerManager, start: int) -> list[tuple[bool, bool]]:
            seen: list[tuple[bool, bool]] = []
            for n in range(start, start + 8):
                if n % 2:
                    result = await manager.suspend_worker(wid, f"{manager.operator} {n}")
                else:
                    result = await manager.resume_worker(wid, f"{manager.operator} {n}")
                outcome = await manager.wait_outcome(result, timeout=5)
                seen.append((outcome.latency is not None, outcome.superseded is not None))
            return seen

        runs = await asyncio.gather(operator(alice, 0), operator(bob, 1))
        outcomes = [o for r in runs for o in r]
        assert all(a != s for a, s in outcomes), outcomes  # exactly one of the two
        admin = await alice.get_worker_admin_state(wid)

        async def converged() -> bool:
            lease = await alice.get_lease(wid)
            return (
                lease is not None
                and lease.lifecycle == admin.lifecycle
                and lease.admin_applied_at == admin.updated_at
            )

        await eventually(converged, timeout=5)

        # The CLI's --wait, overtaken while the worker is stopped: exits non-zero. From
        # active, so only the CLI's write can make the hash say suspended.
        ready = await bob.resume_worker(wid, "bob: ready")
        assert (await bob.wait_outcome(ready, timeout=5)).latency is not None
        os.kill(proc.pid, signal.SIGSTOP)
        env = cli_env(redis_url, tmp_path)
        waiting = asyncio.create_task(
            asyncio.to_thread(run, ["worker", "suspend", wid, "--wait", "--timeout", "8"], env)
        )
        await eventually(lambda: _lifecycle_is(redis, wid, "suspended"), timeout=10, interval=0.02)
        await bob.resume_worker(wid, "bob: not now")
        result = await waiting
        assert result.code == 1, (result.out, result.err)
        assert "superseded by resume at" in result.out + result.err
        assert "by bob@b" in result.out + result.err
        os.kill(proc.pid, signal.SIGCONT)
        final = await alice.get_worker_admin_state(wid)

        async def follows_bob() -> bool:
            lease = await alice.get_lease(wid)
            return (
                lease is not None
                and lease.lifecycle == "active"
                and (lease.admin_applied_at == final.updated_at)
            )

        await eventually(follows_bob, timeout=10)
        assert "ERROR" not in (tmp_path / "w.log").read_text()
    finally:
        with_signal = proc.poll() is None
        if with_signal:
            os.kill(proc.pid, signal.SIGCONT)
        stop_process(proc)
        await bob_client.aclose()


async def _lifecycle_is(redis: Redis, worker_id: str, lifecycle: str) -> bool:
    return await redis.hget(K.worker_admin(worker_id), "lifecycle") == lifecycle


async def test_a_ts_admin_30_s_behind_is_followed_and_applied_is_never_shown_wrongly(
    redis_url: str, redis: Redis, tmp_path: Path
) -> None:
    """TS ``src/admin/worker_manager.ts`` ``resumeWorker`` (``setWorkerAdminState`` stamps
    ``Date.now()`` of its host, 30 s behind here; then the ``RESUME_WORKER`` push): the
    worker converges to the hash whatever its stamp, and the console shows ``applied``
    only once the lease reports the hash's lifecycle."""
    proc = spawn_worker(
        redis_url, "tests.handlers:record", ["lag"], "lag", log_path=tmp_path / "w.log"
    )
    ours = WorkerManager(redis, K, operator="ops@console")
    behind = ForeignAdmin(redis, K, clock_offset_ms=-30_000)
    wid = "lag-r0"
    reader = FleetReader(redis, K, discover_every=None)
    try:
        await eventually(lambda: redis.exists(K.worker_online(wid)), timeout=15)
        suspend = await ours.suspend_worker(wid, "maintenance")
        assert (await ours.wait_outcome(suspend, timeout=5)).latency is not None
        await behind.resume(wid)
        stamp = int(await redis.hget(K.worker_admin(wid), "updated_at") or 0)
        assert stamp < suspend.updated_at  # older stamp, later write

        async def resumed() -> bool:
            lease = await ours.get_lease(wid)
            return lease is not None and lease.lifecycle == "active"

        await eventually(resumed, timeout=5)
        lease = await ours.get_lease(wid)
        assert lease is not None and lease.admin_applied_at == stamp
        outcome = await ours.wait_outcome(suspend, timeout=1)
        assert outcome.superseded_line is not None
        assert outcome.superseded_line.endswith("by an admin that records no user")
        view = _worker(await _read(reader), wid)
        assert view.lifecycle == "active" and view.applied_lifecycle == "active"
        # A push of ours overtaken by a newer hash write does not win either: the hash
        # now says suspended (a TS admin), our stale resume push must not resume it.
        await behind.suspend(wid, "ts: hold")

        async def suspended() -> bool:
            lease = await ours.get_lease(wid)
            return lease is not None and lease.lifecycle == "suspended"

        await eventually(suspended, timeout=5)
        await ours.redis.xadd(
            K.worker_stream(wid),
            {"data": json.dumps({"action_type": "RESUME_WORKER", "header": {}, "body": {}})},
        )
        await asyncio.sleep(1.0)  # three of its beats
        lease = await ours.get_lease(wid)
        assert lease is not None and lease.lifecycle == "suspended"
    finally:
        stop_process(proc)


async def test_a_ts_worker_evicted_by_its_admin_stays_known_and_resumable(
    redis_url: str, redis: Redis, tmp_path: Path
) -> None:
    """TS ``src/admin/worker_manager.ts`` ``evictWorker`` (no admin-state index) and
    ``src/runner.ts`` ``release`` (the evicted worker deletes its lease and leaves
    ``registry:workers``): its admin hash alone makes it known."""
    ts = ForeignWorker(redis, K, "ts-ev", ["chat"], "ts", beat=0.2)
    await ts.start()
    ts.run()
    await ForeignAdmin(redis, K).evict("ts-ev", reason="ts admin")
    await asyncio.wait_for(ts.exited.wait(), 5)
    assert not await redis.sismember(K.workers, "ts-ev")
    assert not await redis.exists(K.worker_online("ts-ev"))
    assert not await redis.sismember(K.admin_workers, "ts-ev")
    manager = WorkerManager(redis, K, operator="ops@console")
    assert await manager.worker_exists("ts-ev")
    env = cli_env(redis_url, tmp_path)
    listed = await asyncio.to_thread(run, ["worker", "list", "--all", "--json"], env)
    assert listed.code == 0, listed.err
    rows = {w["worker_id"]: w for w in listed.json()}
    assert rows["ts-ev"]["lifecycle"] == "evicted"
    resumed = await asyncio.to_thread(run, ["worker", "resume", "ts-ev"], env)
    assert resumed.code == 0, (resumed.out, resumed.err)
    assert await redis.hget(K.worker_admin("ts-ev"), "lifecycle") == "active"


async def test_java_ignores_the_denylist_in_routing_and_the_console_says_so(
    redis_url: str, redis: Redis, tmp_path: Path
) -> None:
    """Java ``worker/GatewayWorker.java`` ``startHeartbeat`` calls
    ``WorkerRegistry.registerWorkerMembership`` (no denylist check) every beat; TS
    ``src/registry.ts`` ``registerWorkerMembership`` skips denied types."""
    java = ForeignWorker(redis, K, "java-d", ["chat"], "java")
    ts = ForeignWorker(redis, K, "ts-d", ["chat"], "ts")
    await java.start()
    await ts.start()
    manager = WorkerManager(redis, K, operator="ops@console")
    result = await manager.deny_worker_for_type("chat", "java-d", "bad model")
    assert result.action is AdminAction.DENY
    env = cli_env(redis_url, tmp_path)
    denied = await asyncio.to_thread(run, ["type", "deny", "chat", "ts-d"], env)
    assert denied.code == 0, denied.err
    # Nothing is pushed to a by-framework worker: it reads the set at its next beat.
    assert "applies it at its next heartbeat" in denied.out, denied.out
    await java.beat_once()
    await ts.beat_once()
    routable = await redis.smembers(K.type_workers("chat"))
    assert "java-d" in routable and "ts-d" not in routable
    snap = await _read(FleetReader(redis, K, discover_every=None))
    chat = next(t for t in snap.types if t.name == "chat")
    assert chat.denied == ["java-d", "ts-d"]
    assert chat.denied_routable == ["java-d"]
    assert chat.workers == ["java-d"]  # counted as routable: it is
    listed = await asyncio.to_thread(run, ["type", "list"], env)
    assert listed.code == 0, listed.err
    assert "java-d (denied, still routable: this runtime ignores denylist routing)" in listed.out


async def test_drain_of_a_by_framework_worker_is_an_eviction_that_finishes_its_tasks(
    redis_url: str, redis: Redis, tmp_path: Path
) -> None:
    """TS ``src/runner.ts`` ``run`` (an evicted runner leaves its loop and awaits its
    in-flight tasks, ``force`` or not: ``evictForce`` is never read): ``drain`` maps to an
    eviction without force, so a script draining a mixed fleet works."""
    ts = ForeignWorker(redis, K, "ts-dr", ["chat"], "ts", beat=0.2)
    await ts.start()
    await redis.xadd(K.type_stream("chat"), {"data": "{}"})
    assert len(await ts.take("chat", 1)) == 1
    ts.run()
    env = cli_env(redis_url, tmp_path)
    drained = await asyncio.to_thread(run, ["worker", "drain", "ts-dr", "--json"], env)
    assert drained.code == 0, (drained.out, drained.err)
    doc = drained.json()
    assert (doc["action"], doc["requested"]) == ("evict", "drain")
    await asyncio.wait_for(ts.exited.wait(), 5)
    assert not ts.held and not ts.interrupted  # its task finished, none was dropped
    pending = await redis.xpending(K.type_stream("chat"), ts.group)
    assert pending["pending"] == 0
    admin = await redis.hgetall(K.worker_admin("ts-dr"))
    assert admin["lifecycle"] == Lifecycle.EVICTED.value
    commands: Any = await redis.xrange(K.worker_stream("ts-dr"))
    envelope = json.loads(commands[-1][1]["data"])
    assert (envelope["action_type"], envelope["body"]["force"]) == ("EVICT_WORKER", False)
    other = ForeignWorker(redis, K, "ts-dr2", ["chat"], "ts")
    await other.start()
    text = await asyncio.to_thread(run, ["worker", "drain", "ts-dr2"], env)
    assert text.code == 0, text.err
    assert "drain ts-dr2 (by-framework has no drain: sent as an eviction without force" in text.out


async def test_ts_and_java_metrics_points_are_labelled_and_kept_apart(redis: Redis) -> None:
    """TS ``src/metrics/snapshot.ts`` ``buildHistoryPoint`` / ``saveHistoryPointToRedis``
    and Java ``metrics/MetricsCollector.java`` ``buildHistoryPoint`` (six fields,
    ``active_executions`` 0, ``queue_depth_total`` = XLEN) beside the Python collector's
    points: two definitions, two series, none mixed with ours."""
    now = now_ms()
    python_point = {
        "generated_at": now - 2_000,
        "queue_depth_total": 7,
        "consumer_pending_total": 1,
    }
    await redis.zadd(
        K.metrics_history,
        {
            history_point(now - 1_000, 2, 40): now - 1_000,
            json.dumps(python_point): now - 2_000,
        },
    )
    assert MetricsPoint.parse(history_point(now, 1, 3)).source == SOURCE_BF_TS_JAVA
    snap = await _read(FleetReader(redis, K, discover_every=None))
    sources = sorted(p.source or "" for p in snap.metrics.foreign)
    assert sources == ["by-framework", SOURCE_BF_TS_JAVA]
    assert not snap.metrics.history  # none of theirs in our series


def test_lease_of_a_claim_parses_as_by_framework() -> None:
    """TS/Java ``encodeWorkerPresence`` writes what the Python SDK does."""
    lease = Lease.parse(presence("tok", 0))
    assert lease.is_by_framework and lease.last_seen == 0
