"""Heartbeat load: Redis commands/s and CPU for a fleet of 10,000 replicas in 100 instances.

    .venv/bin/python -m bench.heartbeat_load [--replicas 10000] [--instances 100]
        [--interval 5] [--window 20] [--processes 2] [--json PATH]

Each simulated instance runs the runtime's own ``worker_runtime.heartbeat.beat`` (one
pipelined round trip per beat for all its replicas: leases, status keys, routing
sets, registry, instance lease, then the admin hashes and denylists it reads) every
``--interval`` seconds, with a random phase, as a live instance does. The instances
are spread over ``--processes`` client processes (the simulation's own CPU is not
Redis's). After one interval of warm-up, Redis is sampled over ``--window`` seconds:
commands/s (``INFO commandstats``), CPU (``INFO cpu``, user + sys), memory; the
children report beats done and each beat's round-trip time.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import resource
import signal
import subprocess
import sys
import time
from typing import Any

from bench.common import (
    ROOT,
    calls_delta,
    machine,
    make_fleet,
    percentile,
    private_redis,
    redis_client,
    server_counters,
    sim_settings,
    stop_processes,
    versions,
    write_fleet,
    write_results,
)


async def child(url: str, first: int, count: int, per: int, start_at: float, args: Any) -> None:
    """Beat instances ``first .. first+count-1`` from ``start_at`` (wall clock) on."""
    redis = redis_client(url)
    settings = sim_settings(args.interval)
    instances = make_fleet(redis, count * per, per, settings=settings, prefix=f"hb{first}")
    window_start = start_at + args.interval
    window_end = window_start + args.window
    latencies: list[float] = []
    beats = 0

    async def run(inst: Any) -> None:
        nonlocal beats
        await asyncio.sleep(max(0.0, start_at - time.time()) + random.uniform(0, args.interval))
        while time.time() < window_end:
            t0 = time.time()
            started = time.perf_counter()
            await inst.beat()
            took = (time.perf_counter() - started) * 1000
            if window_start <= t0 < window_end:
                beats += 1
                latencies.append(took)
            await asyncio.sleep(max(0.0, args.interval - (time.time() - t0)))

    try:
        await write_fleet(redis, instances[:1])  # the type streams exist before the beats
        cpu0 = resource.getrusage(resource.RUSAGE_SELF)
        await asyncio.gather(*(run(inst) for inst in instances))
        cpu1 = resource.getrusage(resource.RUSAGE_SELF)
    finally:
        await redis.aclose()
    cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
    print(json.dumps({"beats": beats, "latencies": latencies, "cpu_s": cpu}))


async def measure(args: argparse.Namespace) -> dict[str, Any]:
    """Every figure of this benchmark."""
    per = args.replicas // args.instances
    async with contextlib.AsyncExitStack() as stack:
        server, redis = await stack.enter_async_context(private_redis())
        start_at = time.time() + 3.0  # time for the children to import and build their fleets
        procs: list[subprocess.Popen[str]] = []
        stack.callback(stop_processes, procs, signal.SIGKILL, 5.0)
        share = -(-args.instances // args.processes)
        for first in range(0, args.instances, share):
            count = min(share, args.instances - first)
            procs.append(
                subprocess.Popen(
                    [
                        sys.executable,
                        *("-m", "bench.heartbeat_load", "--child", server.url),
                        *(str(first), str(count), str(per), repr(start_at)),
                        *("--interval", str(args.interval), "--window", str(args.window)),
                    ],
                    cwd=ROOT,
                    stdout=subprocess.PIPE,
                    text=True,
                )
            )
        window_start = start_at + args.interval
        await asyncio.sleep(max(0.0, window_start - time.time()))
        cmds0, cpu0 = await server_counters(redis)
        t0 = time.time()
        await asyncio.sleep(args.window)
        cmds1, cpu1 = await server_counters(redis)
        elapsed = time.time() - t0
        memory = await redis.info("memory")
        keys = await redis.dbsize()
        reports = []
        for p in procs:
            out, _ = p.communicate(timeout=args.window + 60)
            reports.append(json.loads(out.strip().splitlines()[-1]))
    commands = calls_delta(cmds0, cmds1)
    latencies = [v for r in reports for v in r["latencies"]]
    beats = sum(r["beats"] for r in reports)
    results = {
        "machine": machine(),
        "versions": versions("redis", "hiredis"),
        "replicas": per * args.instances,
        "instances": args.instances,
        "interval_s": args.interval,
        "window_s": elapsed,
        "processes": len(procs),
        "beats_per_s": beats / args.window,
        "expected_beats_per_s": args.instances / args.interval,
        "redis_commands_per_s": sum(commands.values()) / elapsed,
        "redis_commands_by_name_per_s": {k: v / elapsed for k, v in commands.items()},
        "redis_cpu_pct": (cpu1 - cpu0) / elapsed * 100,
        "redis_used_memory_mb": int(memory["used_memory"]) / 2**20,
        "keys": keys,
        "beat_p50_ms": percentile(latencies, 50) if latencies else None,
        "beat_p99_ms": percentile(latencies, 99) if latencies else None,
        "client_cpu_pct": sum(r["cpu_s"] for r in reports) / (args.interval + args.window) * 100,
    }
    print(
        f"{results['replicas']:,} replicas in {args.instances} instances, beat every "
        f"{args.interval:g} s ({len(procs)} client processes, {elapsed:.1f} s window):"
    )
    print(
        f"  {results['beats_per_s']:.1f} beats/s (expected {results['expected_beats_per_s']:.1f}),"
        f" beat round trip p50 {results['beat_p50_ms']:.1f} ms, p99 {results['beat_p99_ms']:.1f} ms"
    )
    print(
        f"  Redis: {results['redis_commands_per_s']:,.0f} commands/s, "
        f"CPU {results['redis_cpu_pct']:.1f}% of one core, "
        f"{results['redis_used_memory_mb']:.0f} MB used, {keys:,} keys"
    )
    top = sorted(commands.items(), key=lambda kv: -kv[1])[:8]
    print("  by command (/s): " + ", ".join(f"{k} {v / elapsed:,.0f}" for k, v in top))
    return results


def main() -> int:
    """Parse flags, run, print, write JSON."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--replicas", type=int, default=10_000)
    parser.add_argument("--instances", type=int, default=100)
    parser.add_argument("--interval", type=float, default=5.0)
    parser.add_argument("--window", type=float, default=20.0)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--json", help="write the figures here")
    parser.add_argument("--child", nargs=5, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        url, first, count, per, start_at = args.child
        asyncio.run(child(url, int(first), int(count), int(per), float(start_at), args))
        return 0
    print(f"machine: {machine()}")
    results = asyncio.run(measure(args))
    write_results(args.json, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
