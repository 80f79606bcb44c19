"""Pausing a type: real ``worker-runtime`` processes on a real redis-server.

Every worker of the type stops reading its stream (in-flight tasks finish), a worker
started while the type is paused does not read it either, and a resume restarts
consumption with every task run exactly once.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from functools import partial
from pathlib import Path

from redis.asyncio import Redis

from tests.handlers import DONE_LIST, STARTED_LIST, noop
from tests.integration.cli_helpers import assert_one_line_error, cli_env, run
from tests.integration.runtime_helpers import eventually, make_instance, spawn_worker, stop_process
from worker_runtime.admin import Confirmation, WorkerManager
from worker_runtime.audit import parse_audit
from worker_runtime.fleet import FleetReader
from worker_runtime.keys import CONSUMER_GROUP, Keys
from worker_runtime.models import AdminAction, Lease, now_ms
from worker_runtime.producer import Producer

K = Keys()


async def _started(redis: Redis) -> Counter[str]:
    return Counter(str(t) for t in await redis.lrange(STARTED_LIST, 0, -1))


async def _lease(redis: Redis, worker_id: str) -> Lease | None:
    raw = await redis.get(K.worker_online(worker_id))
    return None if raw is None else Lease.parse(raw)


async def _lag(redis: Redis, agent_type: str) -> int:
    groups = await redis.xinfo_groups(K.type_stream(agent_type))
    group = next(g for g in groups if g["name"] == CONSUMER_GROUP)
    return int(group["lag"] or 0)


async def test_pause_stops_every_worker_new_ones_too_and_resume_runs_each_task_once(
    redis: Redis, redis_url: str, tmp_path: Path
) -> None:
    procs = [
        spawn_worker(redis_url, "tests.handlers:record", ["chat", "mail"], name, log_path=log)
        for name, log in (("pa", tmp_path / "pa.log"), ("pb", tmp_path / "pb.log"))
    ]
    try:
        for name in ("pa-r0", "pb-r0"):
            await eventually(partial(redis.exists, K.worker_online(name)), timeout=20)
        producer = Producer(redis)
        long_ids = await producer.submit_many("chat", [{"sleep": 1.5}, {"sleep": 1.5}])
        await eventually(lambda: _started_all(redis, long_ids))

        manager = WorkerManager(redis, operator="oncall@test")
        result = await manager.pause_type("chat", reason="bad deploy")
        assert {r.worker_id for r in result.results} == {"pa-r0", "pb-r0"}
        assert all(r.confirmation is Confirmation.PAUSED_TYPES for r in result.results)
        assert result.denylisted == ()
        seen = await manager.wait_type_applied(result, timeout=10)
        assert sorted(seen) == ["pa-r0", "pb-r0"] and None not in seen.values(), seen

        # Submitted while paused: stays undelivered; the running tasks still finish.
        paused_ids = await producer.submit_many("chat", [{"n": i} for i in range(5)])
        mail_id = await producer.submit("mail", {"n": 1})
        await eventually(lambda: _done_all(redis, [*long_ids, mail_id]), timeout=15)

        # A worker started while the type is paused does not read it either.
        late = spawn_worker(
            redis_url, "tests.handlers:record", ["chat"], "pc", log_path=tmp_path / "pc.log"
        )
        procs.append(late)
        await eventually(lambda: redis.exists(K.worker_online("pc-r0")), timeout=20)
        lease = await _lease(redis, "pc-r0")
        assert lease is not None and lease.paused_types == ["chat"]
        await asyncio.sleep(1.5)  # five heartbeats, several blocking reads
        started = await _started(redis)
        assert not set(paused_ids) & set(started), started
        assert await _lag(redis, "chat") == 5

        resumed = await manager.resume_type("chat", reason="fixed")
        assert {r.worker_id for r in resumed.results} == {"pa-r0", "pb-r0", "pc-r0"}
        seen = await manager.wait_type_applied(resumed, timeout=10)
        assert sorted(seen) == ["pa-r0", "pb-r0", "pc-r0"] and None not in seen.values(), seen
        await eventually(lambda: _done_all(redis, paused_ids), timeout=15)
        started = await _started(redis)
        assert all(started[t] == 1 for t in [*long_ids, *paused_ids, mail_id]), started
        assert await manager.get_type_pauses() == {}

        events = parse_audit(await redis.xrevrange(K.audit_stream, "+", "-", 10))
        kinds = [(e.action, e.target, e.reason, e.operator) for e in events]
        assert (AdminAction.PAUSE_TYPE.value, "chat", "bad deploy", "oncall@test") in kinds
        assert (AdminAction.RESUME_TYPE.value, "chat", "fixed", "oncall@test") in kinds
        assert all(e.redis_user == "default" for e in events)
    finally:
        for proc in procs:
            stop_process(proc)


async def test_a_pause_pulled_at_the_heartbeat_alone_is_applied(
    redis: Redis, redis_url: str, tmp_path: Path
) -> None:
    # The push is lost (the fleet stream trimmed, an old console): the pause hash that
    # every heartbeat reads is the truth, and the worker converges to it.
    proc = spawn_worker(redis_url, "tests.handlers:record", ["chat"], "pd")
    try:
        await eventually(lambda: redis.exists(K.worker_online("pd-r0")), timeout=20)
        await redis.hset(K.type_pauses, "chat", '{"by": "ops", "reason": "by hand"}')

        async def paused() -> bool:
            lease = await _lease(redis, "pd-r0")
            return lease is not None and lease.paused_types == ["chat"]

        await eventually(paused, timeout=5)
        await redis.hdel(K.type_pauses, "chat")

        async def resumed() -> bool:
            lease = await _lease(redis, "pd-r0")
            return lease is not None and not lease.paused_types

        await eventually(resumed, timeout=5)
    finally:
        stop_process(proc)


async def _by_framework_worker(redis: Redis, worker_id: str, agent_type: str) -> None:
    """A worker registered the way by-framework registers one (its presence payload)."""
    await redis.sadd(K.workers, worker_id)
    await redis.sadd(K.worker_agent_types(worker_id), agent_type)
    await redis.sadd(K.type_workers(agent_type), worker_id)
    await redis.sadd(K.agent_types, agent_type)
    lease = {"version": 1, "token": "t", "last_seen": now_ms(), "ip_address": "10.0.0.9"}
    await redis.set(K.worker_online(worker_id), json.dumps(lease), ex=600)


async def _started_all(redis: Redis, ids: list[str]) -> bool:
    started = await _started(redis)
    return all(t in started for t in ids)


async def _done_all(redis: Redis, ids: list[str]) -> bool:
    done = {str(t) for t in await redis.lrange(DONE_LIST, 0, -1)}
    return all(t in done for t in ids)


async def test_cli_pause_and_resume_wait_for_every_worker_and_name_the_denylisted(
    redis: Redis, redis_url: str, tmp_path: Path
) -> None:
    proc = spawn_worker(redis_url, "tests.handlers:record", ["chat"], "pe")
    env = cli_env(redis_url, tmp_path)
    try:
        await eventually(lambda: redis.exists(K.worker_online("pe-r0")), timeout=20)
        # A by-framework-shaped lease (its presence payload) and an operator's own deny.
        await _by_framework_worker(redis, "bf-1", "chat")
        await _by_framework_worker(redis, "bf-2", "chat")
        await redis.sadd(K.type_denied("chat"), "bf-2")

        paused = await asyncio.to_thread(
            run, ["type", "pause", "chat", "--reason", "bad deploy", "--wait", "--json"], env
        )
        # --wait exits 3: bf-1 cannot confirm (denylisted); our worker confirmed.
        assert paused.code == 3, (paused.out, paused.err)
        doc = paused.json()
        assert (doc["state"], doc["confirmed"], doc["pending"]) == ("applied", ["pe-r0"], [])
        assert (doc["denylisted"], doc["kept_denied"]) == (["bf-1"], ["bf-2"])
        assert sorted(doc["unconfirmable"]) == ["bf-1", "bf-2"]
        assert "denylist" in doc["note"]
        assert await redis.smembers(K.type_denied("chat")) == {"bf-1", "bf-2"}
        assert not await redis.sismember(K.type_workers("chat"), "bf-1")

        text = await asyncio.to_thread(run, ["type", "pause", "chat", "--reason", "again"], env)
        assert text.code == 0, text.err
        assert "by-framework cannot apply a pause" in text.out
        assert "already denied by hand, left as is: bf-2" in text.out

        resumed = await asyncio.to_thread(run, ["type", "resume", "chat", "--wait", "--json"], env)
        assert resumed.code == 3, resumed.err
        doc = resumed.json()
        assert (doc["state"], doc["confirmed"], doc["denylisted"]) == (
            "applied",
            ["pe-r0"],
            ["bf-1"],
        )
        # Exactly what the pause added is lifted; the operator's own deny stays.
        assert await redis.smembers(K.type_denied("chat")) == {"bf-2"}
        lease = await _lease(redis, "pe-r0")
        assert lease is not None and not lease.paused_types

        unknown = await asyncio.to_thread(run, ["type", "pause", "nope"], env)
        assert_one_line_error(unknown, 1)
        assert "unknown agent type: nope" in unknown.err
    finally:
        stop_process(proc)


async def test_a_hand_deny_during_a_pause_survives_the_resume(redis: Redis) -> None:
    await _by_framework_worker(redis, "bf-3", "chat")
    manager = WorkerManager(redis, operator="ops@test")
    result = await manager.pause_type("chat", "incident")
    assert result.denylisted == ("bf-3",)
    # The operator denies it by hand meanwhile: from now on it is the operator's deny.
    await manager.deny_worker_for_type("chat", "bf-3", "keep it off chat")
    resumed = await manager.resume_type("chat")
    assert resumed.denylisted == ()
    assert await manager.get_type_denylist("chat") == ["bf-3"]


async def test_the_fleet_read_shows_who_paused_a_type_and_how_many_workers_report_it(
    redis: Redis, redis_url: str
) -> None:
    instance = make_instance(redis_url, noop, ["chat", "mail"], "pf", replicas=2)
    await instance.start()
    try:
        await _by_framework_worker(redis, "bf-4", "chat")
        reader = FleetReader(redis, K)
        before = await reader.read()
        trips = before.redis.round_trips
        chat = before.type("chat")
        assert chat is not None and not chat.paused and chat.pause_applied == 0

        manager = WorkerManager(redis, operator="oncall@host-1")
        result = await manager.pause_type("chat", "bad deploy")
        await manager.wait_type_applied(result, timeout=5)
        after = await reader.read()
        assert after.redis.round_trips == trips  # one more command, no more round trips
        chat, mail = after.type("chat"), after.type("mail")
        assert chat is not None and mail is not None
        assert (chat.paused, chat.paused_by, chat.paused_reason) == (
            True,
            "oncall@host-1",
            "bad deploy",
        )
        assert chat.paused_at is not None and chat.paused_at > 0
        assert (chat.pause_workers, chat.pause_applied, chat.pause_denylisted) == (2, 2, ["bf-4"])
        assert not mail.paused and mail.pause_applied == 0
        worker = after.worker("pf-r0")
        assert worker is not None and worker.paused_types == ["chat"]

        await manager.wait_type_applied(await manager.resume_type("chat"), timeout=5)
        chat = (await reader.read()).type("chat")
        assert chat is not None and not chat.paused and chat.pause_applied == 0
    finally:
        await instance.stop()


async def test_the_leaders_janitor_denylists_a_by_framework_worker_started_while_paused(
    redis: Redis, redis_url: str
) -> None:
    instance = make_instance(redis_url, noop, ["mail"], "pj", janitor_interval=0.2)
    await instance.start()
    try:
        manager = WorkerManager(redis, operator="ops@test")
        await manager.pause_type("chat", "incident")
        await _by_framework_worker(redis, "bf-late", "chat")  # starts during the pause

        async def denied() -> bool:
            return bool(await redis.sismember(K.type_denied("chat"), "bf-late"))

        await eventually(denied, timeout=10)
        pause = (await manager.get_type_pauses())["chat"]
        assert pause.denied == ["bf-late"] and pause.by == "ops@test"
        assert not await redis.sismember(K.type_workers("chat"), "bf-late")
        events = parse_audit(await redis.xrevrange(K.audit_stream, "+", "-", 5))
        assert any(
            e.operator == "janitor@pj" and "bf-late" in e.details and e.target == "chat"
            for e in events
        ), events

        resumed = await manager.resume_type("chat")
        assert resumed.denylisted == ("bf-late",)
        await asyncio.sleep(0.6)  # sweeps after the resume put nothing back
        assert await manager.get_type_denylist("chat") == []
    finally:
        await instance.stop()


async def test_holding_a_pause_after_its_resume_changes_nothing(redis: Redis) -> None:
    manager = WorkerManager(redis, operator="ops@test")
    await manager.pause_type("chat")
    await manager.resume_type("chat")
    await _by_framework_worker(redis, "bf-6", "chat")
    assert await manager.hold_type_pause("chat") == []
    assert await manager.get_type_denylist("chat") == []
