"""Huge entries: listings read excerpts, ``dead show`` prints the payload whole.

Dead letters and a pending task of 2 MB each (50 MB ones in ``git show
baccccc:bench/huge_entries.py``, a one-off script since removed) on a real
``redis-server``; the real ``byconsole`` lists them (``dead list``,
``type pending``, ``find``) and shows one (``dead show``). A listing must be right
(ids, errors, the payload's start, a visible "cut") while Redis sends only kilobytes
for it: Redis's own count of bytes written to clients (``INFO stats``
``total_net_output_bytes``) bounds what the console received, deterministically. The
memory the console then needs was measured by that script (RSS of the real process),
not asserted here.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from redis import Redis as SyncRedis
from redis.asyncio import Redis

from byconsole.tui.views.dead import detail_text
from tests.integration.cli_helpers import add_worker, cli_env, run
from worker_runtime.dead_letters import DeadLetters
from worker_runtime.excerpts import (
    EXCERPT_BYTES,
    RangeRead,
    excerpt_data,
    partial_object,
    read_excerpts,
)
from worker_runtime.keys import Keys
from worker_runtime.models import now_ms
from worker_runtime.pending import PendingEntries

K = Keys()
MB = 1024 * 1024
SIZE = 2 * MB
LISTING_BUDGET = 200_000
"""Bytes Redis may send for a listing of a few huge entries (excerpts: 4 KB a field)."""

pytestmark = pytest.mark.slow


def _payload(i: int) -> dict[str, Any]:
    # A multi-byte character right at the cut: the excerpt must not split it.
    head = "é" * (EXCERPT_BYTES // 2)
    return {"text": f"huge-{i} {head}" + "\x1b[2J" + "x" * SIZE, "n": i}


async def _bury(redis: Redis, count: int) -> list[str]:
    ids = []
    for i in range(count):
        task = {"task_id": f"t-huge-{i}", "agent_type": "big", "payload": _payload(i)}
        fields: dict[Any, Any] = {
            "kind": "task",
            "data": json.dumps(task, ensure_ascii=False),
            "error": f"MemoryError: {i}",
            "worker_id": "w-big",
            "buried_at": str(now_ms()),
            "attempt": "3",
        }
        ids.append(str(await redis.xadd(K.dead_letter_stream("big"), fields)))
    envelope = {
        "action_type": "ASK_AGENT",
        "header": {"message_id": "m-huge", "session_id": "s-huge", "target_agent_type": "big"},
        "body": {"content": "envelope-start \x1b[2J" + "y" * SIZE},
    }
    ids.append(str(await redis.xadd(K.dead_letter_stream("big"), {"data": json.dumps(envelope)})))
    return ids


def _sent_bytes(url: str) -> int:
    client = SyncRedis.from_url(url)
    try:
        return int(client.info("stats")["total_net_output_bytes"])
    finally:
        client.close()


async def test_dead_list_reads_excerpts_and_says_so(
    redis: Redis, redis_url: str, tmp_path: Path
) -> None:
    env = cli_env(redis_url, tmp_path)
    await add_worker(redis, "w-big", ["big"])
    await _bury(redis, 3)

    before = _sent_bytes(redis_url)
    listed = await asyncio.to_thread(run, ["dead", "list", "big", "--json"], env, 60)
    sent = _sent_bytes(redis_url) - before
    assert listed.code == 0, listed.err
    assert sent < LISTING_BUDGET, f"Redis sent {sent} bytes for a listing"
    doc = listed.json()
    assert doc["total"] == 4
    dead = doc["dead"]
    assert [d["task_id"] for d in dead] == ["m-huge", "t-huge-2", "t-huge-1", "t-huge-0"]
    envelope, *ours = dead
    assert envelope["payload"].startswith("envelope-start \x1b[2Jyyy") and envelope["payload_cut"]
    for d in ours:
        n = int(d["task_id"].rsplit("-", 1)[1])
        assert d["error"] == f"MemoryError: {n}" and d["attempts"] == 3
        assert d["payload_cut"] and d["stored_bytes"] > SIZE
        # The payload's start, decoded: whole characters only, never a half "é".
        payload = json.loads(d["payload"])
        assert payload["text"].startswith(f"huge-{n} éé") and "\ufffd" not in payload["text"]

    table = await asyncio.to_thread(run, ["dead", "list"], env, 60)
    assert table.code == 0 and "4 dead letter(s) over 1 type(s)" in table.out
    assert "MemoryError: 2" in table.out and "\x1b" not in table.out
    assert len(table.out) < 10_000


async def test_dead_show_prints_the_whole_payload_escaped_or_cut_with_a_marker(
    redis: Redis, redis_url: str, tmp_path: Path
) -> None:
    env = cli_env(redis_url, tmp_path)
    ids = await _bury(redis, 1)
    whole = await asyncio.to_thread(run, ["dead", "show", "big", ids[0]], env, 60)
    assert whole.code == 0, whole.err
    expected = json.dumps(_payload(0), ensure_ascii=False, sort_keys=True)
    # Every character of the payload is there, on one line.
    assert expected in whole.out.splitlines()
    # A payload that is not JSON (an envelope's content) holds real control characters:
    # escaped, the rest whole.
    raw = await asyncio.to_thread(run, ["dead", "show", "big", ids[-1]], env, 60)
    assert raw.code == 0, raw.err
    assert "\x1b" not in raw.out
    line = next(ln for ln in raw.out.splitlines() if ln.startswith("envelope-start"))
    assert line == "envelope-start \\x1b[2J" + "y" * SIZE

    cut = await asyncio.to_thread(run, ["dead", "show", "big", ids[0], "--cut", "100"], env, 60)
    assert cut.code == 0, cut.err
    assert f"[cut: 100 of {len(expected):,} characters shown" in cut.out
    assert len(cut.out) < 2_000


async def test_pending_find_and_the_console_read_excerpts(
    redis: Redis, redis_url: str, tmp_path: Path
) -> None:
    env = cli_env(redis_url, tmp_path)
    await add_worker(redis, "w-big", ["big"])
    stream = K.type_stream("big")
    await redis.xgroup_create(stream, "g", id="0", mkstream=True)
    task = {"task_id": "t-pend", "agent_type": "big", "payload": _payload(7), "session_id": "s"}
    await redis.xadd(stream, {"kind": "task", "data": json.dumps(task, ensure_ascii=False)})
    await redis.xreadgroup("g", "w-big", {stream: ">"}, count=1)
    await _bury(redis, 2)

    before = _sent_bytes(redis_url)
    pending = await asyncio.to_thread(run, ["type", "pending", "big", "--json"], env, 60)
    found = await asyncio.to_thread(run, ["find", "t-huge-1", "--json"], env, 60)
    sent = _sent_bytes(redis_url) - before
    assert pending.code == 0, pending.err
    assert found.code == 0, found.err
    assert sent < LISTING_BUDGET, f"Redis sent {sent} bytes for a page and a lookup"
    (entry,) = pending.json()["pending"]
    assert entry["task_id"] == "t-pend" and entry["consumer"] == "w-big"
    assert entry["payload_cut"] and entry["payload"].startswith('{"text": "huge-7 é')
    assert "t-huge-1" in found.out

    # The console's backend reads (Dead view, Pending screen) go through the same calls.
    letters = await DeadLetters(redis, K, "op@test").newest("big", 10)
    assert [d.task_id for d in letters] == ["m-huge", "t-huge-1", "t-huge-0"]
    assert all(d.payload_cut and len(d.payload) < 2 * EXCERPT_BYTES for d in letters)
    pane = detail_text(letters[1], 3).plain
    assert "huge-1" in pane and "cut: the task is" in pane and "dead show" in pane
    page = await PendingEntries(redis, K, "op@test").page("big", 10)
    assert page.entries[0].payload_cut and len(page.entries[0].fields["data"]) <= EXCERPT_BYTES


async def test_without_scripts_entries_are_read_one_at_a_time(redis: Redis, redis_url: str) -> None:
    """An ACL user that may not run scripts still gets excerpts (read one per XRANGE)."""
    await _bury(redis, 2)
    rules = ["reset", "on", ">pw-h7", "~*", "+@read", "+@connection", "-@scripting"]
    setuser = ("ACL", "SETUSER", "noscript-h7", *rules)
    await redis.execute_command(*setuser)  # type: ignore[no-untyped-call]
    user = Redis.from_url(
        redis_url.replace("redis://", "redis://noscript-h7:pw-h7@"), decode_responses=True
    )
    try:
        (entries,) = await read_excerpts(
            user, [RangeRead(K.dead_letter_stream("big"), count=10)], limit=1000
        )
    finally:
        await user.aclose()
        await redis.acl_deluser("noscript-h7")
    assert len(entries) == 3
    assert all(len(e.fields["data"].encode()) <= 1000 and e.cut["data"] > SIZE for e in entries)
    assert json.loads(excerpt_data(entries[1].fields["data"]))["task_id"] == "t-huge-1"


def test_a_cut_json_object_decodes_to_what_its_prefix_holds() -> None:
    text = json.dumps({"task_id": "a", "n": 12345, "payload": {"t": "xé" * 10}})
    for cut in range(len(text)):
        members, _key, _raw = partial_object(text[:cut])
        assert all(members[k] == json.loads(text)[k] for k in members)  # nothing invented
        excerpt = json.loads(excerpt_data(text[:cut]) if cut else "{}")
        assert isinstance(excerpt, dict)
        if cut > len('{"task_id": "a", '):
            assert excerpt["task_id"] == "a"
    assert partial_object('{"n": 12')[1] == "n"  # a number at the cut may be shortened


async def test_requeue_all_moves_huge_letters_chunk_by_chunk_whole(
    redis: Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--all`` reads one chunk of letters at a time; every letter arrives whole, audited once."""
    import worker_runtime.dead_letters as dead_letters

    monkeypatch.setattr(dead_letters, "REQUEUE_CHUNK_BYTES", SIZE + MB)  # one letter a chunk
    ids = await _bury(redis, 2)
    originals = await _entries(redis, K.dead_letter_stream("big"))
    moved = await DeadLetters(redis, K, "op@test").requeue("big", None, "fixed")
    assert moved == ids
    assert await redis.xlen(K.dead_letter_stream("big")) == 0
    queued = list((await _entries(redis, K.type_stream("big"))).values())
    assert [q["data"] for q in queued] == [originals[eid]["data"] for eid in ids]
    assert all("error" not in q and "attempt" not in q for q in queued)
    audit = list((await _entries(redis, K.audit_stream)).values())
    assert len(audit) == 1 and "count=3" in audit[0]["details"]


async def _entries(redis: Redis, stream: str) -> dict[str, dict[str, str]]:
    entries: Any = await redis.xrange(stream)
    return {str(eid): dict(fields) for eid, fields in entries or []}
