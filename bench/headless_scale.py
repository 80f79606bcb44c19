"""Headless paths, interleaved: cold start vs ``rq info``, table vs JSON, read vs floor.

    .venv/bin/python -m bench.headless_scale [--sizes 1000,10000] [--repeats 5] [--json PATH]

Every comparison runs A B A B … (``bench.interleave``: ``--repeats`` recorded rounds
after one warm-up, median and min per side, load average before and after), on one
private ``redis-server``:

* cold start: ``byconsole --snapshot --format json`` vs ``rq info`` on an empty Redis
  (each a fresh process: interpreter, imports, one connection, an empty listing);
* per fleet size N (the runtime's own heartbeat writes it, ``bench.fleet_sim``):
  ``byconsole --snapshot --format table`` vs ``--format json`` (fresh processes);
* per N, in process: ``FleetReader.read()`` (read + build of the snapshot) vs the
  floor: a bare pipelined read of the same keys (every lease, admin hash and declared
  type set; every type's sets, stream lengths and group info) with each lease decoded
  from JSON into a dict, and nothing else.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from typing import Any

from redis.asyncio import Redis

from bench.common import (
    BIN,
    machine,
    redis_client,
    run_timed,
    start_redis,
    versions,
    worker_env,
    write_results,
)
from bench.fleet_sim import populate
from bench.interleave import ainterleave, interleave, ratio_line
from worker_runtime.fleet import FleetReader
from worker_runtime.keys import Keys

KEYS = Keys()


def _cli(args: list[str], url: str, check: Any = None) -> float:
    done = run_timed(args, env=worker_env(url))
    if done.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(args[:3])} failed: {done.stderr.strip()[-300:]}")
    if check is not None:
        check(done.stdout)
    return done.seconds


def byconsole(url: str, fmt: str) -> list[str]:
    """``byconsole --snapshot --format FMT``."""
    return [str(BIN / "byconsole"), "--snapshot", "--format", fmt, "--redis-url", url]


def rq_info(url: str) -> list[str]:
    """``rq info`` (rq's own CLI)."""
    return [str(BIN / "rq"), "info", "--url", url]


async def floor_read(redis: Redis) -> int:
    """The bare read: the same keys in the same round trips, leases decoded, no models."""
    k = KEYS
    pipe = redis.pipeline(transaction=False)
    pipe.smembers(k.workers)
    pipe.smembers(k.agent_types)
    pipe.zrange(k.instances, 0, -1, withscores=True)
    pipe.get(k.leader_lock)
    pipe.hgetall(k.scale_targets)
    first = await pipe.execute()
    ids = sorted(first[0])
    types = sorted(first[1])
    pipe = redis.pipeline(transaction=False)
    pipe.mget([k.worker_online(w) for w in ids])
    for w in ids:
        pipe.hgetall(k.worker_admin(w))
        pipe.smembers(k.worker_agent_types(w))
    for t in types:
        pipe.smembers(k.type_workers(t))
        pipe.smembers(k.type_denied(t))
        pipe.xinfo_groups(k.type_stream(t))
        pipe.xlen(k.type_stream(t))
        pipe.xlen(k.dead_letter_stream(t))
    replies = await pipe.execute(raise_on_error=False)
    leases = [json.loads(raw) if raw else None for raw in replies[0]]
    return len(leases)


async def in_process(url: str, n: int, repeats: int) -> dict[str, Any]:
    """FleetReader.read() vs the floor, interleaved on one client."""
    redis = redis_client(url)
    reader = FleetReader(redis, KEYS)

    async def read() -> float:
        started = time.perf_counter()
        snap = await reader.read()
        elapsed = (time.perf_counter() - started) * 1000
        assert len(snap.workers) == n
        return elapsed

    async def floor() -> float:
        started = time.perf_counter()
        count = await floor_read(redis)
        elapsed = (time.perf_counter() - started) * 1000
        assert count == n
        return elapsed

    try:
        return await ainterleave({"read_build": read, "floor": floor}, repeats)
    finally:
        await redis.aclose()


def expect_json(n: int) -> Any:
    def check(stdout: str) -> None:
        if len(json.loads(stdout)["workers"]) != n:
            raise SystemExit("byconsole --snapshot did not list every worker")

    return check


async def measure(args: argparse.Namespace) -> dict[str, Any]:
    """Every figure of this benchmark."""
    server = start_redis()
    url = server.url
    redis = redis_client(url)
    results: dict[str, Any] = {
        "machine": machine(),
        "versions": versions("redis", "hiredis", "pydantic", "rich", "rq"),
        "repeats": args.repeats,
        "sizes": {},
    }
    try:
        await redis.flushall()
        cold = interleave(
            {
                "byconsole_json": lambda: _cli(byconsole(url, "json"), url, expect_json(0)),
                "rq_info": lambda: _cli(rq_info(url), url),
            },
            args.repeats,
        )
        results["cold_start"] = cold
        print("cold start, empty Redis:", ratio_line(cold, "byconsole_json", "rq_info"))
        for n in [int(s) for s in args.sizes.split(",")]:
            await redis.flushall()
            await populate(redis, n)
            row: dict[str, Any] = {}
            row["table_vs_json"] = interleave(
                {
                    "table": lambda: _cli(byconsole(url, "table"), url),
                    "json": lambda: _cli(byconsole(url, "json"), url, expect_json(n)),  # noqa: B023
                },
                args.repeats,
            )
            print(f"{n:>7,} workers:", ratio_line(row["table_vs_json"], "table", "json"))
            row["read_vs_floor"] = await in_process(url, n, args.repeats)
            print(
                f"{n:>7,} workers:",
                ratio_line(row["read_vs_floor"], "read_build", "floor", "ms"),
            )
            results["sizes"][str(n)] = row
    finally:
        await redis.aclose()
        server.cleanup()
    return results


def main() -> int:
    """Parse flags, run, print, write JSON."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args()
    print(f"machine: {machine()}")
    results = asyncio.run(measure(args))
    write_results(args.json, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
