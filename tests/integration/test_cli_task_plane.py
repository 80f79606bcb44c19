"""The task plane in ``byconsole --snapshot`` (table, json, prom), its checks and ``type list``.

The real ``byconsole`` executable against a real Redis (single and cluster through
``backend``), and a real worker process holding a task for the pending entry's case.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families
from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster

from tests.backends import Backend
from tests.integration.cli_helpers import K, add_worker, cli_env, run
from tests.integration.runtime_helpers import eventually, spawn_worker, stop_process
from worker_runtime.fleet import FleetReader
from worker_runtime.producer import Producer


async def _orphan(redis: Redis | RedisCluster, stream: str, n: int, age_ms: int) -> None:
    """``n`` tasks nobody registered, the first ``age_ms`` old (Redis's clock)."""
    sec, usec = await redis.time()
    start = sec * 1000 + usec // 1000 - age_ms
    pipe = redis.pipeline(transaction=False)
    for i in range(n):
        pipe.xadd(stream, {"n": str(i)}, id=f"{start + i}-0")
    await pipe.execute()


def _prom(text: str) -> dict[str, dict[str, float]]:
    """Metric name -> type label -> value."""
    out: dict[str, dict[str, float]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out.setdefault(sample.name, {})[sample.labels.get("type", "")] = sample.value
    return out


async def test_an_orphan_backlog_shows_everywhere_and_fails_max_depth(
    backend: Backend, tmp_path: Path
) -> None:
    redis, k = backend.redis, backend.keys
    env = cli_env(backend.url, tmp_path, **backend.env)
    await add_worker(redis, "w1", ["chat"])
    await _orphan(redis, k.type_stream("orphan"), 50, age_ms=120_000)

    depth = await asyncio.to_thread(run, ["--snapshot", "--max-depth", "10"], env)
    assert depth.code == 1, depth.err
    assert "check failed: max-depth: type orphan depth 50 > 10" in depth.err
    assert "orphan (unregistered)" in depth.out  # the table

    doc = (await asyncio.to_thread(run, ["--snapshot", "--format", "json"], env)).json()
    orphan = next(t for t in doc["types"] if t["name"] == "orphan")
    assert (orphan["registered"], orphan["depth"], orphan["groups"]) == (False, 50, [])
    assert 120_000 <= orphan["oldest_undelivered_ms"] < 240_000
    assert orphan["oldest_pending_ms"] is None and orphan["max_deliveries"] is None
    assert orphan["consumers"] == {}

    prom = _prom((await asyncio.to_thread(run, ["--snapshot", "--format", "prom"], env)).out)
    assert prom["byconsole_type_depth"]["orphan"] == 50
    assert prom["byconsole_type_oldest_undelivered_age_seconds"]["orphan"] >= 120
    assert prom["byconsole_type_oldest_pending_seconds"]["orphan"] == 0
    assert prom["byconsole_type_max_deliveries"]["orphan"] == 0
    assert prom["byconsole_type_consumer_groups"]["orphan"] == 0
    assert prom["byconsole_type_registered"] == {"orphan": 0, "chat": 1}

    listed = await asyncio.to_thread(run, ["type", "list"], env)
    assert listed.code == 0 and "orphan (unregistered)" in listed.out and "chat" in listed.out
    as_json = (await asyncio.to_thread(run, ["type", "list", "--json"], env)).json()
    assert {t["name"]: t["registered"] for t in as_json} == {"chat": True, "orphan": False}

    online = await asyncio.to_thread(run, ["--snapshot", "--min-online", "orphan=1"], env)
    assert online.code == 1
    assert "min-online orphan: 0 worker(s) online, need 1" in online.err

    scoped = await asyncio.to_thread(
        run, ["--snapshot", "--type", "orphan", "--max-depth", "100"], env
    )
    assert scoped.code == 0, scoped.err
    assert "orphan (unregistered)" in scoped.out


async def test_max_age_fails_on_an_old_entry(backend: Backend, tmp_path: Path) -> None:
    redis, k = backend.redis, backend.keys
    env = cli_env(backend.url, tmp_path, **backend.env)
    await _orphan(redis, k.type_stream("late"), 3, age_ms=300_000)
    old = await asyncio.to_thread(run, ["--snapshot", "--max-age", "60"], env)
    assert old.code == 1
    assert "check failed: max-age: type late oldest undelivered" in old.err
    assert "> 60s" in old.err
    fine = await asyncio.to_thread(run, ["--snapshot", "--max-age", "3600"], env)
    assert fine.code == 0, fine.err
    bad = await asyncio.to_thread(run, ["--snapshot", "--max-age", "soon"], env)
    assert bad.code == 2 and "Traceback" not in bad.err
    alone = await asyncio.to_thread(run, ["--max-age", "60"], env)
    assert alone.code == 2 and "--max-age needs --snapshot" in alone.err


async def test_a_task_held_by_a_real_worker_shows_its_idle_time(
    redis: Redis, redis_url: str, tmp_path: Path
) -> None:
    env = cli_env(redis_url, tmp_path)
    proc = spawn_worker(redis_url, "tests.handlers:record", ["slow"], "held")
    try:
        await Producer(redis).submit("slow", {"sleep": 60})

        async def held() -> bool:
            types = (await FleetReader(redis, K).read()).types
            return any(t.pending == 1 and (t.oldest_pending_ms or 0) >= 1_500 for t in types)

        await eventually(held, timeout=20)
        doc = (await asyncio.to_thread(run, ["--snapshot", "--format", "json"], env)).json()
        slow = next(t for t in doc["types"] if t["name"] == "slow")
        assert slow["registered"] and slow["pending"] == 1 and slow["max_deliveries"] == 1
        assert list(slow["consumers"].values()) == [1]
        assert next(iter(slow["consumers"])).startswith("held")  # the worker's consumer name
        assert slow["oldest_undelivered_ms"] is None and slow["oldest_pending_ms"] >= 1_500
        age = await asyncio.to_thread(run, ["--snapshot", "--max-age", "1"], env)
        assert age.code == 1 and "max-age: type slow oldest pending" in age.err
    finally:
        stop_process(proc)
