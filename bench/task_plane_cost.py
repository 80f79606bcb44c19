"""What the task plane costs the fleet read: this tree vs a baseline tree, interleaved.

    .venv/bin/python -m bench.task_plane_cost [--workers 10000] [--types 1000]
        [--baseline REV] [--rounds 5] [--reads 5] [--json PATH]

One redis-server holds a fleet written by the runtime's own heartbeat
(``bench.fleet_sim``: ``--workers`` workers) plus ``--types`` more agent types in the
types index, each with a task stream of a few entries, a consumer group, two delivered
and unacknowledged entries (the queue-health script's ``XPENDING`` has work), and one
in ten with no group at all (a backlog nobody serves). The same Redis serves both sides:

* ``task_plane``: this checkout's ``FleetReader.read()`` (queue health per type, types
  found from their streams);
* ``baseline``: the same read from ``--baseline REV``'s tree (default: the commit before
  the task plane), extracted with ``git archive`` into a temporary directory.

Each side runs in a fresh process per round with ``PYTHONPATH`` set to its tree (A B,
then B A, … after one unrecorded round), does one unrecorded read (its first, which in
this tree also waits for the stream discovery) then ``--reads`` reads, and reports their
median wall time. Printed: per side median and min of those medians, the ratio, the
round trips of a read, and what one discovery (the background ``SCAN``, at most once a
minute) takes on this keyspace.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
ROOT = HERE.parents[1]
BASELINE = "0ce0266"
"""The commit before the task plane: the TypeView fields exist, nothing fills them."""

EXTRA_ENTRIES = 5
"""Entries per extra type stream; two of them are delivered and left pending."""


async def child(url: str, reads: int) -> dict[str, Any]:
    """One side: warm read, then ``reads`` timed reads (runs in the tree on PYTHONPATH)."""
    import worker_runtime
    from worker_runtime.connection import create_redis
    from worker_runtime.fleet import FleetReader
    from worker_runtime.keys import Keys
    from worker_runtime.settings import RedisSettings

    redis = create_redis(RedisSettings(url=url))
    reader = FleetReader(redis, Keys())
    first = time.perf_counter()
    snap = await reader.read()
    first_s = time.perf_counter() - first
    samples = []
    before = await redis.info("commandstats")
    for _ in range(reads):
        started = time.perf_counter()
        snap = await reader.read()
        samples.append(time.perf_counter() - started)
    after = await redis.info("commandstats")
    out: dict[str, Any] = {
        "module": worker_runtime.__file__,
        "median_s": statistics.median(samples),
        "samples": samples,
        "first_s": first_s,
        "round_trips": reader.round_trips,
        "workers": len(snap.workers),
        "types": len(snap.types),
        # Redis's own time serving the reads (every command's usec in INFO commandstats).
        "redis_ms_per_read": _usec(after, before) / 1000 / reads,
    }
    discover = getattr(reader, "discover", None)
    if discover is not None:
        started = time.perf_counter()
        await discover()
        out["discovery_s"] = time.perf_counter() - started
        out["discovery_round_trips"] = reader.discovery_round_trips
    await redis.aclose()
    return out


def _usec(after: dict[str, Any], before: dict[str, Any]) -> float:
    """Microseconds Redis spent in commands between two ``INFO commandstats``."""
    total = 0.0
    for name, stats in after.items():
        if isinstance(stats, dict) and name != "cmdstat_info":
            total += stats.get("usec", 0) - (before.get(name) or {}).get("usec", 0)
    return total


async def write_types(url: str, n: int) -> None:
    """``n`` extra types: index entry, a short stream, a group with two pending entries."""
    from bench.common import redis_client
    from worker_runtime.keys import CONSUMER_GROUP, Keys

    keys = Keys()
    redis = redis_client(url)
    names = [f"bench-type-{i:04d}" for i in range(n)]
    pipe = redis.pipeline(transaction=False)
    for i, name in enumerate(names):
        stream = keys.type_stream(name)
        for e in range(EXTRA_ENTRIES):
            pipe.xadd(stream, {"task": f"{name}-{e}"})
        if i % 10:
            pipe.xgroup_create(stream, CONSUMER_GROUP, id="0")
            pipe.xreadgroup(CONSUMER_GROUP, f"{name}-r0", {stream: ">"}, count=2)
            pipe.sadd(keys.agent_types, name)
    await pipe.execute()
    await redis.aclose()


def baseline_tree(rev: str, into: Path) -> Path:
    """``rev``'s ``worker_runtime`` package, extracted under ``into``."""
    archive = into / "tree.tar"
    subprocess.run(
        ["git", "-C", str(ROOT), "archive", "-o", str(archive), rev, "worker_runtime"],
        check=True,
    )
    with tarfile.open(archive) as tar:
        tar.extractall(into, filter="data")
    return into


def main() -> int:
    """Parse flags, write the fleet, run the sides interleaved, print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=10_000)
    parser.add_argument("--types", type=int, default=1_000)
    parser.add_argument("--baseline", default=BASELINE, help="the revision to compare with")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--reads", type=int, default=5)
    parser.add_argument("--json", help="write the figures here")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(asyncio.run(child(args.child, args.reads))))
        return 0

    from bench.common import start_redis
    from bench.fleet_sim import populate
    from bench.interleave import interleave, ratio_line

    server = start_redis()
    results: dict[str, dict[str, Any]] = {}
    try:
        url = server.url

        async def setup() -> None:
            from bench.common import redis_client

            redis = redis_client(url)
            await populate(redis, args.workers)
            await redis.aclose()
            await write_types(url, args.types)

        asyncio.run(setup())
        with tempfile.TemporaryDirectory(prefix="task-plane-base-") as tmp:
            trees = {"task_plane": ROOT, "baseline": baseline_tree(args.baseline, Path(tmp))}

            def side(name: str, tree: Path) -> Any:
                def run() -> float:
                    env = {**os.environ, "PYTHONPATH": str(tree)}
                    cmd = [sys.executable, str(HERE), "--child", url, "--reads", str(args.reads)]
                    done = subprocess.run(cmd, env=env, cwd=tree, capture_output=True, text=True)
                    if done.returncode != 0:
                        raise SystemExit(f"{name}: {done.stderr.strip().splitlines()[-3:]}")
                    figures = json.loads(done.stdout.strip().splitlines()[-1])
                    if not figures["module"].startswith(str(tree)):
                        raise SystemExit(f"{name} imported {figures['module']}, not {tree}")
                    results.setdefault(name, figures)
                    median: float = figures["median_s"]
                    return median

                return run

            result = interleave({n: side(n, t) for n, t in trees.items()}, repeats=args.rounds)
    finally:
        server.stop()
    ours, base = results["task_plane"], results["baseline"]
    print(
        f"fleet: {ours['workers']:,} workers, {ours['types']:,} types "
        f"(baseline sees {base['types']:,}); {args.reads} reads per process, "
        f"{args.rounds} rounds interleaved; baseline = {args.baseline}"
    )
    print("read:", ratio_line(result, "task_plane", "baseline"))
    print(f"round trips per read: task_plane {ours['round_trips']}, baseline {base['round_trips']}")
    print(
        f"Redis time per read (commandstats, first process of each side): task_plane "
        f"{ours['redis_ms_per_read']:.1f} ms, baseline {base['redis_ms_per_read']:.1f} ms"
    )
    if "discovery_s" in ours:
        print(
            f"one discovery (background, at most every 60 s): {ours['discovery_s'] * 1000:.0f} ms "
            f"in {ours['discovery_round_trips']} SCAN round trips; first read (waits for it) "
            f"{ours['first_s']:.3f} s"
        )
    if args.json:
        Path(args.json).write_text(json.dumps({"result": result, "sides": results}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
