"""Headless paths, interleaved: cold start vs ``rq info``, table vs JSON, read vs floor.

    .venv/bin/python -m bench.headless_scale [--sizes 1000,10000] [--repeats 5] [--json PATH]
        [--baseline SRC]

Every comparison runs A B A B … (``bench.common``: ``--repeats`` recorded rounds
after one warm-up, median and min per side, load average before and after), on one
private ``redis-server``:

* cold start: ``byconsole --snapshot --format json`` vs ``rq info`` on an empty Redis
  (each a fresh process: interpreter, imports, one connection, an empty listing);
* per fleet size N (the runtime's own heartbeat writes it, ``bench.common``):
  ``byconsole --snapshot --format table`` vs ``--format json`` (fresh processes);
* per N, in process: ``FleetReader.read()`` (read + build of the snapshot) vs the
  floor: a bare pipelined read of the same keys (every lease, admin hash and declared
  type set; every type's sets, stream lengths and group info) with each lease decoded
  from JSON into a dict, and nothing else;
* per N, end to end: ``byconsole --snapshot --format json`` vs ``rq info`` listing N
  rq workers registered in the same Redis (``bench.fleet_listing``: rq's own
  ``register_birth``, three queues, one job each; ours gets one task per type);
* with ``--baseline SRC``, the cold start and end-to-end runs also time ``byconsole``
  from another checkout (e.g. ``git worktree add /tmp/base main``), interleaved.

Subprocess figures carry CPU time (user + system) next to wall time: on a shared
machine it moves less with other people's load.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import sys
import time
from typing import Any

from redis.asyncio import Redis

from bench.common import (
    BIN,
    TYPES,
    ainterleave,
    interleave,
    machine,
    populate,
    ratio_line,
    redis_client,
    run_timed,
    start_redis,
    stats,
    versions,
    worker_env,
    write_results,
)
from bench.fleet_listing import listed_rq, register_rq_workers
from worker_runtime.fleet import FleetReader
from worker_runtime.keys import Keys
from worker_runtime.producer import Producer

KEYS = Keys()


def _cli(
    args: list[str],
    url: str,
    check: Any = None,
    cpu: list[float] | None = None,
    source: str | None = None,
) -> float:
    """Run one CLI: its wall seconds (its CPU seconds appended to ``cpu``).

    ``source``: a checkout whose packages the command imports instead (``PYTHONPATH``).
    """
    env = worker_env(url, **({"PYTHONPATH": source} if source else {}))
    done = run_timed(args, env=env)
    if done.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(args[:3])} failed: {done.stderr.strip()[-300:]}")
    if check is not None:
        check(done.stdout)
    if cpu is not None:
        cpu.append(done.cpu_seconds)
    return done.seconds


Side = tuple[list[str], Any, str | None]
"""A CLI to time: its arguments, the check of its output, the checkout it runs from."""


def cli_pair(sides: dict[str, Side], url: str, repeats: int) -> dict[str, Any]:
    """CLIs interleaved: wall figures per side, and their CPU under ``cpu``.

    CPU samples of the warm-up round are dropped as its wall samples are.
    """
    cpu: dict[str, list[float]] = {name: [] for name in sides}
    result = interleave(
        {
            name: functools.partial(_cli, args, url, check, cpu[name], source)
            for name, (args, check, source) in sides.items()
        },
        repeats,
    )
    result["cpu"] = {name: stats(samples[-repeats:]) for name, samples in cpu.items()}
    return result


def cpu_line(result: dict[str, Any], a: str, b: str) -> str:
    """``CPU a … vs b …: ratio`` (medians and mins, milliseconds)."""
    ca, cb = result["cpu"][a], result["cpu"][b]
    return (
        f"CPU {a} {ca['median'] * 1000:.0f} ms (min {ca['min'] * 1000:.0f}) vs {b} "
        f"{cb['median'] * 1000:.0f} ms (min {cb['min'] * 1000:.0f}): "
        f"{ca['median'] / cb['median']:.2f}x median, {ca['min'] / cb['min']:.2f}x min"
    )


def expect_rq(n: int) -> Any:
    def check(stdout: str) -> None:
        if listed_rq(stdout) != n:
            raise SystemExit(f"rq info listed {listed_rq(stdout)} of {n} workers")

    return check


def baseline(url: str) -> list[str]:
    """``byconsole --snapshot --format json`` as the console script of a checkout given
    with ``--baseline`` runs it: through ``byconsole.launch`` where it has one, else as
    the script ran before it had ``run()`` (``sys.exit(main())``)."""
    code = (
        "import sys\n"
        "try:\n from byconsole.launch import run\n"
        "except ImportError:\n from byconsole.cli import main\n run = lambda: sys.exit(main())\n"
        "run()"
    )
    # -P: no current directory first on the path, or run from a checkout the command
    # would import that checkout, not the one PYTHONPATH names.
    return [sys.executable, "-P", "-c", code, "--snapshot", "--format", "json", "--redis-url", url]


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
        sides: dict[str, Side] = {
            "byconsole_json": (byconsole(url, "json"), expect_json(0), None),
            "rq_info": (rq_info(url), expect_rq(0), None),
        }
        if args.baseline:
            sides["baseline_json"] = (baseline(url), expect_json(0), args.baseline)
        cold = cli_pair(sides, url, args.repeats)
        results["cold_start"] = cold
        print("cold start, empty Redis:", ratio_line(cold, "byconsole_json", "rq_info"))
        print("cold start, empty Redis:", cpu_line(cold, "byconsole_json", "rq_info"))
        if args.baseline:
            print("cold start, empty Redis:", ratio_line(cold, "byconsole_json", "baseline_json"))
            print("cold start, empty Redis:", cpu_line(cold, "byconsole_json", "baseline_json"))
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
            # rq's fleet beside ours (its own keys), then both listings end to end.
            producer = Producer(redis)
            for t in TYPES:
                await producer.submit(t, {})
            await asyncio.to_thread(register_rq_workers, url, n)
            sides = {
                "byconsole_json": (byconsole(url, "json"), expect_json(n), None),
                "rq_info": (rq_info(url), expect_rq(n), None),
            }
            if args.baseline:
                sides["baseline_json"] = (baseline(url), expect_json(n), args.baseline)
            e2e = row["e2e_vs_rq"] = cli_pair(sides, url, args.repeats)
            for other in ("rq_info", "baseline_json") if args.baseline else ("rq_info",):
                print(f"{n:>7,} workers:", ratio_line(e2e, "byconsole_json", other))
                print(f"{n:>7,} workers:", cpu_line(e2e, "byconsole_json", other))
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
    parser.add_argument(
        "--baseline",
        metavar="SRC",
        help="also time byconsole from this checkout (before/after a change), interleaved",
    )
    args = parser.parse_args()
    print(f"machine: {machine()}")
    results = asyncio.run(measure(args))
    write_results(args.json, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
