"""Task outputs reach their session's data stream exactly once, through refused writes.

The batcher appends a flush's results per session in one script and writes each
session registry in one script (the batcher). These tests hold that against the property
a client relies on: every execution of a session task leaves exactly one entry in its
session's stream, in order, with the fields a single XADD wrote before, and the
registry maps every task to its execution, also when Redis refuses the writes for a
while (``maxmemory`` with ``noeviction``) in the middle of the run.

Both task formats are held to it: the ``ASK_AGENT`` envelope every task is submitted
in now (results as by-framework's data messages: ``finalAnswer`` then
``appStreamResponse``, nothing for a failed attempt that is retried) and the legacy
``{kind, data}`` entries still queued by older producers (one result entry per
execution, failed attempts included).
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter, defaultdict
from collections.abc import AsyncIterator

import pytest
from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster

from tests.backends import Backend
from tests.integration.runtime_helpers import eventually, make_instance
from tests.streams import hash_fields, stream_entries
from worker_runtime.batcher import Batcher
from worker_runtime.envelope import read_data_event
from worker_runtime.instance import WorkerInstance
from worker_runtime.keys import Keys
from worker_runtime.messages import encode_task
from worker_runtime.models import Task
from worker_runtime.producer import Producer

AGENT_TYPE = "results"
SESSIONS = 24
PER_SESSION = 6
HOSTILE = 'échec ✓ 🚀 "quoted" back\\slash \x01 tab\t'
"""An error text with non-ASCII (an astral character too), quotes and control bytes."""


class Handler:
    """Returns ``{"n": payload n}``; tasks with ``fail_first`` raise on their first attempt.

    Tasks with ``gated`` wait until :attr:`gate` is set, so they finish while the test
    holds Redis out of memory.
    """

    def __init__(self) -> None:
        self.runs: Counter[str] = Counter()
        self.returned: Counter[str] = Counter()
        self.gate = asyncio.Event()

    async def __call__(self, task: Task) -> dict[str, int]:
        self.runs[task.task_id] += 1
        if task.payload.get("gated"):
            await self.gate.wait()
        self.returned[task.task_id] += 1
        if task.payload.get("fail_first") and task.attempt == 1:
            raise ValueError(f"{HOSTILE}{task.payload['n']}")
        return {"n": int(task.payload["n"])}


@pytest.fixture
async def instances() -> AsyncIterator[list[WorkerInstance]]:
    """Instances a test started; stopped at the end."""
    started: list[WorkerInstance] = []
    yield started
    for inst in started:
        await inst.stop(grace=0)


async def _total_entries(backend: Backend, sessions: list[str]) -> int:
    total = 0
    for session in sessions:
        total += int(await backend.redis.xlen(backend.keys.session_data_stream(session)))
    return total


async def _session_contents(
    backend: Backend, session: str
) -> tuple[list[dict[str, str]], dict[str, str]]:
    """A session's data stream entries (fields only, in order) and its registry hash."""
    keys = backend.keys
    entries = [f for _, f in await stream_entries(backend.redis, keys.session_data_stream(session))]
    return entries, await hash_fields(backend.redis, keys.session_registry(session))


async def _assert_session_ttls(backend: Backend, session: str) -> None:
    """Both of a session's keys expire, within a day."""
    ttl = await backend.redis.ttl(backend.keys.session_data_stream(session))
    assert 0 < ttl <= 86_400, (session, ttl)
    assert 0 < await backend.redis.ttl(backend.keys.session_registry(session)) <= 86_400


async def _check_envelope_sessions(
    backend: Backend, expected: dict[str, list[tuple[str, dict[str, object]]]]
) -> None:
    """Each task left its answer and its end once, in order; its record is completed."""
    for session, tasks in expected.items():
        entries, registry = await _session_contents(backend, session)
        seen: dict[str, list[tuple[str, str]]] = defaultdict(list)
        for fields in entries:
            event = read_data_event(fields)
            assert event is not None, fields
            seen[event.message_id].append((event.event_type, event.content))
        assert set(seen) == {task_id for task_id, _ in tasks}, session
        for task_id, payload in tasks:
            # A failed first attempt that ran again sent nothing (no end of stream).
            (answer_event, answer), (end_event, _) = seen[task_id]
            assert (answer_event, end_event) == ("finalAnswer", "appStreamResponse")
            assert json.loads(answer) == {"n": payload["n"]}
            record = json.loads(registry[f"exec:{registry[f'msg_map:{task_id}']}"])
            assert record["status"] == "COMPLETED", record
            assert record["message_id"] == task_id
            assert record["worker_id"] == "res-r0"
        await _assert_session_ttls(backend, session)


async def _check_sessions(
    backend: Backend, expected: dict[str, list[tuple[str, dict[str, object]]]]
) -> None:
    """Each execution left exactly one entry, in order, with the single-XADD fields."""
    for session, tasks in expected.items():
        entries, registry = await _session_contents(backend, session)
        seen: dict[str, list[dict[str, str]]] = defaultdict(list)
        for fields in entries:
            seen[fields["task_id"]].append(fields)
        assert set(seen) == {task_id for task_id, _ in tasks}, session
        for task_id, payload in tasks:
            got = seen[task_id]
            if payload["fail_first"]:
                assert [f["state"] for f in got] == ["failed", "succeeded"], (session, got)
                failed, ok = got
                assert list(failed) == ["task_id", "execution_id", "worker_id", "state", "error"]
                assert failed["error"] == f"ValueError: {HOSTILE}{payload['n']}"
            else:
                assert [f["state"] for f in got] == ["succeeded"], (session, got)
                ok = got[0]
            assert list(ok) == ["task_id", "execution_id", "worker_id", "state", "result"]
            assert json.loads(ok["result"]) == {"n": payload["n"]}
            executions = {f["execution_id"] for f in got}
            assert len(executions) == len(got), got  # one entry per execution
            for eid in executions:
                assert json.loads(registry[f"exec:{eid}"])["task_id"] == task_id
            # The newest execution of the task is the one the registry points to.
            assert registry[f"msg_map:{task_id}"] == got[-1]["execution_id"]
        await _assert_session_ttls(backend, session)


async def test_results_reach_every_session_once_through_a_refused_write(
    backend: Backend, instances: list[WorkerInstance]
) -> None:
    await _results_through_a_refused_write(backend, instances, legacy=False)


@pytest.mark.parametrize("backend", ["single"], indirect=True)
async def test_legacy_results_reach_every_session_once_through_a_refused_write(
    backend: Backend, instances: list[WorkerInstance]
) -> None:
    await _results_through_a_refused_write(backend, instances, legacy=True)


async def _results_through_a_refused_write(
    backend: Backend, instances: list[WorkerInstance], legacy: bool
) -> None:
    handler = Handler()
    inst = make_instance(
        backend.settings, handler, [AGENT_TYPE], "res", concurrency=SESSIONS * PER_SESSION
    )
    await inst.start()
    instances.append(inst)
    producer = Producer(backend.redis, backend.keys)

    # A first round that flows normally (retries of its failed first attempts included).
    before = await _submit_all(producer, "a", gated=False, legacy=legacy)
    expected_a = _expected_entries(before, legacy)
    await eventually(lambda: _reached(backend, list(before), expected_a), timeout=20)

    # A second round whose tasks all finish while Redis refuses writes.
    during = await _submit_all(producer, "b", gated=True, legacy=legacy)
    ids_b = [task_id for tasks in during.values() for task_id, _ in tasks]
    await eventually(lambda: _all_started(handler, ids_b), timeout=20)
    await _maxmemory(backend, "1")
    try:
        handler.gate.set()
        await eventually(lambda: _all_returned(handler, ids_b), timeout=20)
        # Give the batcher a few flushes: every one is refused, so nothing may land.
        await asyncio.sleep(0.5)
        assert await _total_entries(backend, list(during)) == 0, "the OOM refused nothing"
    finally:
        await _maxmemory(backend, "0")
    expected_b = _expected_entries(during, legacy)
    await eventually(lambda: _reached(backend, list(during), expected_b), timeout=30)
    # Past the longest refusal back-off: a duplicate from a retried batch would show.
    await asyncio.sleep(2.5)
    check = _check_sessions if legacy else _check_envelope_sessions
    await check(backend, before)
    await check(backend, during)
    every = [t for tasks in (*before.values(), *during.values()) for t, _ in tasks]
    fails = {
        t for tasks in (*before.values(), *during.values()) for t, p in tasks if p["fail_first"]
    }
    for task_id in every:
        # Nothing ran twice without a fault: once, or twice for a failed first attempt.
        assert handler.runs[task_id] == (2 if task_id in fails else 1), task_id


def _expected_entries(tasks: dict[str, list[tuple[str, dict[str, object]]]], legacy: bool) -> int:
    """Result entries the tasks leave: one per legacy execution, two per envelope task."""
    if legacy:
        return sum(len(t) + sum(1 for _, p in t if p["fail_first"]) for t in tasks.values())
    return sum(2 * len(t) for t in tasks.values())


async def _submit_all(
    producer: Producer, batch: str, gated: bool, legacy: bool = False
) -> dict[str, list[tuple[str, dict[str, object]]]]:
    """``PER_SESSION`` tasks in each of ``SESSIONS`` sessions, interleaved across sessions.

    ``legacy``: written as an older producer wrote them (``{kind, data}``).
    Returns per session the (task id, payload) in submission order.
    """
    by_session: dict[str, list[tuple[str, dict[str, object]]]] = defaultdict(list)
    for i in range(PER_SESSION):
        for s in range(SESSIONS):
            session = f"{batch}-{s}"
            n = i * 1000 + s
            payload: dict[str, object] = {"n": n, "gated": gated, "fail_first": n % 5 == 0}
            if legacy:
                task = Task(
                    task_id=f"{batch}-{n}",
                    agent_type=AGENT_TYPE,
                    payload=payload,
                    session_id=session,
                )
                stream = producer.keys.type_stream(AGENT_TYPE)
                await producer.redis.xadd(stream, encode_task(task))  # type: ignore[arg-type]
                task_id = task.task_id
            else:
                task_id = await producer.submit(AGENT_TYPE, payload, session_id=session)
            by_session[session].append((task_id, payload))
    return by_session


async def _maxmemory(backend: Backend, value: str) -> None:
    """Set ``maxmemory`` on the server, or on every primary of the cluster."""
    if isinstance(backend.redis, RedisCluster):
        await backend.redis.execute_command(
            "CONFIG SET", "maxmemory", value, target_nodes=RedisCluster.PRIMARIES
        )
    else:
        await backend.redis.config_set("maxmemory", value)


async def _reached(backend: Backend, sessions: list[str], expected: int) -> bool:
    return await _total_entries(backend, sessions) >= expected


async def _all_started(handler: Handler, ids: list[str]) -> bool:
    return all(handler.runs[t] for t in ids)


async def _all_returned(handler: Handler, ids: list[str]) -> bool:
    return all(handler.returned[t] for t in ids)


async def test_a_refused_ttl_keeps_the_appended_results_single(redis: Redis) -> None:
    """Redis appends the results but refuses their EXPIRE (an ACL without it).

    The results are in: the batch must not be appended again, whatever the retries.
    """
    user, password = "no-expire", "No-Expire-pw-1"
    await redis.acl_setuser(
        user,
        enabled=True,
        reset=True,
        passwords=[f"+{password}"],
        keys=["*"],
        commands=["+@all", "-expire"],
    )
    kwargs = redis.connection_pool.connection_kwargs
    limited = Redis(
        host=kwargs["host"],
        port=kwargs["port"],
        username=user,
        password=password,
        decode_responses=True,
    )
    keys = Keys()
    batcher = Batcher(limited, keys)
    batcher.start()
    try:
        for n in range(3):
            batcher.output("ttl-less", {"task_id": f"t{n}", "state": "succeeded", "result": "1"})
        await asyncio.wait_for(batcher.drain(), 10)  # a batch retried forever fails
        assert batcher.refusals.reason, "the EXPIRE was not refused"
        batcher.output("ttl-less", {"task_id": "t3", "state": "succeeded", "result": "1"})
        await asyncio.wait_for(batcher.drain(), 10)  # a batch retried forever fails
        await asyncio.sleep(0.5)  # past the refusal back-off: a re-append would show
        entries = await stream_entries(redis, keys.session_data_stream("ttl-less"))
        assert [f["task_id"] for _, f in entries] == ["t0", "t1", "t2", "t3"]
        assert await redis.ttl(keys.session_data_stream("ttl-less")) == -1
    finally:
        await batcher.close()
        await limited.aclose()
        await redis.acl_deluser(user)


class Sleeper:
    """Sleeps ``payload['sleep']`` seconds: long enough for the running state to be written."""

    async def __call__(self, task: Task) -> None:
        await asyncio.sleep(float(task.payload.get("sleep", 0)))


async def test_history_is_capped_and_leaves_no_running_entry(
    backend: Backend, instances: list[WorkerInstance]
) -> None:
    """The per-worker history script: newest ``cap`` kept, index and snapshots agree."""
    keys = backend.keys
    inst = make_instance(
        backend.settings, Sleeper(), [AGENT_TYPE], "hist", concurrency=4, execution_cap=5
    )
    await inst.start()
    instances.append(inst)
    wid = "hist-r0"
    ids = [
        await Producer(backend.redis, keys).submit(AGENT_TYPE, {"sleep": 0.05}) for _ in range(13)
    ]
    await eventually(lambda: _processed(backend, 13), timeout=20)
    await asyncio.sleep(0.3)  # the last finishes' flush
    raw = await backend.redis.zrange(keys.worker_executions(wid), 0, -1, withscores=True)
    index = [(str(pair[0]), float(pair[1])) for pair in raw]
    snaps = await hash_fields(backend.redis, keys.worker_history_snapshots(wid))
    assert len(index) == 5 and {m for m, _ in index} == set(snaps)
    for member, score in index:
        snap = json.loads(snaps[member])
        assert snap["state"] == "succeeded" and snap["finished_at"] == int(score)
    # The newest five tasks are the ones kept (they ran four at a time, in order).
    kept = {json.loads(v)["task_id"] for v in snaps.values()}
    assert kept <= set(ids[-8:]), kept
    # Each start was written (a 50 ms task outlives a flush) and removed at its finish.
    assert await backend.redis.zcard(keys.worker_active_executions(wid)) == 0
    assert await hash_fields(backend.redis, keys.worker_active_snapshots(wid)) == {}


async def _processed(backend: Backend, count: int) -> bool:
    raw = await backend.redis.hget(backend.keys.type_stats, f"processed:{AGENT_TYPE}")
    return int(raw or 0) >= count
