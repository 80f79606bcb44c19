"""Mixed fleets on a shared agent type: each task runs once whoever started first.

Every consumer group of a stream gets every entry. by-framework's workers read the
group their code names (``agent_engines`` from Python's ``run_worker`` and the TS
``runWorker`` helper; ``byai_gateway:consumer_group:agent_engines:<sha1 of the type
set>`` from a TS or Java ``WorkerRunner``); worker_runtime joins the group a stream
has, and when a by-framework worker starts later with a group of its own, moves to it
at its next beat (README, "How the runtime behaves", consumer groups).

Each test runs both start orders in one fleet: a by-framework worker on type A before
ours (ours joins its group), then a backlog on type B served by ours alone, then a
by-framework worker on B (a second group appears; ours moves to it). Tasks are sent by
by-framework's own Python client (``GatewayClient.send_message``, the ``ASK_AGENT``
envelope) and read back the way it reads them; each must have run exactly once, its
answer delivered once, nothing left pending in any group, and no ERROR in any log.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections import Counter
from typing import Any

import pytest
from redis.exceptions import ResponseError

from tests.handlers import DONE_LIST
from tests.interop.foreign_consumer import group_name
from tests.interop.harness import HERE, Fleet, LoggedProcess
from worker_runtime.fleet import FleetReader
from worker_runtime.keys import CONSUMER_GROUP, PARKED_ID
from worker_runtime.models import InstanceLease

HANDLER = "tests.interop.data_handlers:answer"
OURS_ENV = {"INTEROP_SLEEP": "0.05", "BYAI_CONCURRENCY": "2"}
FOREIGN_ENV = {"FOREIGN_SLEEP": "0.05", "FOREIGN_BLOCK_MS": "300", "FOREIGN_HEARTBEAT": "1"}
COUNT = 10
BACKLOG = 4


def _start_sim(fleet: Fleet, sdk: str, worker_id: str, types: list[str]) -> LoggedProcess:
    """``tests/interop/foreign_consumer.py`` as a TS or Java worker (see its docstring)."""
    env = fleet.our_process_env(
        FOREIGN_SDK=sdk, FOREIGN_WORKER_ID=worker_id, FOREIGN_TYPES=",".join(types), **FOREIGN_ENV
    )
    return fleet._spawn(worker_id, [sys.executable, "-m", "tests.interop.foreign_consumer"], env)


def _send(fleet: Fleet, agent_type: str, count: int) -> list[dict[str, Any]]:
    """by-framework's Python client sends ``count`` tasks and reads their results."""
    done = subprocess.run(
        [str(fleet.byf_python), str(HERE / "byf_client.py"), agent_type, str(count)],
        env=fleet.byf_process_env(),
        capture_output=True,
        text=True,
        timeout=90,
    )
    with open(fleet.log_dir / "byf_client.log", "a") as log:
        log.write(done.stdout + done.stderr)
    assert done.returncode == 0, done.stderr
    messages: list[dict[str, Any]] = json.loads(done.stdout.strip().splitlines()[-1])["messages"]
    return messages


async def _groups(fleet: Fleet, agent_type: str) -> dict[str, dict[str, Any]]:
    try:
        reply = await fleet.redis.xinfo_groups(fleet.keys.type_stream(agent_type))
    except ResponseError:
        return {}
    return {str(g["name"]): g for g in reply if isinstance(g, dict)}


async def _until(check: Any, what: str, timeout: float = 30) -> Any:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not (value := await check()):
        assert loop.time() < deadline, f"never: {what}"
        await asyncio.sleep(0.05)
    return value


async def _online(fleet: Fleet, worker_id: str) -> None:
    async def check() -> bool:
        return bool(await fleet.redis.exists(fleet.keys.worker_online(worker_id)))

    await _until(check, f"{worker_id} online")


async def _lease(fleet: Fleet, instance: str) -> InstanceLease:
    return InstanceLease.parse(await fleet.redis.get(fleet.keys.instance_online(instance)))


async def _mixed_fleet(fleet: Fleet, tag: str, foreign_group: Any, start_foreign: Any) -> None:
    """Both start orders on one fleet (see the module docstring); the proof's checks."""
    a, b = f"{tag}-a", f"{tag}-b"
    group_a, group_b = foreign_group(a), foreign_group(b)
    # Order 1: the by-framework worker first; ours joins its group.
    first = start_foreign(f"{tag}-f1", [a])
    await _online(fleet, f"{tag}-f1")
    await _until(lambda: _has_group(fleet, a, group_a), f"group {group_a}")
    ours = fleet.start_our_worker(tag, [a, b], handler=HANDLER, env=OURS_ENV)
    await _online(fleet, f"{tag}-r0")
    assert list(await _groups(fleet, a)) == [group_a]

    # Order 2: ours alone on B with a backlog it runs, then a by-framework worker there.
    backlog = await asyncio.to_thread(_send, fleet, b, BACKLOG)
    second = start_foreign(f"{tag}-f2", [b])
    await _online(fleet, f"{tag}-f2")

    async def moved() -> bool:
        groups = await _groups(fleet, b)
        ours_parked = str(groups.get(CONSUMER_GROUP, {}).get("last-delivered-id")) == PARKED_ID
        return ours_parked and group_b in groups

    await _until(moved, f"our instance moving {b} to {group_b}")

    async def lease_shows() -> InstanceLease | None:
        lease = await _lease(fleet, tag)
        return lease if lease.consumer_groups.get(b) == group_b else None

    lease = await _until(lease_shows, "the move in the instance lease")
    assert lease.consumer_groups == {a: group_a, b: group_b}
    assert lease.group_warnings == []

    on_a, on_b = await asyncio.gather(
        asyncio.to_thread(_send, fleet, a, COUNT), asyncio.to_thread(_send, fleet, b, COUNT)
    )
    messages = backlog + on_a + on_b
    assert len(messages) == BACKLOG + 2 * COUNT
    for message in messages:
        assert message["sent"], message
        assert len(message["answers"]) == 1, message  # one run, one answer delivered
        assert message["ends"] == 1, message
        assert message["record"]["status"] == "COMPLETED", message["record"]
    workers = Counter(m["record"]["worker_id"] for m in on_a + on_b)
    assert set(workers) <= {f"{tag}-r0", f"{tag}-f1", f"{tag}-f2"}, workers
    ids = {m["message_id"] for m in messages}
    ran = Counter(r for r in await fleet.redis.lrange(DONE_LIST, 0, -1) if r in ids)
    ours_ran = {m["message_id"] for m in messages if m["record"]["worker_id"] == f"{tag}-r0"}
    assert ours_ran and ours_ran < ids  # both runtimes served tasks
    assert all(n == 1 for n in ran.values()), ran  # nobody that records its runs ran one twice
    assert ours_ran <= set(ran)

    for agent_type in (a, b):
        groups = await _groups(fleet, agent_type)
        assert all(int(g["pending"]) == 0 for g in groups.values()), groups
    snap = await FleetReader(fleet.redis, fleet.keys).read()
    rows = {t.name: t for t in snap.types}
    # The parked group delivers nothing: one group per type for the console.
    assert rows[a].groups == [group_a] and rows[b].groups == [group_b]
    assert first.alive() and second.alive() and ours.alive()
    assert "moved from" in ours.log()
    assert fleet.error_lines() == {}


async def _has_group(fleet: Fleet, agent_type: str, name: str) -> bool:
    return name in await _groups(fleet, agent_type)


@pytest.mark.parametrize("fleet", ["single"], indirect=True)
async def test_python_run_worker_and_ours(fleet: Fleet) -> None:
    """Python SDK ``by_framework.worker.app.run_worker`` (real processes): group
    ``agent_engines`` created at ``0`` with MKSTREAM by ``WorkerRunner.setup_streams``,
    read with ``>`` only (``fetch_messages``)."""

    def start(worker_id: str, types: list[str]) -> LoggedProcess:
        return fleet.start_byf_worker(worker_id, types, BYF_SLEEP="0.05")

    await _mixed_fleet(fleet, "grp-py", lambda _t: "agent_engines", start)


@pytest.mark.parametrize("fleet", ["single"], indirect=True)
async def test_ts_worker_runner_and_ours(fleet: Fleet) -> None:
    """TS SDK ``src/runner.ts`` ``WorkerRunner`` without ``groupName``: ``autoGroupName``
    (sha1 of the sorted type set), ``setupStreams`` at ``0`` MKSTREAM, ``poll``,
    ``processAndAck`` (simulated: ``tests/interop/foreign_consumer.py``)."""

    def start(worker_id: str, types: list[str]) -> LoggedProcess:
        return _start_sim(fleet, "ts-runner", worker_id, types)

    await _mixed_fleet(fleet, "grp-ts", lambda t: group_name("ts-runner", [t]), start)


@pytest.mark.parametrize("fleet", ["single"], indirect=True)
async def test_ts_run_worker_helper_and_ours(fleet: Fleet) -> None:
    """TS SDK ``src/app.ts`` ``runWorker``: ``groupName: options.consumerGroup ||
    'agent_engines'`` handed to ``WorkerRunner`` (``setupStreams`` at ``0``, ``poll``,
    ``processAndAck``; simulated: ``tests/interop/foreign_consumer.py``)."""

    def start(worker_id: str, types: list[str]) -> LoggedProcess:
        return _start_sim(fleet, "ts-run-worker", worker_id, types)

    await _mixed_fleet(fleet, "grp-tsh", lambda _t: "agent_engines", start)


@pytest.mark.parametrize("fleet", ["cluster"], indirect=True)
async def test_ts_worker_runner_and_ours_on_a_cluster(fleet: Fleet) -> None:
    """As :func:`test_ts_worker_runner_and_ours` on the 3-node cluster (v2 keys): TS
    ``WorkerRunner.poll`` reads each type stream alone (one slot per call)."""

    def start(worker_id: str, types: list[str]) -> LoggedProcess:
        return _start_sim(fleet, "ts-runner", worker_id, types)

    await _mixed_fleet(fleet, "grp-tsc", lambda t: group_name("ts-runner", [t]), start)


@pytest.mark.parametrize("fleet", ["single"], indirect=True)
async def test_two_by_framework_groups_are_reported_loudly(fleet: Fleet) -> None:
    """TS SDK ``WorkerRunner`` (``autoGroupName``) and ``runWorker`` (``agent_engines``)
    on one type: two groups this runtime cannot merge. Ours starts (its WARNING names
    both), reports them in its instance lease, and the console alerts."""
    agent_type = "grp-two"
    _start_sim(fleet, "ts-runner", "grp-two-f1", [agent_type])
    _start_sim(fleet, "ts-run-worker", "grp-two-f2", [agent_type])
    hashed = group_name("ts-runner", [agent_type])
    for worker_id in ("grp-two-f1", "grp-two-f2"):
        await _online(fleet, worker_id)
    await _until(lambda: _has_group(fleet, agent_type, hashed), hashed)
    await _until(lambda: _has_group(fleet, agent_type, "agent_engines"), "agent_engines")
    ours = fleet.start_our_worker("grp-two", [agent_type], handler=HANDLER, env=OURS_ENV)

    async def written() -> InstanceLease | None:
        lease = await _lease(fleet, "grp-two")
        return lease if lease.instance_id else None

    lease = await _until(written, "the instance lease")
    # From its first lease on, before it read a task.
    assert lease.consumer_groups == {agent_type: "agent_engines"}  # the first, sorted
    assert len(lease.group_warnings) == 1 and hashed in lease.group_warnings[0]
    await _online(fleet, "grp-two-r0")
    await asyncio.sleep(1.5)  # three beats: the warning is logged once, not at every beat
    warnings = [line for line in ours.log().splitlines() if "WARNING" in line and hashed in line]
    assert len(warnings) == 1 and "runs once per group" in warnings[0], warnings
    assert (await _lease(fleet, "grp-two")).group_warnings == lease.group_warnings
    assert sorted(await _groups(fleet, agent_type)) == sorted([hashed, "agent_engines"])
    snap = await FleetReader(fleet.redis, fleet.keys).read()
    row = next(t for t in snap.types if t.name == agent_type)
    assert row.groups == sorted([hashed, "agent_engines"])
    assert fleet.error_lines() == {}


@pytest.mark.parametrize("fleet", ["single"], indirect=True)
async def test_java_worker_runner_and_ours(fleet: Fleet) -> None:
    """Java SDK ``worker/WorkerRunner.java``: ``autoGroupName`` (sha1, 5 bytes),
    ``xgroupCreateIfNotExists`` at ``$`` MKSTREAM (``StandaloneRedisStreamOps``),
    ``fetchMessages``, ``processMessageAsync`` (simulated:
    ``tests/interop/foreign_consumer.py``)."""

    def start(worker_id: str, types: list[str]) -> LoggedProcess:
        return _start_sim(fleet, "java-runner", worker_id, types)

    await _mixed_fleet(fleet, "grp-java", lambda t: group_name("java-runner", [t]), start)
