"""The data plane against real by-framework processes (docs/protocol.md).

* A real by-framework client (``GatewayClient``) is served by our worker: answer and end
  of stream on the session's data stream, its execution record completed.
* A mixed fleet on one agent type (a by-framework worker and ours in one consumer
  group) runs every client task exactly once, with no dead letter.
* by-framework's own metrics reads (``by-admin metrics snapshot`` and its metrics read
  client, which its dashboard's routes call) work on the mixed fleet; our fleet reader
  shows what the by-framework worker is doing; one collector at a time writes the
  history, and the other takes over when it stops.

The dashboard package itself is not installed (its PyPI release needs a dependency
that is not on PyPI): its routes' reads run here through by-framework's own package
(``tests/interop/byf_metrics.py``).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from typing import Any

import pytest
from redis.exceptions import ResponseError

from tests.handlers import DONE_LIST
from tests.interop.harness import HERE, Fleet
from worker_runtime.admin import WorkerManager
from worker_runtime.fleet import FleetReader
from worker_runtime.history import bucket_of
from worker_runtime.keys import CONSUMER_GROUP
from worker_runtime.models import SOURCE_OURS, Lease, MetricsPoint, TierPoint, now_ms
from worker_runtime.producer import Producer

HANDLER = "tests.interop.data_handlers:answer"
FAST_METRICS = {"BY_FRAMEWORK_METRICS_HISTORY_INTERVAL_SECONDS": "1"}


def _policy(fleet: Fleet) -> str:
    # FAIL_FAST: the client checks the type's routing set for an online worker first
    # (ours too: the v2 set is spelled as by-framework spells it).
    return "FAIL_FAST"


def _run_byf(fleet: Fleet, script: str, *args: str, timeout: float = 90) -> dict[str, Any]:
    """Run one of the by-framework scripts next to this file; its JSON result."""
    done = subprocess.run(
        [str(fleet.byf_python), str(HERE / script), *args],
        env=fleet.byf_process_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    with open(fleet.log_dir / f"{script.removesuffix('.py')}.log", "a") as log:
        log.write(done.stdout + done.stderr)
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


async def _online(fleet: Fleet, worker_id: str) -> bool:
    return bool(await fleet.redis.exists(fleet.keys.worker_online(worker_id)))


async def _wait_online(fleet: Fleet, worker_id: str, timeout: float = 20) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not await _online(fleet, worker_id):
        assert loop.time() < deadline, f"{worker_id} never came online"
        await asyncio.sleep(0.05)


async def _groups(fleet: Fleet, agent_type: str) -> list[dict[str, Any]]:
    try:
        reply = await fleet.redis.xinfo_groups(fleet.keys.type_stream(agent_type))
    except ResponseError:
        return []  # no stream yet
    return [g for g in reply if isinstance(g, dict)]


async def _wait_group(fleet: Fleet, agent_type: str, name: str) -> None:
    for _ in range(400):
        if name in [g["name"] for g in await _groups(fleet, agent_type)]:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"no consumer group {name} on {agent_type}")


async def _session_events(fleet: Fleet, session_id: str) -> list[str]:
    entries: Any = await fleet.redis.xrange(fleet.keys.session_data_stream(session_id))
    return [json.loads(fields["data"])["event_type"] for _, fields in entries]


async def test_byf_client_is_answered_by_our_worker(fleet: Fleet) -> None:
    # Names of their own per test: the cluster is shared by the session's tests.
    status = fleet.keys.worker_status("served-r0")
    await fleet.redis.set(status, "busy")  # left by an older runtime: a string
    ours = fleet.start_our_worker("served", ["served"], handler=HANDLER)
    await _wait_online(fleet, "served-r0")
    assert await fleet.redis.type(status) == "hash"

    result = _run_byf(fleet, "byf_client.py", "served", "3", "--policy", _policy(fleet))

    messages = result["messages"]
    assert len(messages) == 3
    for i, message in enumerate(messages):
        assert message["sent"], message
        assert [json.loads(a) for a in message["answers"]] == [
            {"answer": f"hello {i}", "by": "worker_runtime"}
        ]
        assert message["ends"] == 1
        record = message["record"]
        # The client's own record, under the client's execution id, completed by us.
        assert record["execution_id"].startswith("exec-")
        assert record["status"] == "COMPLETED"
        assert record["worker_id"] == "served-r0"
        assert [t["status"] for t in record["timeline"]] == ["QUEUED", "RUNNING", "COMPLETED"]
        assert await _session_events(fleet, message["session_id"]) == [
            "finalAnswer",
            "appStreamResponse",
        ]
    ids = {m["message_id"] for m in messages}
    ran = [r for r in await fleet.redis.lrange(DONE_LIST, 0, -1) if r in ids]
    assert sorted(ran) == sorted(ids)  # each once

    # by-framework's own snapshot reads our worker's counters hash and snapshots.
    done = fleet.by_admin("metrics", "snapshot", "--json")
    assert done.returncode == 0, done.stderr
    workers = {w["worker_id"]: w for w in json.loads(done.stdout)["workers"]}
    counts = workers["served-r0"]["counts"]
    assert (counts["total"], counts["completed"], counts["active"]) == (3, 3, 0)
    recent = workers["served-r0"]["recent_executions"]
    assert {(e["status"], e["target_agent_type"]) for e in recent} == {("COMPLETED", "served")}

    assert await fleet.redis.xlen(fleet.keys.dead_letter_stream("served")) == 0
    assert ours.alive()
    assert fleet.error_lines() == {}


async def test_mixed_fleet_runs_each_task_once(fleet: Fleet) -> None:
    fleet.start_byf_worker("byf-mix", ["mixed"])
    await _wait_online(fleet, "byf-mix")
    await _wait_group(fleet, "mixed", "agent_engines")
    ours = fleet.start_our_worker(
        "mix",
        ["mixed"],
        handler=HANDLER,
        env={"INTEROP_SLEEP": "0.05", "BYAI_CONCURRENCY": "2"},
    )
    await _wait_online(fleet, "mix-r0")

    count = 16
    result = _run_byf(fleet, "byf_client.py", "mixed", str(count), "--policy", _policy(fleet))

    messages = result["messages"]
    by_worker: dict[str, set[str]] = {}
    for message in messages:
        assert message["ends"] == 1, message
        assert len(message["answers"]) == 1, message
        record = message["record"]
        assert record["status"] == "COMPLETED", record
        by_worker.setdefault(record["worker_id"], set()).add(message["message_id"])
    assert set(by_worker) <= {"byf-mix", "mix-r0"}
    ids = {m["message_id"] for m in messages}
    ours_ran = [r for r in await fleet.redis.lrange(DONE_LIST, 0, -1) if r in ids]
    # Each task ran once: ours ran exactly what its records say, no id twice.
    assert sorted(ours_ran) == sorted(by_worker.get("mix-r0", set()))
    assert sum(len(ids) for ids in by_worker.values()) == count
    # Both runtimes took part (one consumer group shares the type's tasks).
    assert by_worker.get("mix-r0") and by_worker.get("byf-mix"), by_worker
    for message in messages:
        events = await _session_events(fleet, message["session_id"])
        assert events == ["finalAnswer", "appStreamResponse"], events

    groups = await _groups(fleet, "mixed")
    assert [g["name"] for g in groups] == ["agent_engines"]  # ours joined by-framework's
    assert groups[0]["pending"] == 0
    assert await fleet.redis.xlen(fleet.keys.dead_letter_stream("mixed")) == 0
    assert ours.alive()
    assert fleet.error_lines() == {}


def _theirs(point: dict[str, Any]) -> bool:
    """A history point written by by-framework's collector (ours carry ``per_type``)."""
    return "per_type" not in point


async def _history(fleet: Fleet, since: int) -> list[dict[str, Any]]:
    raw: Any = await fleet.redis.zrangebyscore(fleet.keys.metrics_history, since, "+inf")
    return [json.loads(m) for m in raw]


async def test_byf_metrics_and_our_reader_on_a_mixed_fleet(fleet: Fleet) -> None:
    t0 = now_ms()  # the cluster is shared: only this test's points count
    byf = fleet.start_byf_worker("byf-obs", ["observed"], BYF_SLEEP="8", **FAST_METRICS)
    await _wait_online(fleet, "byf-obs")
    # by-framework's collector holds the shared lock and writes the history.
    lock = fleet.keys.collector_lock
    for _ in range(200):
        if await fleet.redis.get(lock) == "byf-obs" and len(await _history(fleet, t0)) >= 2:
            break
        await asyncio.sleep(0.05)
    assert await fleet.redis.get(lock) == "byf-obs"

    # Ours serves a type of its own, so the client's task surely goes to by-framework.
    ours = fleet.start_our_worker(
        "obs",
        ["observed-ours"],
        handler="tests.interop.data_handlers:busy",
        env={"INTEROP_BUSY": "8", "BYAI_METRICS_INTERVAL": "0.5"},
    )
    await _wait_online(fleet, "obs-r0")
    before = len(await _history(fleet, t0))

    # One job each: a by-framework client's task (its worker sleeps) and a direct one
    # for our worker.
    send = asyncio.create_task(
        asyncio.to_thread(_run_byf, fleet, "byf_client.py", "observed", "1", "--policy",
                          _policy(fleet), "--timeout", "30")
    )  # fmt: skip
    reader = FleetReader(fleet.redis, fleet.keys)
    for _ in range(600):
        snap = await reader.read()
        if any(w.worker_id == "byf-obs" and w.active_jobs == 1 for w in snap.workers):
            break
        await asyncio.sleep(0.05)
    producer = Producer(fleet.redis, fleet.keys)
    await producer.submit("observed-ours", {"n": 1}, worker_id="obs-r0")
    for _ in range(200):
        snap = await reader.read()
        jobs = {w.worker_id: w.active_jobs for w in snap.workers}
        if jobs.get("byf-obs") == 1 and jobs.get("obs-r0") == 1:
            break
        await asyncio.sleep(0.05)
    assert jobs.get("byf-obs") == 1 and jobs.get("obs-r0") == 1, jobs  # from its hash
    assert reader.round_trips <= 3  # the status hash read rides in the third round trip
    observed = next(t for t in snap.types if t.name == "observed")
    assert observed.pending == 1  # by-framework's task, pending in its own group

    detail = await reader.read_worker_detail("byf-obs")
    assert [(e.state, e.agent_type) for e in detail.active_executions] == [("running", "observed")]
    assert detail.active_executions[0].task_id.startswith("msg-")
    assert isinstance(detail.lease, dict) and Lease.parse(detail.lease).last_seen

    # by-framework's reads of the mixed fleet: both workers' jobs.
    metrics = _run_byf(fleet, "byf_metrics.py")
    assert metrics["totals"]["active_executions"] == 2
    assert {"byf-obs", "obs-r0"} <= set(metrics["workers"])
    done = fleet.by_admin("metrics", "snapshot")
    assert done.returncode == 0, done.stderr

    client_result = await send
    assert client_result["messages"][0]["record"]["worker_id"] == "byf-obs"
    assert client_result["messages"][0]["ends"] == 1

    # While by-framework holds the lock only its points are written: never two writers.
    points = await _history(fleet, t0)
    assert len(points) > before
    assert all(_theirs(p) for p in points)
    assert all(p["generated_at"] > 0 for p in points)
    view = (await reader.read()).metrics
    seen = view.foreign  # their points: labelled, apart from our series
    assert seen and all(p.ts > 0 and p.source == "by-framework" for p in seen)
    assert all(p.source == SOURCE_OURS for p in view.history)

    # It stops (and releases the lock): our leader's collector takes over.
    byf.stop()
    for _ in range(200):
        if any(not _theirs(p) for p in await _history(fleet, t0)):
            break
        await asyncio.sleep(0.05)
    ours_points = [p for p in await _history(fleet, t0) if not _theirs(p)]
    assert ours_points, "our collector never took over"
    assert await fleet.redis.get(lock) == "obs"
    metrics = _run_byf(fleet, "byf_metrics.py", "--since", str(t0))
    assert any("per_type" in p for p in metrics["history"])  # by-framework reads ours
    assert all(int(p["generated_at"]) > 0 for p in metrics["history"])
    assert metrics["explain"]["summary"]["sample_count"] == len(metrics["history"])

    # The other way round: ours holds the lock, a by-framework worker starting now
    # leaves the history to it (and its collector stays quiet, not failing).
    fleet.start_byf_worker("byf-obs2", ["observed"], **FAST_METRICS)
    await _wait_online(fleet, "byf-obs2")
    mark = now_ms()
    await asyncio.sleep(3)  # three of its collector's intervals
    assert await fleet.redis.get(lock) == "obs"
    later = await _history(fleet, mark)
    assert later and not any(_theirs(p) for p in later)
    assert ours.alive()
    assert fleet.error_lines() == {}


async def test_by_frameworks_trim_of_the_shared_history_leaves_our_long_history(
    fleet: Fleet,
) -> None:
    redis, keys = fleet.redis, fleet.keys
    # Three hours ago (by-framework keeps two): a point of ours in the shared history,
    # and its buckets in our 1m and 10m tiers. Depth 7 marks them.
    old = now_ms() - 3 * 3_600_000
    await redis.zadd(keys.metrics_history, {MetricsPoint(ts=old, queue_depth=7).dump(): old})
    for name, step in (("1m", 60_000), ("10m", 600_000)):
        bucket = bucket_of(old, step)
        point = TierPoint(ts=bucket, last_ts=old, samples=1, queue_depth=7)
        await redis.zadd(keys.metrics_tier(name), {point.dump(): bucket})
    t0 = now_ms()
    byf = fleet.start_byf_worker("byf-trim", ["trimmed"], **FAST_METRICS)
    await _wait_online(fleet, "byf-trim")
    # Its collector holds the lock, writes and trims the shared history to two hours.
    for _ in range(200):
        if await redis.get(keys.collector_lock) == "byf-trim" and await _history(fleet, t0):
            break
        await asyncio.sleep(0.05)
    assert await redis.zrangebyscore(keys.metrics_history, old, old) == []
    # Our leader, meanwhile, keeps writing its tiers (the lock is by-framework's).
    ours = fleet.start_our_worker("keeper", ["kept"], env={"BYAI_METRICS_INTERVAL": "0.5"})
    await _wait_online(fleet, "keeper-r0")
    for _ in range(200):
        if await redis.zcount(keys.metrics_tier("10s"), t0 - 10_000, "+inf"):
            break
        await asyncio.sleep(0.05)
    await asyncio.sleep(2)  # a few more of its collector's cycles, and of by-framework's
    assert await redis.get(keys.collector_lock) == "byf-trim"
    assert await redis.zrangebyscore(keys.metrics_history, old, old) == []
    for name, step in (("1m", 60_000), ("10m", 600_000)):
        kept = await redis.zrangebyscore(keys.metrics_tier(name), bucket_of(old, step), old)
        assert [TierPoint.parse(m).queue_depth for m in kept] == [7], name
    # The 6h range reads the 1m tier: the old bucket and today's, one definition;
    # by-framework's points apart.
    read = await FleetReader(redis, keys).read_metrics_history(history_range="6h")
    assert read.tier == "1m"
    assert read.points[0].ts == bucket_of(old, 60_000) and read.points[0].queue_depth == 7
    assert read.points[-1].ts >= bucket_of(t0, 60_000)
    assert {p.source for p in read.points} == {SOURCE_OURS}
    assert read.foreign and {p.source for p in read.foreign} == {"by-framework"}
    assert ours.alive() and byf.alive()
    assert fleet.error_lines() == {}


@pytest.mark.parametrize("fleet", ["single"], indirect=True)
async def test_a_type_stream_without_by_framework_keeps_our_group(fleet: Fleet) -> None:
    fleet.start_our_worker("ours", ["solo"], handler=HANDLER)
    await _wait_online(fleet, "ours-r0")
    assert [g["name"] for g in await _groups(fleet, "solo")] == [CONSUMER_GROUP]


@pytest.mark.parametrize("fleet", ["single"], indirect=True)
async def test_a_resume_nobody_serves_is_dead_lettered_not_lost(fleet: Fleet) -> None:
    fleet.start_our_worker("alone", ["alone"], handler=HANDLER, env={"BYAI_MAX_DELIVERIES": "2"})
    await _wait_online(fleet, "alone-r0")
    header = {"message_id": "msg-r", "session_id": "s-r", "trace_id": "t"}
    resume = {"action_type": "RESUME", "header": header, "body": {"status": "COMPLETED"}}
    await fleet.redis.xadd(fleet.keys.type_stream("alone"), {"data": json.dumps(resume)})

    dead_key = fleet.keys.dead_letter_stream("alone")
    for _ in range(200):
        if await fleet.redis.xlen(dead_key):
            break
        await asyncio.sleep(0.05)
    dead: Any = await fleet.redis.xrange(dead_key)
    assert len(dead) == 1
    fields = dead[0][1]
    assert json.loads(fields["data"]) == resume  # the envelope itself, intact
    assert "only by-framework workers serve it" in fields["error"]
    assert await fleet.redis.lrange(DONE_LIST, 0, -1) == []  # never run by us


@pytest.mark.parametrize("fleet", ["single"], indirect=True)
async def test_a_client_task_cut_short_by_force_evict_runs_once_elsewhere(fleet: Fleet) -> None:
    fleet.start_our_worker("ev-a", ["evicted"], handler=HANDLER, env={"INTEROP_SLEEP": "30"})
    await _wait_online(fleet, "ev-a-r0")
    send = asyncio.create_task(
        asyncio.to_thread(_run_byf, fleet, "byf_client.py", "evicted", "1", "--timeout", "40")
    )
    active = fleet.keys.worker_active_snapshots("ev-a-r0")
    for _ in range(400):
        if await fleet.redis.hlen(active):
            break
        await asyncio.sleep(0.05)
    assert await fleet.redis.hlen(active) == 1  # running on ev-a
    fleet.start_our_worker("ev-b", ["evicted"], handler=HANDLER)
    await _wait_online(fleet, "ev-b-r0")

    await WorkerManager(fleet.redis, fleet.keys).evict_worker("ev-a-r0", force=True)
    result = await send

    message = result["messages"][0]
    # Cancelled on ev-a (never recorded as finished), reclaimed and answered by ev-b.
    assert message["record"]["status"] == "COMPLETED"
    assert message["record"]["worker_id"] == "ev-b-r0"
    assert message["ends"] == 1 and len(message["answers"]) == 1
    assert await fleet.redis.lrange(DONE_LIST, 0, -1) == [message["message_id"]]
    assert await _session_events(fleet, message["session_id"]) == [
        "finalAnswer",
        "appStreamResponse",
    ]
    assert await fleet.redis.xlen(fleet.keys.dead_letter_stream("evicted")) == 0
    assert fleet.error_lines() == {}
