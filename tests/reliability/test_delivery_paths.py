"""Delivery paths that used to lose, strand or leak (README, How the runtime behaves).

Real ``worker-runtime`` processes (or a :class:`WorkerInstance` in a subprocess, for
fault injection into one loop) against the session's ``redis-server``.
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Iterator
from pathlib import Path
from typing import Any

import pytest
from redis.asyncio import Redis

from bench.common import BIN, ROOT
from bench.fault_handlers import JOURNAL_ENV
from bench.faults import (
    AGENT_TYPE,
    TIMINGS,
    WorkerFleet,
    completed_ids,
    entries,
    mark_fault,
    read_journal,
    submit,
    tally,
    until,
    wait_completed,
)
from tests.backends import Backend
from tests.integration.runtime_helpers import make_instance
from tests.redis_server import env_with
from worker_runtime.admin import WorkerManager
from worker_runtime.envelope import FINAL_ANSWER, STREAM_END, read_data_event
from worker_runtime.instance import STOP_BOUND_S
from worker_runtime.keys import CONSUMER_GROUP, Keys
from worker_runtime.messages import encode_command
from worker_runtime.models import Command, CommandAction, Lifecycle, Task
from worker_runtime.producer import Producer

KEYS = Keys()
STREAM = KEYS.type_stream(AGENT_TYPE)


@pytest.fixture
def fleets() -> Iterator[list[WorkerFleet]]:
    """Fleets a test started; every process is killed at the end."""
    started: list[WorkerFleet] = []
    yield started
    for fleet in started:
        fleet.stop(signal.SIGKILL, 5.0)


def _fleet(fleets: list[WorkerFleet], url: str, tmp: Path, prefix: str, **env: str) -> WorkerFleet:
    fleet = WorkerFleet(url, tmp / "journal.txt", tmp / "logs", processes=1, env=env, prefix=prefix)
    fleets.append(fleet)
    return fleet


async def _pending(redis: Redis, stream: str = STREAM) -> int:
    return int((await redis.xpending(stream, CONSUMER_GROUP))["pending"])


async def _no_pending(redis: Redis, stream: str = STREAM) -> bool:
    return await _pending(redis, stream) == 0


async def test_operator_commands_never_trim_queued_direct_tasks(
    redis_url: str, redis: Redis, tmp_path: Path, fleets: list[WorkerFleet]
) -> None:
    fleet = _fleet(fleets, redis_url, tmp_path, "mx", BYAI_CONCURRENCY="200")
    fleet.start()
    await fleet.wait_online(redis, KEYS)
    wid = fleet.worker_id(0)
    assert fleet.stop() == [0]  # offline, still known
    queued = 10_300  # past the old MAXLEN ~10000 of the worker's stream
    producer = Producer(redis, KEYS)
    ids: list[str] = []
    for start in range(0, queued, 1000):
        ids += await producer.submit_many(
            AGENT_TYPE, [{}] * min(1000, queued - start), worker_id=wid
        )
    manager = WorkerManager(redis, KEYS, operator="test")
    await manager.suspend_worker(wid, "maintenance")
    await manager.resume_worker(wid, "done")
    stream = KEYS.worker_stream(wid)
    assert await redis.xlen(stream) == queued + 2
    fleet.spawn(0)
    await wait_completed(tmp_path / "journal.txt", ids, 120)
    assert set(ids) <= completed_ids(tmp_path / "journal.txt")
    await until(lambda: _no_pending(redis, stream), 10, "acks flushed")
    assert fleet.stop() == [0]


async def test_exception_text_with_lone_surrogate_does_not_stop_the_batcher(
    redis_url: str, redis: Redis, tmp_path: Path, fleets: list[WorkerFleet]
) -> None:
    fleet = _fleet(fleets, redis_url, tmp_path, "sg", BYAI_MAX_DELIVERIES="2")
    fleet.start()
    await fleet.wait_online(redis, KEYS)
    bad = await submit(redis, KEYS, [{"surrogate": True}] * 3)
    good = await submit(redis, KEYS, [{}] * 20)
    await wait_completed(tmp_path / "journal.txt", good, 30)
    dead_key = KEYS.dead_letter_stream(AGENT_TYPE)
    await until(lambda: _count_is(redis.xlen(dead_key), 3), 15, "3 dead letters")
    for _, fields in await entries(redis, dead_key):
        assert fields["error"] == "ValueError: cannot open caf\\udce9.txt"
    await until(lambda: _no_pending(redis), 10, "every entry acknowledged")
    t0 = time.monotonic()
    assert fleet.stop() == [0]
    assert time.monotonic() - t0 < float(TIMINGS["BYAI_GRACE_PERIOD"]) + STOP_BOUND_S
    result = tally(read_journal(tmp_path / "journal.txt"), [*bad, *good])
    assert result.completed == 20 and result.unexplained == []
    assert "Traceback" not in fleet.logs()


async def _count_is(value: Awaitable[Any], expected: int) -> bool:
    return bool(await value == expected)


def _probe(url: str, tmp: Path, instance: str, **env: str) -> subprocess.Popen[bytes]:
    full = env_with(url, **{**TIMINGS, "BYAI_WORKER_INSTANCE": instance, **env})
    full[JOURNAL_ENV] = str(tmp / "journal.txt")
    log = open(tmp / f"{instance}.log", "ab")  # noqa: SIM115 - closed with the process
    try:
        return subprocess.Popen(
            [sys.executable, "-m", "tests.reliability.probe_worker", AGENT_TYPE],
            cwd=ROOT,
            env=full,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    finally:
        log.close()


@pytest.mark.parametrize("loop", ["batcher", "consumer", "control"])
async def test_a_core_loop_that_ends_stops_the_worker_loudly(
    loop: str, redis_url: str, redis: Redis, tmp_path: Path, fleets: list[WorkerFleet]
) -> None:
    proc = _probe(redis_url, tmp_path, "ld", PROBE_FAULT=loop, BYAI_GRACE_PERIOD="0.5")
    try:
        await until(lambda: redis.exists(KEYS.worker_online("ld-r0")), 30, "online")
        ids = await submit(redis, KEYS, [{"sleep": 0.2}] * 3 + [{"sleep": 5.0}] * 3)
        code = await asyncio.to_thread(proc.wait, 30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
    mark_fault(tmp_path / "journal.txt", proc.pid, f"loop-{loop}")
    log = (tmp_path / "ld.log").read_text(errors="replace")
    assert code == 3, log[-2000:]
    assert "ended unexpectedly" in log and f"injected {loop}" in log
    assert "stopping this worker (its leases are no longer renewed)" in log
    assert not await redis.exists(KEYS.worker_online("ld-r0"))
    # Whatever it held is handed back or still pending: another worker finishes it all.
    rescue = _fleet(fleets, redis_url, tmp_path, "rescue")
    rescue.start()
    await wait_completed(tmp_path / "journal.txt", ids, 40)
    await until(lambda: _no_pending(redis), 10, "nothing pending")
    result = tally(read_journal(tmp_path / "journal.txt"), ids)
    assert result.lost == 0 and result.unexplained == []


async def test_running_index_is_exact_after_many_fast_tasks(
    redis_url: str, redis: Redis, tmp_path: Path
) -> None:
    sizes = tmp_path / "sizes.json"
    proc = _probe(
        redis_url,
        tmp_path,
        "ri",
        PROBE_HANDLER="noop",
        PROBE_SIZES=str(sizes),
        BYAI_CONCURRENCY="50",
        BYAI_EXECUTION_CAP="100",
    )
    try:
        await until(lambda: redis.exists(KEYS.worker_online("ri-r0")), 30, "online")
        tasks = 4000
        await submit(redis, KEYS, [{}] * tasks)

        async def all_processed() -> bool:
            done = await redis.hget(KEYS.type_stats, f"processed:{AGENT_TYPE}")
            return int(done or 0) == tasks and await _no_pending(redis)

        await until(all_processed, 60, "every task processed")
        await asyncio.sleep(0.3)  # let the last flush land
        # Nothing is running, so nothing may be listed as running.
        assert await redis.zcard(KEYS.worker_active_executions("ri-r0")) == 0
        assert await redis.hlen(KEYS.worker_active_snapshots("ri-r0")) == 0
        assert await redis.zcard(KEYS.worker_executions("ri-r0")) <= 100
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.to_thread(proc.wait, 30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
    held = json.loads(sizes.read_text())
    assert held == {"queued": 0, "written_starts": 0, "unconfirmed": 0, "history": 100}


async def test_submit_count_keeps_the_session(
    redis_url: str, redis: Redis, tmp_path: Path, fleets: list[WorkerFleet]
) -> None:
    fleet = _fleet(fleets, redis_url, tmp_path, "ss")
    fleet.start()
    await fleet.wait_online(redis, KEYS)
    args = [str(BIN / "worker-runtime"), "submit", AGENT_TYPE, "{}", "--count", "5"]
    args += ["--session", "sess-1"]
    out = await asyncio.to_thread(
        subprocess.run,
        args,
        cwd=ROOT,
        env=env_with(redis_url),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert out.returncode == 0, out.stderr
    data = KEYS.session_data_stream("sess-1")
    # Each task's answer and end of stream, as by-framework's client reads them.
    await until(lambda: _count_is(redis.xlen(data), 10), 20, "5 results in the session")
    events = [read_data_event(f) for _, f in await entries(redis, data)]
    ends = [e.message_id for e in events if e is not None and e.event_type == STREAM_END]
    answers = [e.message_id for e in events if e is not None and e.event_type == FINAL_ANSWER]
    assert len(set(ends)) == 5 and sorted(answers) == sorted(ends)


async def test_command_entry_on_a_task_stream_is_dead_lettered(
    redis_url: str, redis: Redis, tmp_path: Path, fleets: list[WorkerFleet]
) -> None:
    fleet = _fleet(fleets, redis_url, tmp_path, "cm")
    fleet.start()
    await fleet.wait_online(redis, KEYS)
    command = Command(action=CommandAction.LIFECYCLE, lifecycle=Lifecycle.SUSPENDED)
    await redis.xadd(STREAM, encode_command(command))  # type: ignore[arg-type]
    good = await submit(redis, KEYS, [{}])
    await wait_completed(tmp_path / "journal.txt", good, 20)
    dead_key = KEYS.dead_letter_stream(AGENT_TYPE)
    await until(lambda: _count_is(redis.xlen(dead_key), 1), 10, "a dead letter")
    [(_, fields)] = await entries(redis, dead_key)
    assert fields["kind"] == "command" and fields["error"] == "command entry on a task stream"
    await until(lambda: _no_pending(redis), 10, "nothing pending")
    # It was not applied as a command either.
    assert not await redis.hget(KEYS.worker_admin(fleet.worker_id(0)), "lifecycle")


async def test_moves_leave_nothing_pending_on_single_and_cluster(backend: Backend) -> None:
    """Retries, dead letters (another slot than the task stream on a cluster) and a
    command entry on a task stream: each successor exists and each original is acked."""
    redis, keys = backend.redis, backend.keys
    runs: dict[str, int] = {}

    async def fail_twice(task: Task) -> None:
        runs[task.task_id] = runs.get(task.task_id, 0) + 1
        if task.payload.get("always") or runs[task.task_id] < 3:
            raise RuntimeError("failing on purpose")

    inst = make_instance(backend.settings, fail_twice, ["chat"], "mv", max_deliveries=3)
    await inst.start()
    try:
        producer = Producer(redis, keys)
        retried = await producer.submit("chat", {})
        buried = await producer.submit("chat", {"always": True})
        command = Command(action=CommandAction.LIFECYCLE, lifecycle=Lifecycle.SUSPENDED)
        await redis.xadd(keys.type_stream("chat"), encode_command(command))  # type: ignore[arg-type]
        dead = keys.dead_letter_stream("chat")
        await until(lambda: _count_is(redis.xlen(dead), 2), 15, "2 dead letters")
        stream = keys.type_stream("chat")

        async def settled() -> bool:
            info: Any = await redis.xpending(stream, CONSUMER_GROUP)
            return runs.get(retried) == 3 and int(info["pending"]) == 0

        await until(settled, 15, "nothing pending")
        assert runs[buried] == 3 and runs[retried] == 3
        errors = sorted(f["error"] for _, f in await entries(redis, dead))
        assert errors == ["RuntimeError: failing on purpose", "command entry on a task stream"]
    finally:
        await inst.stop(grace=0)
