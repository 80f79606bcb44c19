"""``byconsole type pending|dead-letter`` and ``dead list`` without a type, as a real
subprocess on a real redis-server and a real cluster."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from tests.backends import Backend
from tests.integration.cli_helpers import assert_one_line_error, cli_env, run
from tests.integration.test_pending import envelope, stuck
from tests.streams import stream_entries
from worker_runtime.messages import encode_task
from worker_runtime.models import Task


def _env(backend: Backend, home: Path) -> dict[str, str]:
    return cli_env(backend.url, home, **backend.env)


async def test_type_pending_lists_owner_idle_and_deliveries(
    backend: Backend, tmp_path: Path
) -> None:
    env = _env(backend, tmp_path)
    task = Task(task_id="t-stuck", agent_type="chat", payload={"evil": "\x1b[2J"})
    entry_id = await stuck(backend, encode_task(task), consumer="dead-worker", deliveries=3)
    await stuck(backend, envelope("m-7", "hello"), consumer="byf-worker")
    await asyncio.sleep(1.1)

    doc = (await asyncio.to_thread(run, ["type", "pending", "chat", "--json"], env)).json()
    assert doc["total"] == 2 and doc["next_cursor"] is None
    first = doc["pending"][0]  # longest idle first
    assert (first["id"], first["consumer"], first["deliveries"], first["task_id"]) == (
        entry_id,
        "dead-worker",
        3,
        "t-stuck",
    )
    assert first["idle_ms"] >= 1000 and first["owner_online"] is False
    assert doc["pending"][1]["kind"] == "by-framework" and doc["pending"][1]["task_id"] == "m-7"

    table = await asyncio.to_thread(run, ["type", "pending", "chat"], env)
    assert table.code == 0 and "dead-worker (no lease)" in table.out
    assert "t-stuck" in table.out and "\x1b" not in table.out
    assert "2 entries pending in chat" in table.out

    paged = await asyncio.to_thread(run, ["type", "pending", "chat", "--limit", "1"], env)
    assert paged.code == 0 and "1 of 2" in paged.out and "--cursor" in paged.out
    bad = await asyncio.to_thread(run, ["type", "pending", "chat", "--cursor", "nope"], env)
    assert_one_line_error(bad, 2)


async def test_type_dead_letter_moves_once_and_refuses_after(
    backend: Backend, tmp_path: Path
) -> None:
    env = _env(backend, tmp_path)
    entry_id = await stuck(backend, encode_task(Task(task_id="t", agent_type="chat")))
    args = ["type", "dead-letter", "chat", entry_id]

    assert_one_line_error(await asyncio.to_thread(run, args, env), 2)  # --reason required
    read_only = await asyncio.to_thread(run, ["--read-only", *args, "--reason", "x"], env)
    assert_one_line_error(read_only, 2)
    bad_id = await asyncio.to_thread(run, [*args[:3], "nope", "--reason", "x"], env)
    assert_one_line_error(bad_id, 2)
    assert await backend.redis.xlen(backend.keys.dead_letter_stream("chat")) == 0

    moved = await asyncio.to_thread(run, [*args, "--reason", "stuck on a lock", "--json"], env)
    doc = moved.json()
    assert doc["id"] == entry_id and doc["consumer"] == "gone-worker" and doc["deliveries"] == 1
    (dead,) = await stream_entries(backend.redis, backend.keys.dead_letter_stream("chat"))
    assert dead[0] == doc["dead_letter_id"] and dead[1]["reason"] == "stuck on a lock"

    again = await asyncio.to_thread(run, [*args, "--reason", "again"], env)
    assert_one_line_error(again, 1)
    assert "not pending" in again.err and "left alone" in again.err
    listed = await asyncio.to_thread(run, ["dead", "list", "chat", "--json"], env)
    assert [d["task_id"] for d in listed.json()["dead"]] == ["t"]


async def test_dead_list_without_a_type_lists_every_type_and_the_control_plane(
    backend: Backend, tmp_path: Path
) -> None:
    env = _env(backend, tmp_path)
    r, keys = backend.redis, backend.keys
    await r.sadd(keys.agent_types, "chat", "report", "empty")  # empty: no dead letter
    for agent_type, n in (("chat", 2), ("report", 3)):
        for i in range(n):
            task = {"task_id": f"{agent_type}-{i}", "agent_type": agent_type, "payload": {}}
            fields = {"kind": "task", "data": json.dumps(task), "error": "E", "buried_at": "1"}
            await r.xadd(keys.dead_letter_stream(agent_type), fields)  # type: ignore[arg-type]
    decision = {
        "execution_id": "ex-1",
        "target_agent_type": "chat",
        "status": "FAILED",
        "reason": "no capacity \x1b[31m",
        "worker_ids": [],
    }
    await r.xadd(keys.control_plane_dead_letters, {"data": json.dumps(decision)})

    doc = (await asyncio.to_thread(run, ["dead", "list", "--json", "--limit", "2"], env)).json()
    assert doc["total"] == 5
    assert [(t["type"], t["total"], len(t["dead"])) for t in doc["types"]] == [
        ("chat", 2, 2),
        ("report", 3, 2),
    ]
    cp = doc["control_plane"]
    assert cp["read_only"] is True and cp["total"] == 1
    assert cp["stream"] == keys.control_plane_dead_letters
    (letter,) = cp["dead"]
    assert letter["source"] == "control-plane" and letter["task_id"] == "ex-1"
    assert letter["type"] == "chat" and letter["error"].startswith("FAILED: no capacity")

    table = await asyncio.to_thread(run, ["dead", "list"], env)
    assert table.code == 0 and "report: 3 dead letter(s)" in table.out
    assert "by-framework control plane (read-only): 1 dead letter(s)" in table.out
    assert "\x1b" not in table.out
