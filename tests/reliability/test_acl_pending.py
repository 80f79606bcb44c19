"""Dead-lettering a pending entry under the README's ACL users: the operator may not
acknowledge tasks, so it is refused in one line before anything is written (a script's
writes are not undone when a later command of it is refused)."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

import pytest
from redis.asyncio import Redis
from redis.exceptions import NoPermissionError

from tests.integration.cli_helpers import BYCONSOLE
from tests.integration.runtime_helpers import ROOT
from tests.redis_server import env_with
from tests.reliability.acl import Secured, dump_all
from worker_runtime.keys import CONSUMER_GROUP, Keys
from worker_runtime.messages import encode_task
from worker_runtime.models import Task
from worker_runtime.pending import PendingEntries

K = Keys()


async def _stuck(admin: Redis) -> str:
    stream = K.type_stream("chat")
    entry_id = str(await admin.xadd(stream, encode_task(Task(task_id="t", agent_type="chat"))))  # type: ignore[arg-type]
    await admin.xgroup_create(stream, CONSUMER_GROUP, id="0")
    await admin.xreadgroup(CONSUMER_GROUP, "gone", {stream: ">"})
    return entry_id


async def test_operator_dead_letter_is_refused_before_any_write(
    secured: Secured, admin: Redis, tmp_path: Path
) -> None:
    entry_id = await _stuck(admin)
    before = await dump_all(admin)
    env = env_with(secured.url("operator"), XDG_CONFIG_HOME=str(tmp_path))
    done = await asyncio.to_thread(
        subprocess.run,
        [str(BYCONSOLE), "type", "dead-letter", "chat", entry_id, "--reason", "stuck"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert (
        done.stderr.strip().splitlines()
        == ["byconsole: error: the Redis ACL user may not run XADD"]
        or "may not run XACK" in done.stderr
    )
    assert "Traceback" not in done.stderr
    operator = Redis.from_url(secured.url("operator"), decode_responses=True)
    try:
        with pytest.raises(NoPermissionError):  # the cluster path checks first too
            await PendingEntries(operator, K, "op@host").dead_letter(
                "chat", entry_id, "stuck", atomic=False
            )
        # The operator still lists them (reads only).
        page = await PendingEntries(operator, K, "op@host").page("chat")
        assert [e.entry_id for e in page.entries] == [entry_id]
    finally:
        await operator.aclose()
    assert await dump_all(admin) == before  # nothing written, nothing acknowledged


async def test_a_user_allowed_to_ack_dead_letters(secured: Secured, admin: Redis) -> None:
    entry_id = await _stuck(admin)
    worker = Redis.from_url(secured.url("worker"), decode_responses=True)
    try:
        await PendingEntries(worker, K, "op@host").dead_letter("chat", entry_id, "stuck")
    finally:
        await worker.aclose()
    assert await admin.xlen(K.dead_letter_stream("chat")) == 1
