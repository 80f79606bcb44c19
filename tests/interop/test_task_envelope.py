"""One task format on the wire: every task we submit is by-framework's ``ASK_AGENT``.

Against real by-framework processes (its stock runner, ``tests/interop/byf_worker.py``):

* ``worker-runtime submit`` tasks run on a by-framework worker, on its type's stream
  and on its own stream (``--worker``), and ``--wait`` reads their results back as
  by-framework's client reads them (its session data stream and execution record);
* on a type served by both runtimes every submitted task runs once, whoever takes it,
  and each result is read once;
* a rolling upgrade: legacy ``{kind, data}`` entries queued by an older producer and
  envelopes queued after them all run once on our worker;

and in every case no entry is left pending and no log has an ERROR line.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from typing import Any

import pytest
from redis.exceptions import ResponseError

from tests.handlers import DONE_LIST
from tests.interop.harness import BIN, ROOT, Fleet
from worker_runtime.envelope import parse_envelope
from worker_runtime.messages import encode_task
from worker_runtime.models import Task
from worker_runtime.producer import Producer

HANDLER = "tests.interop.data_handlers:answer"


def _submit(fleet: Fleet, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """``worker-runtime submit`` as a user runs it; its output is kept in the logs."""
    done = subprocess.run(
        [str(BIN / "worker-runtime"), "submit", *args],
        cwd=ROOT,
        env=fleet.our_process_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    with open(fleet.log_dir / "submit.log", "a") as log:
        log.write(f"$ submit {' '.join(args)}\n{done.stdout}{done.stderr}")
    return done


def _results(out: str) -> dict[str, str]:
    """``TASK result: TEXT`` lines of ``submit --wait``, by task id."""
    found: dict[str, str] = {}
    for line in out.splitlines():
        task_id, sep, text = line.partition(" result: ")
        if sep:
            assert task_id not in found, f"{task_id} printed twice"
            found[task_id] = text
    return found


async def _wait_online(fleet: Fleet, worker_id: str, timeout: float = 30) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not await fleet.redis.exists(fleet.keys.worker_online(worker_id)):
        assert loop.time() < deadline, f"{worker_id} never came online"
        await asyncio.sleep(0.05)


async def _pending(fleet: Fleet, stream: str) -> dict[str, int]:
    """Pending entries per consumer group of ``stream`` (no stream: none)."""
    try:
        groups: Any = await fleet.redis.xinfo_groups(stream)
    except ResponseError:
        return {}
    return {str(g["name"]): int(g["pending"]) for g in groups}


async def _settled(fleet: Fleet, stream: str) -> dict[str, int]:
    """The pending counts once nothing is pending (or after 10 s)."""
    for _ in range(200):
        pending = await _pending(fleet, stream)
        if not any(pending.values()):
            break
        await asyncio.sleep(0.05)
    return pending


async def test_submitted_tasks_run_on_a_by_framework_worker(fleet: Fleet) -> None:
    agent_type = f"env-byf-{fleet.kind}"
    worker = f"byf-env-{fleet.kind}"
    byf = fleet.start_byf_worker(worker, [agent_type])
    await _wait_online(fleet, worker)

    # To the type: its stream, read by the by-framework worker's group.
    done = _submit(fleet, agent_type, '{"text": "hi"}', "--count", "3", "--wait")
    assert done.returncode == 0, done.stdout + done.stderr
    results = _results(done.stdout)
    assert len(results) == 3, done.stdout
    for text in results.values():
        # by-framework's agent echoes its content: the payload as JSON text.
        assert json.loads(json.loads(text)["echo"]) == {"text": "hi"}

    # To the worker itself (its own stream), as `--worker` names it.
    done = _submit(fleet, agent_type, '{"text": "direct"}', "--worker", worker, "--wait")
    assert done.returncode == 0, done.stdout + done.stderr
    (text,) = _results(done.stdout).values()
    assert json.loads(json.loads(text)["echo"]) == {"text": "direct"}

    # A task without a session (no result wanted) runs and is acknowledged too.
    before = await fleet.redis.xlen(fleet.keys.type_stream(agent_type))
    done = _submit(fleet, agent_type, '{"text": "quiet"}')
    assert done.returncode == 0, done.stderr
    await asyncio.sleep(0.5)
    assert await fleet.redis.xlen(fleet.keys.type_stream(agent_type)) == before + 1

    assert await _settled(fleet, fleet.keys.type_stream(agent_type)) == {"agent_engines": 0}
    assert not any((await _settled(fleet, fleet.keys.worker_stream(worker))).values())
    assert byf.alive()
    assert fleet.error_lines() == {}


@pytest.mark.parametrize("fleet", ["single"], indirect=True)
async def test_a_shared_type_runs_each_submitted_task_once(fleet: Fleet) -> None:
    """On the cluster our submits reach a by-framework worker in the test above."""
    agent_type = f"env-mix-{fleet.kind}"
    worker = f"byf-mix-{fleet.kind}"
    fleet.start_byf_worker(worker, [agent_type], BYF_SLEEP="0.05")
    await _wait_online(fleet, worker)
    ours = fleet.start_our_worker(
        f"envmix{fleet.kind}",
        [agent_type],
        handler=HANDLER,
        env={"INTEROP_SLEEP": "0.05", "BYAI_CONCURRENCY": "2"},
    )
    await _wait_online(fleet, f"envmix{fleet.kind}-r0")

    count = 16
    done = _submit(fleet, agent_type, '{"n": 1}', "--count", str(count), "--wait")
    assert done.returncode == 0, done.stdout + done.stderr
    results = _results(done.stdout)
    assert len(results) == count
    by_ours = {t for t, text in results.items() if json.loads(text).get("by") == "worker_runtime"}
    by_theirs = {t for t, text in results.items() if "echo" in json.loads(text)}
    assert by_ours | by_theirs == set(results) and not by_ours & by_theirs
    ran_here = [t for t in await fleet.redis.lrange(DONE_LIST, 0, -1) if t in results]
    assert sorted(ran_here) == sorted(by_ours)  # ours ran exactly what it answered, once
    assert by_ours and by_theirs, (by_ours, by_theirs)  # one group shares the work

    assert await _settled(fleet, fleet.keys.type_stream(agent_type)) == {"agent_engines": 0}
    assert await fleet.redis.xlen(fleet.keys.dead_letter_stream(agent_type)) == 0
    assert ours.alive()
    assert fleet.error_lines() == {}


@pytest.mark.parametrize("fleet", ["single"], indirect=True)
async def test_a_rolling_upgrade_runs_legacy_and_envelope_entries_once(fleet: Fleet) -> None:
    agent_type = "upgrade"
    stream = fleet.keys.type_stream(agent_type)
    legacy = [
        Task(task_id=f"legacy-{n}", agent_type=agent_type, payload={"n": n}, session_id="up")
        for n in range(5)
    ]
    for task in legacy:  # queued by an older producer, before the upgrade
        await fleet.redis.xadd(stream, encode_task(task))  # type: ignore[arg-type]
    producer = Producer(fleet.redis, fleet.keys)
    new = [await producer.submit(agent_type, {"n": n}, session_id="up") for n in range(5)]
    entries: Any = await fleet.redis.xrange(stream)
    assert [parse_envelope(f) is not None for _, f in entries] == [False] * 5 + [True] * 5

    fleet.start_our_worker("upgraded", [agent_type], handler=HANDLER)
    results = [r async for r in producer.results("up", new, timeout=30)]
    assert sorted(r.task_id for r in results) == sorted(new)
    assert all(r.succeeded and r.worker_id == "upgraded-r0" for r in results)
    every = [t.task_id for t in legacy] + new
    for _ in range(200):
        if len(await fleet.redis.lrange(DONE_LIST, 0, -1)) >= len(every):
            break
        await asyncio.sleep(0.05)
    assert sorted(await fleet.redis.lrange(DONE_LIST, 0, -1)) == sorted(every)  # each once
    assert not any((await _settled(fleet, stream)).values())
    assert await fleet.redis.xlen(fleet.keys.dead_letter_stream(agent_type)) == 0
    assert fleet.error_lines() == {}


@pytest.mark.parametrize("fleet", ["single"], indirect=True)
async def test_a_failing_task_is_retried_then_read_as_failed(fleet: Fleet) -> None:
    fleet.start_our_worker(
        "flaky",
        ["flaky"],
        handler="tests.interop.data_handlers:flaky",
        env={"BYAI_MAX_DELIVERIES": "2"},
    )
    await _wait_online(fleet, "flaky-r0")
    done = _submit(fleet, "flaky", '{"content": "fail now"}', "--wait", "--timeout", "20")
    # Two attempts, one outcome: the error the record holds, no answer, exit 1.
    assert done.returncode == 1, done.stdout + done.stderr
    (line,) = done.stdout.splitlines()[1:]
    assert line.endswith(" error: RuntimeError: asked to fail"), line
    dead: Any = await fleet.redis.xrange(fleet.keys.dead_letter_stream("flaky"))
    assert len(dead) == 1 and dead[0][1]["attempt"] == "2"
    assert parse_envelope(dead[0][1]) is not None  # the envelope itself, intact
    assert not any((await _settled(fleet, fleet.keys.type_stream("flaky"))).values())
    # The dead letter's warning is the runtime's own report, not an error.
    assert fleet.error_lines() == {}
