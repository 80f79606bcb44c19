"""Skewed wall clocks in the process under test never decide correctness (docs/protocol.md).

The skew is injected into a real subprocess through a ``sitecustomize`` module that
shifts ``time.time``/``time.time_ns`` by ``$TEST_CLOCK_OFFSET_S`` (written to a temporary
directory put first on ``PYTHONPATH``; production code has no hook for it).
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from redis.asyncio import Redis

from tests.integration.cli_helpers import cli_env, run
from tests.integration.runtime_helpers import (
    BIN,
    ROOT,
    eventually,
    make_instance,
    spawn_worker,
    stop_process,
)
from tests.redis_server import env_with
from worker_runtime.fleet import FleetReader
from worker_runtime.instance import WorkerInstance
from worker_runtime.keys import Keys
from worker_runtime.models import Lifecycle, Status, Task

pytestmark = pytest.mark.timeout(90)

KEYS = Keys()

_SITECUSTOMIZE = """
import os
import time

_offset = float(os.environ.get("TEST_CLOCK_OFFSET_S") or 0)
if _offset:
    _time, _time_ns = time.time, time.time_ns
    time.time = lambda: _time() + _offset
    time.time_ns = lambda: _time_ns() + int(_offset * 1e9)
"""


def _skewed(env: dict[str, str], tmp: Path, offset_s: float) -> dict[str, str]:
    """``env`` with the process clock shifted by ``offset_s`` seconds."""
    hook = tmp / "clock_hook"
    hook.mkdir(exist_ok=True)
    (hook / "sitecustomize.py").write_text(_SITECUSTOMIZE)
    out = dict(env)
    out["PYTHONPATH"] = os.pathsep.join(p for p in (str(hook), env.get("PYTHONPATH")) if p)
    out["TEST_CLOCK_OFFSET_S"] = str(offset_s)
    return out


async def _noop(task: Task) -> None:
    del task


@pytest.fixture
async def worker(redis_url: str) -> AsyncIterator[WorkerInstance]:
    inst = make_instance(redis_url, _noop, ["sk"], "skw")
    await inst.start()
    yield inst
    await inst.stop(grace=0)


async def test_the_hook_really_skews_the_subprocess_clock(tmp_path: Path) -> None:
    env = _skewed(dict(os.environ), tmp_path, 3600)
    code = "import time; print(int(time.time()))"
    out = subprocess.run(
        [str(BIN / "python"), "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert int(out.stdout) - time.time() > 3500


async def test_a_console_an_hour_ahead_does_not_block_the_next_command(
    redis_url: str, redis: Redis, worker: WorkerInstance, tmp_path: Path
) -> None:
    wid = "skw-r0"
    env = cli_env(redis_url, tmp_path)
    # In a thread: the worker runs in this event loop and must keep beating.
    ahead = await asyncio.to_thread(
        run,
        ["worker", "suspend", wid, "--reason", "from the future", "--wait"],
        _skewed(env, tmp_path, 3600),
    )
    assert ahead.code == 0, ahead.err
    replica = worker.replicas[wid]
    await eventually(lambda: _is(replica.lifecycle, Lifecycle.SUSPENDED))
    # An ordinary console resumes at once: the command is applied, not ignored.
    resumed = await asyncio.to_thread(run, ["worker", "resume", wid, "--wait", "--json"], env)
    assert resumed.code == 0, resumed.err
    assert resumed.json()["state"] == "applied"
    assert replica.lifecycle is Lifecycle.ACTIVE
    await asyncio.sleep(1.0)  # a few beats: the pull channel agrees
    assert replica.lifecycle is Lifecycle.ACTIVE


async def _is(a: object, b: object) -> bool:
    return a is b


async def test_a_worker_30s_behind_is_online_and_accepted_by_require_online(
    redis_url: str, redis: Redis, tmp_path: Path
) -> None:
    env = _skewed({}, tmp_path, -30)
    proc = spawn_worker(
        redis_url,
        "tests.handlers:record",
        ["behind"],
        "behind",
        extra_env=env,
        log_path=tmp_path / "w.log",
    )
    try:
        await eventually(lambda: redis.exists(KEYS.worker_online("behind-r0")), timeout=15)
        await asyncio.sleep(1.0)
        snap = await FleetReader(redis, KEYS).read()
        (view,) = [w for w in snap.workers if w.worker_id == "behind-r0"]
        assert view.status is Status.ONLINE
        submit = subprocess.run(
            [str(BIN / "worker-runtime"), "submit", "behind", "{}", "--require-online"],
            env=env_with(redis_url),
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert submit.returncode == 0, submit.stderr
    finally:
        stop_process(proc)


async def test_periodic_tasks_keep_running_after_failover_from_a_leader_an_hour_ahead(
    redis_url: str, redis: Redis, tmp_path: Path
) -> None:
    stream = KEYS.type_stream("tick")
    common = ["--periodic", "tick:0.5", "--role", "leader"]
    ahead = spawn_worker(
        redis_url,
        "tests.handlers:record",
        ["idle"],
        "ahead",
        extra_env=_skewed({"BYAI_METRICS_INTERVAL": "0.3"}, tmp_path, 3600),
        log_path=tmp_path / "ahead.log",
        extra_args=common,
    )
    normal: subprocess.Popen[bytes] | None = None
    try:

        async def ticks(n: int) -> bool:
            return int(await redis.xlen(stream)) >= n

        await eventually(lambda: ticks(2), timeout=20)
        # Its metrics points carry Redis's time, not its own (an hour ahead).
        await eventually(lambda: redis.exists(KEYS.metrics_history), timeout=10)
        newest: Any = await redis.zrange(KEYS.metrics_history, -1, -1, withscores=True)
        seconds, _ = await redis.time()
        assert abs(newest[0][1] / 1000 - seconds) < 60
        normal = spawn_worker(
            redis_url,
            "tests.handlers:record",
            ["idle"],
            "normal",
            log_path=tmp_path / "normal.log",
            extra_args=common,
        )
        await eventually(lambda: redis.exists(KEYS.worker_online("normal-r0")), timeout=15)
        ahead.send_signal(signal.SIGKILL)
        ahead.wait(10)
        before = int(await redis.xlen(stream))
        # The new leader takes over within a lease and keeps submitting every period.
        await eventually(lambda: ticks(before + 4), timeout=15)
        assert "elected leader" in (tmp_path / "normal.log").read_text()
    finally:
        stop_process(ahead)
        if normal is not None:
            stop_process(normal)
