"""``byconsole find`` / ``session`` as the README's viewer ACL user: they read, never write.

The viewer may run read-only scripts (``EVAL_RO``) but not ``SCRIPT LOAD``: the lookup's
scripts then travel by text, and Redis holds exactly what it held before.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from redis.asyncio import Redis

from tests.integration.cli_helpers import BYCONSOLE
from tests.integration.runtime_helpers import ROOT
from tests.redis_server import env_with
from tests.reliability.acl import Secured, dump_all
from worker_runtime.keys import Keys
from worker_runtime.producer import Producer

K = Keys()


@pytest.fixture
async def admin(secured: Secured) -> AsyncIterator[Redis]:
    client = secured.admin()
    await client.flushall()
    await client.script_flush()
    yield client
    await client.aclose()


def _byconsole(args: list[str], url: str, tmp: Path) -> subprocess.CompletedProcess[str]:
    env = env_with(url, XDG_CONFIG_HOME=str(tmp))
    return subprocess.run(
        [str(BYCONSOLE), *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )


async def test_viewer_finds_ids_and_changes_nothing(
    secured: Secured, admin: Redis, tmp_path: Path
) -> None:
    await admin.sadd(K.agent_types, "chat")
    task = await Producer(admin, K).submit("chat", {"text": "hi"}, session_id="s-acl")
    await admin.hset(
        K.session_registry("s-acl"),
        "exec:e-1",
        json.dumps({"execution_id": "e-1", "message_id": task, "status": "QUEUED"}),
    )
    entries: Any = await admin.xrange(K.type_stream("chat"))
    entry_id = str(entries[0][0])
    before = await dump_all(admin)
    url = secured.url("viewer")
    for query, state in ((task, "queued"), (entry_id, "queued")):
        out = _byconsole(["find", query, "--json"], url, tmp_path)
        assert out.returncode == 0, out.stderr
        assert json.loads(out.stdout)["state"] == state
    out = _byconsole(["session", "s-acl", "--json"], url, tmp_path)
    assert out.returncode == 0, out.stderr
    assert [e["execution_id"] for e in json.loads(out.stdout)["entries"]] == ["e-1"]
    out = _byconsole(["find", "nothing-here"], url, tmp_path)
    assert out.returncode == 1 and len(out.stderr.strip().splitlines()) == 1
    assert await dump_all(admin) == before
