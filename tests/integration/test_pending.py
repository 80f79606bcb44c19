"""Pending entries of a type and dead-lettering a stuck one, on a real redis-server and
a real 3-primary cluster (``backend``: ``[single]`` v1 keys, ``[cluster]`` v2)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from tests.backends import Backend
from tests.integration.runtime_helpers import make_instance
from tests.streams import stream_entries
from worker_runtime.audit import parse_audit
from worker_runtime.dead_letters import DeadLetters
from worker_runtime.envelope import parse_envelope
from worker_runtime.keys import CONSUMER_GROUP
from worker_runtime.messages import encode_task
from worker_runtime.models import Task
from worker_runtime.pending import (
    KIND_BY_FRAMEWORK,
    KIND_DELETED,
    KIND_TASK,
    NotPendingError,
    PendingEntries,
)

OPERATOR = "ops@console"


def envelope(message_id: str, content: str) -> dict[str, str]:
    """A by-framework client's ASK_AGENT entry."""
    header = {
        "message_id": message_id,
        "session_id": "s-1",
        "trace_id": "tr-1",
        "target_agent_type": "chat",
        "source_agent_type": "client",
    }
    data = {"action_type": "ASK_AGENT", "header": header, "body": {"content": content}}
    return {"data": json.dumps(data)}


async def stuck(
    backend: Backend,
    fields: dict[str, str],
    consumer: str = "gone-worker",
    deliveries: int = 1,
    group: str = CONSUMER_GROUP,
) -> str:
    """An entry delivered ``deliveries`` times to a consumer that holds no lease."""
    r, stream = backend.redis, backend.keys.type_stream("chat")
    entry_id = str(await r.xadd(stream, fields))  # type: ignore[arg-type]
    try:
        await r.xgroup_create(stream, group, id="0", mkstream=True)
    except Exception as exc:  # BUSYGROUP: it exists
        assert "BUSYGROUP" in str(exc)
    await r.xreadgroup(group, consumer, {stream: ">"}, count=100)
    for _ in range(deliveries - 1):  # each claim is one more delivery
        await r.xclaim(stream, group, consumer, 0, [entry_id])
    return entry_id


async def audit(backend: Backend) -> list[Any]:
    """Audit events, oldest first."""
    return list(reversed(parse_audit(await backend.redis.xrevrange(backend.keys.audit_stream))))


async def test_a_stuck_entry_is_listed_with_owner_idle_and_deliveries(backend: Backend) -> None:
    task = Task(task_id="t-1", agent_type="chat", payload={"text": "hello \x1b[2J"})
    ours = await stuck(backend, encode_task(task), deliveries=3)
    theirs = await stuck(backend, envelope("m-1", "what is up"), consumer="byf-1")
    await asyncio.sleep(0.06)
    page = await PendingEntries(backend.redis, backend.keys, OPERATOR).page("chat")
    assert page.total == 2 and page.groups == [CONSUMER_GROUP] and page.next_cursor is None
    by_id = {e.entry_id: e for e in page.entries}
    mine = by_id[ours]
    assert (mine.consumer, mine.deliveries, mine.kind, mine.task_id) == (
        "gone-worker",
        3,
        KIND_TASK,
        "t-1",
    )
    assert mine.idle_ms >= 50 and mine.owner_online is False
    assert json.loads(mine.payload) == {"text": "hello \x1b[2J"}
    other = by_id[theirs]
    assert (other.kind, other.task_id, other.session_id, other.action_type) == (
        KIND_BY_FRAMEWORK,
        "m-1",
        "s-1",
        "ASK_AGENT",
    )
    assert other.payload == "what is up" and other.deliveries == 1


async def test_every_group_is_listed_and_large_pels_page(backend: Backend) -> None:
    for i in range(5):
        await stuck(backend, encode_task(Task(task_id=f"t{i}", agent_type="chat")))
    await stuck(backend, {"data": "not json"}, group="agent_engines", consumer="byf")
    pending = PendingEntries(backend.redis, backend.keys, OPERATOR)
    seen: list[tuple[str, str]] = []
    cursor: str | None = None
    pages = 0
    while True:
        page = await pending.page("chat", limit=2, cursor=cursor)
        pages += 1
        seen += [(e.group, e.entry_id) for e in page.entries]
        cursor = page.next_cursor
        if cursor is None:
            break
    assert page.groups == sorted([CONSUMER_GROUP, "agent_engines"])
    # Ours read the first five; agent_engines, created later from 0, read all six.
    assert page.total == 5 + 6 and len(seen) == len(set(seen)) == 11 and pages == 6
    assert {g for g, _ in seen} == {CONSUMER_GROUP, "agent_engines"}


async def test_dead_lettering_moves_the_entry_and_audits_it(backend: Backend) -> None:
    task = Task(task_id="t-9", agent_type="chat", payload={"n": 9})
    entry_id = await stuck(backend, encode_task(task), deliveries=4)
    pending = PendingEntries(backend.redis, backend.keys, OPERATOR)
    done = await pending.dead_letter("chat", entry_id, "poison: loops forever")
    assert (done.group, done.consumer, done.deliveries) == (CONSUMER_GROUP, "gone-worker", 4)

    r, keys = backend.redis, backend.keys
    assert await r.xpending_range(keys.type_stream("chat"), CONSUMER_GROUP, "-", "+", 10) == []
    dead = await stream_entries(r, keys.dead_letter_stream("chat"))
    assert [str(i) for i, _ in dead] == [done.dead_letter_id]
    fields = dead[0][1]
    assert fields["reason"] == "poison: loops forever" and fields["operator"] == OPERATOR
    assert fields["original_id"] == entry_id and fields["deliveries"] == "4"
    assert fields["worker_id"] == "gone-worker" and fields["kind"] == "task"
    assert "poison" in fields["error"] and int(fields["buried_at"]) > 0
    assert json.loads(fields["data"])["task_id"] == "t-9"
    events = await audit(backend)
    assert [(e.action, e.target, e.reason) for e in events] == [
        ("dead-letter", "chat", "poison: loops forever")
    ]
    assert entry_id in events[0].details and events[0].operator == OPERATOR

    # A second attempt finds it acknowledged: refused, nothing added.
    with pytest.raises(NotPendingError, match="not pending"):
        await pending.dead_letter("chat", entry_id, "again")
    assert await r.xlen(keys.dead_letter_stream("chat")) == 1 and len(await audit(backend)) == 1


async def test_an_entry_acked_before_the_action_is_left_alone(backend: Backend) -> None:
    entry_id = await stuck(backend, encode_task(Task(task_id="t", agent_type="chat")))
    r, keys = backend.redis, backend.keys
    await r.xack(keys.type_stream("chat"), CONSUMER_GROUP, entry_id)
    pending = PendingEntries(backend.redis, backend.keys, OPERATOR)
    for atomic in (None, False):  # the automatic choice (atomic on one Redis) and two steps
        with pytest.raises(NotPendingError):
            await pending.dead_letter("chat", entry_id, "stuck", CONSUMER_GROUP, atomic=atomic)
    assert await r.xlen(keys.dead_letter_stream("chat")) == 0 and await audit(backend) == []


async def test_an_ack_racing_the_two_step_move_loses_and_duplicates_nothing(
    backend: Backend,
) -> None:
    r, keys = backend.redis, backend.keys
    entry_id = await stuck(backend, encode_task(Task(task_id="t", agent_type="chat")))
    pending = PendingEntries(backend.redis, backend.keys, OPERATOR)
    worker_acked: list[int] = []

    async def worker_finishes() -> None:  # between the copy and the acknowledgement
        assert await r.xlen(keys.dead_letter_stream("chat")) == 1
        worker_acked.append(await r.xack(keys.type_stream("chat"), CONSUMER_GROUP, entry_id))

    pending._between_steps = worker_finishes  # type: ignore[method-assign]
    with pytest.raises(NotPendingError, match="acknowledged meanwhile"):
        await pending.dead_letter("chat", entry_id, "stuck", atomic=False)
    # The worker's ack won: the task finished, so no dead letter of it stays.
    assert worker_acked == [1] and await r.xlen(keys.dead_letter_stream("chat")) == 0
    assert await audit(backend) == []


async def test_the_two_step_move_completes_an_interrupted_attempt_once(backend: Backend) -> None:
    r, keys = backend.redis, backend.keys
    entry_id = await stuck(backend, encode_task(Task(task_id="t", agent_type="chat")))
    pending = PendingEntries(backend.redis, backend.keys, OPERATOR)

    async def crash() -> None:
        raise ConnectionError("console lost its connection")

    pending._between_steps = crash  # type: ignore[method-assign]
    with pytest.raises(ConnectionError):
        await pending.dead_letter("chat", entry_id, "stuck", atomic=False)
    assert await r.xlen(keys.dead_letter_stream("chat")) == 1  # copied, still pending
    del pending._between_steps
    done = await pending.dead_letter("chat", entry_id, "stuck", atomic=False)
    dead = await stream_entries(r, keys.dead_letter_stream("chat"))
    assert [str(i) for i, _ in dead] == [done.dead_letter_id]  # the same copy, once
    assert await r.xpending_range(keys.type_stream("chat"), CONSUMER_GROUP, "-", "+", 10) == []


@pytest.mark.parametrize("atomic", [None, False])
async def test_concurrent_acks_never_lose_or_double_a_task(
    backend: Backend, atomic: bool | None
) -> None:
    """Each entry ends acknowledged by the worker (XACK returned 1) xor dead-lettered."""
    r, keys = backend.redis, backend.keys
    ids = [
        await stuck(backend, encode_task(Task(task_id=f"t{i}", agent_type="chat")))
        for i in range(20)
    ]
    pending = PendingEntries(backend.redis, backend.keys, OPERATOR)

    async def move(entry_id: str) -> bool:
        try:
            await pending.dead_letter("chat", entry_id, "race", CONSUMER_GROUP, atomic=atomic)
        except NotPendingError:
            return False
        return True

    async def ack(entry_id: str) -> bool:
        return bool(await r.xack(keys.type_stream("chat"), CONSUMER_GROUP, entry_id))

    results = await asyncio.gather(*(asyncio.gather(move(i), ack(i)) for i in ids))
    dead = await stream_entries(r, keys.dead_letter_stream("chat"))
    originals = sorted(f["original_id"] for _, f in dead)
    moved = sorted(i for i, (was_moved, _) in zip(ids, results, strict=True) if was_moved)
    assert originals == moved  # every reported move is there, once
    for entry_id, (was_moved, was_acked) in zip(ids, results, strict=True):
        assert was_moved != was_acked, entry_id  # exactly one of them had it
    assert await r.xpending_range(keys.type_stream("chat"), CONSUMER_GROUP, "-", "+", 100) == []


async def test_a_deleted_entrys_pel_record_can_still_be_dead_lettered(backend: Backend) -> None:
    r, keys = backend.redis, backend.keys
    entry_id = await stuck(backend, encode_task(Task(task_id="t", agent_type="chat")))
    await r.xdel(keys.type_stream("chat"), entry_id)
    pending = PendingEntries(backend.redis, backend.keys, OPERATOR)
    (entry,) = (await pending.page("chat")).entries
    assert entry.kind == KIND_DELETED and entry.fields == {}
    await pending.dead_letter("chat", entry_id, "content gone")
    (dead,) = await stream_entries(r, keys.dead_letter_stream("chat"))
    assert dead[1]["original_id"] == entry_id and "data" not in dead[1]


async def test_a_running_task_of_a_real_worker_is_listed_and_moved_once(
    backend: Backend,
) -> None:
    """A real in-process worker holds the entry; its late ack after the move is harmless."""
    release = asyncio.Event()
    started = asyncio.Event()

    async def slow(task: Task) -> dict[str, Any]:
        started.set()
        await release.wait()
        return {"ok": True}

    instance = make_instance(backend.settings, slow, ["chat"], "inst-p")
    await instance.start()
    try:
        r, keys = backend.redis, backend.keys
        await r.xadd(
            keys.type_stream("chat"),
            encode_task(Task(task_id="t-run", agent_type="chat")),  # type: ignore[arg-type]
        )
        await asyncio.wait_for(started.wait(), 10)
        pending = PendingEntries(r, keys, OPERATOR)
        (entry,) = (await pending.page("chat")).entries
        assert entry.consumer == "inst-p-r0" and entry.owner_online and entry.deliveries == 1
        done = await pending.dead_letter("chat", entry.entry_id, "hung on a lock")
        assert done.consumer == "inst-p-r0"
        release.set()
        await instance.run_until_idle(timeout=10)
        assert await r.xlen(keys.dead_letter_stream("chat")) == 1
        assert (await pending.page("chat")).total == 0
    finally:
        release.set()
        await instance.stop()


async def test_a_dead_lettered_envelope_requeues_as_by_framework_wrote_it(
    backend: Backend,
) -> None:
    r, keys = backend.redis, backend.keys
    original = envelope("m-5", "retry me")
    entry_id = await stuck(backend, original, consumer="byf-1", deliveries=2)
    done = await PendingEntries(r, keys, OPERATOR).dead_letter("chat", entry_id, "stuck")
    dead = DeadLetters(r, keys, OPERATOR)
    letter = await dead.get("chat", done.dead_letter_id)
    assert letter is not None and (letter.task_id, letter.payload) == ("m-5", "retry me")
    assert await dead.requeue("chat", [done.dead_letter_id], "fixed") == [done.dead_letter_id]
    entries = await stream_entries(r, keys.type_stream("chat"))
    fields = entries[-1][1]
    assert fields == original  # no kind added, no burial field left: by-framework reads it
    requeued = parse_envelope(fields)
    assert requeued is not None and requeued.text("message_id") == "m-5"
