"""Agent type names and worker ids are validated where they enter (``worker_runtime.names``).

Real ``byconsole`` / ``worker-runtime`` processes against a real Redis: one line on
stderr naming the reason, exit 2, and nothing written to Redis.
"""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path
from typing import Any

import pytest
from redis.asyncio import Redis

from tests.integration.cli_helpers import BYCONSOLE, cli_env
from tests.integration.runtime_helpers import BIN, ROOT, eventually, make_instance
from tests.redis_server import env_with
from worker_runtime.admin import WorkerManager
from worker_runtime.instance import WorkerInstance
from worker_runtime.keys import Keys
from worker_runtime.messages import KIND_COMMAND
from worker_runtime.models import Task
from worker_runtime.names import InvalidNameError, check_agent_type
from worker_runtime.producer import Producer

KEYS = Keys()


def _run(args: list[str | bytes], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, env=env, cwd=ROOT, capture_output=True, text=True, timeout=30)


def _one_line(proc: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr + proc.stdout
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


async def test_a_non_utf8_id_is_refused_and_never_acts_on_another_worker(
    redis_url: str, redis: Redis, tmp_path: Path
) -> None:
    # The id an operator's terminal would turn b"caf\xe9-r0" into after replacement.
    await redis.sadd(KEYS.workers, "caf\ufffd-r0", "caf?-r0")
    env = cli_env(redis_url, tmp_path)
    for verb in ("suspend", "forget"):
        proc = _run([str(BYCONSOLE), "worker", verb, b"caf\xe9-r0"], env)
        _one_line(proc, "not valid UTF-8", "0xe9")
    assert not await redis.exists(KEYS.worker_admin("caf?-r0"))
    assert not await redis.exists(KEYS.worker_admin("caf\ufffd-r0"))
    assert await redis.smembers(KEYS.workers) == {"caf\ufffd-r0", "caf?-r0"}
    assert not await redis.exists(KEYS.audit_stream)


async def test_bad_type_names_get_one_line_errors_everywhere_they_enter(
    redis_url: str, redis: Redis, tmp_path: Path
) -> None:
    env = env_with(redis_url)
    runtime = str(BIN / "worker-runtime")
    cases: list[tuple[list[str | bytes], str]] = [
        ([runtime, "submit", "chat\nFAKE LOG LINE", "{}"], "control character"),
        ([runtime, "submit", "x" * 5000, "{}"], "too long"),
        ([runtime, "submit", "", "{}"], "agent type is empty"),
        ([runtime, "submit", "chat", "{}", "--worker", "w\x1b[31m"], "control character"),
        (
            [runtime, "run", "tests.handlers:noop", "--type", "a\tb", "--instance", "n1"],
            "control character",
        ),
        ([str(BYCONSOLE), "type", "deny", "", "w1"], "agent type is empty"),
        ([str(BYCONSOLE), "scale", "t" * 300, "2", "--force"], "too long"),
    ]
    for args, needle in cases:
        _one_line(
            _run(args, cli_env(redis_url, tmp_path) if BYCONSOLE.name in str(args[0]) else env),
            needle,
        )
    assert await redis.dbsize() == 0  # nothing was written


async def test_the_api_refuses_bad_names_before_any_write(redis: Redis) -> None:
    with pytest.raises(InvalidNameError, match="control character"):
        await Producer(redis, KEYS).submit("a\nb")
    with pytest.raises(InvalidNameError, match="not valid UTF-8"):
        await WorkerManager(redis, KEYS).suspend_worker("caf\udce9-r0")
    with pytest.raises(InvalidNameError, match="too long"):
        WorkerInstance(_noop, ["t" * 1000])
    assert check_agent_type("chat.v2-é") == "chat.v2-é"
    assert await redis.dbsize() == 0


async def _noop(task: Task) -> None:
    del task


async def test_a_command_entry_on_a_task_stream_is_dead_lettered(
    redis_url: str, redis: Redis
) -> None:
    inst = make_instance(redis_url, _noop, ["cmdt"], "cmd")
    await inst.start()
    try:
        await redis.xadd(KEYS.type_stream("cmdt"), {"kind": KIND_COMMAND, "data": "{}"})

        async def buried() -> Any:
            return await redis.xrange(KEYS.dead_letter_stream("cmdt"))

        dead = await eventually(buried)
        assert dead[0][1]["error"] == "command entry on a task stream"
        await asyncio.sleep(0.3)
        pending: Any = await redis.xpending(
            KEYS.type_stream("cmdt"), "byai_gateway:consumer_group:agent_engines"
        )
        assert pending["pending"] == 0
    finally:
        await inst.stop(grace=0)
