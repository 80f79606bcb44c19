"""Fleet listing: ``byconsole --snapshot --format json`` vs ``rq info``, same Redis, same run.

    .venv/bin/python -m bench.fleet_listing [--sizes 100,1000,10000] [--repeats 3]
        [--delay-ms 1] [--no-netns] [--json PATH]

For each fleet size N, on one private ``redis-server``:

* our fleet: N workers written by the runtime's own heartbeat (``bench.fleet_sim``:
  N/100 instances of 100 replicas over three agent types, one task queued per type);
* rq's fleet: N ``rq.Worker`` objects registered with ``register_birth()`` (rq's own
  API) on three queues, one job enqueued per queue.

Measured, each CLI as a fresh subprocess (interpreter start-up included on both sides):
wall time (median of ``--repeats``), peak RSS, Redis commands per listing (``INFO
commandstats`` deltas); in process: ``FleetReader.read()`` time and round trips, and
``rq.Worker.all()``. Then again with the client behind a delayed network path
(``bench.netdelay``: netns + netem when the kernel allows it, else a delay relay).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import redis as sync_redis
from rq import Queue, Worker

from bench.common import (
    BIN,
    machine,
    ratio,
    redis_client,
    run_timed,
    start_redis,
    versions,
    worker_env,
    write_results,
)
from bench.fleet_sim import TYPES, calls_delta, command_calls, populate
from bench.netdelay import DelayedPath
from worker_runtime.embedded import RedisServer
from worker_runtime.fleet import FleetReader
from worker_runtime.keys import Keys
from worker_runtime.producer import Producer

CLI_BUDGET_S = 40.0
"""Stop repeating one CLI at one size once its runs took this long (1 run minimum)."""


def register_rq_workers(url: str, count: int) -> None:
    """``count`` rq workers, registered the way a starting ``rq worker`` registers."""
    conn = sync_redis.Redis.from_url(url)

    def one(i: int) -> None:
        host, replica = divmod(i, 100)
        worker = Worker(
            [TYPES[host % len(TYPES)]], name=f"rq-host-{host:04d}-r{replica}", connection=conn
        )
        worker.register_birth()

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(one, range(count)))
    for name in TYPES:
        # A queue is listed by rq once it had a job; the function is never run.
        Queue(name, connection=conn).enqueue("bench.handlers.noop")
    conn.close()


def ours_cmd(url: str) -> list[str]:
    """``byconsole --snapshot --format json``."""
    return [str(BIN / "byconsole"), "--snapshot", "--format", "json", "--redis-url", url]


def rq_cmd(url: str) -> list[str]:
    """``rq info``."""
    return [str(BIN / "rq"), "info", "--url", url]


def listed_ours(stdout: str) -> int:
    """Workers in a ``--format json`` snapshot (-1 when the output is not one)."""
    try:
        return len(json.loads(stdout)["workers"])
    except (ValueError, KeyError, TypeError):
        return -1


def listed_rq(stdout: str) -> int:
    """Workers in ``rq info`` output: its ``N workers, M queues`` line (-1 if absent)."""
    for line in reversed(stdout.splitlines()):
        words = line.split()
        if len(words) >= 2 and words[1] == "workers," and words[0].isdigit():
            return int(words[0])
    return -1


async def time_cli(
    server: RedisServer,
    args: list[str],
    expect: int,
    count: Any,
    repeats: int,
    wrap: list[str] | None = None,
) -> dict[str, Any]:
    """Run a listing CLI up to ``repeats`` times; its figures and the commands it sent."""
    admin = redis_client(server.url)
    runs: list[float] = []
    rss: list[float] = []
    commands: dict[str, int] = {}
    spent = 0.0
    try:
        for i in range(repeats):
            before = command_calls(await admin.info("commandstats"))
            done = run_timed(args, env=worker_env(server.url), wrap=wrap)
            after = command_calls(await admin.info("commandstats"))
            if done.returncode not in (0, 1) or count(done.stdout) != expect:
                tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
                raise SystemExit(
                    f"{Path(args[0]).name} listed {count(done.stdout)} of {expect} workers "
                    f"(exit {done.returncode}): {' | '.join(tail)}"
                )
            runs.append(done.seconds)
            rss.append(done.max_rss_mb)
            if i == 0:
                commands = calls_delta(before, after)
            spent += done.seconds
            if spent > CLI_BUDGET_S:
                break
    finally:
        await admin.aclose()
    return {
        "seconds": statistics.median(runs),
        "runs": runs,
        "max_rss_mb": max(rss),
        "commands": sum(commands.values()),
        "commands_by_name": commands,
    }


async def in_process(server: RedisServer, repeats: int) -> dict[str, Any]:
    """``FleetReader.read()`` and ``rq.Worker.all()`` timed inside this process."""
    redis = redis_client(server.url)
    reader = FleetReader(redis, Keys())
    times: list[float] = []
    try:
        await reader.read()  # warm the connection
        before = command_calls(await redis.info("commandstats"))
        await reader.read()
        after = command_calls(await redis.info("commandstats"))
        for _ in range(repeats):
            started = time.perf_counter()
            snap = await reader.read()
            times.append((time.perf_counter() - started) * 1000)
        workers = len(snap.workers)
    finally:
        await redis.aclose()
    conn = sync_redis.Redis.from_url(server.url)
    rq_times: list[float] = []
    for _ in range(max(1, repeats // 2)):
        started = time.perf_counter()
        listed = Worker.all(connection=conn)
        _ = [(w.name, w.get_state(), w.queue_names()) for w in listed]
        rq_times.append((time.perf_counter() - started) * 1000)
    conn.close()
    per_read = calls_delta(before, after)
    return {
        "reader_ms": statistics.median(times),
        "reader_round_trips": reader.round_trips,
        "reader_commands": sum(per_read.values()),
        "reader_commands_by_name": per_read,
        "reader_workers": workers,
        "rq_worker_all_ms": statistics.median(rq_times),
    }


async def measure(args: argparse.Namespace) -> dict[str, Any]:
    """Every figure of this benchmark."""
    sizes = [int(s) for s in args.sizes.split(",")]
    server = start_redis()
    redis = redis_client(server.url)
    path: DelayedPath | None = None
    results: dict[str, Any] = {
        "machine": machine(),
        "versions": versions("rq", "redis", "hiredis", "pydantic"),
        "sizes": sizes,
        "loopback": {},
        "delayed": {},
    }
    try:
        if args.delay_ms > 0:
            path = DelayedPath(args.delay_ms, allow_netns=not args.no_netns).open(server)
            results["delay"] = {
                "path": path.description,
                "kind": path.kind,
                "notes": path.skipped,
                "rtt_loopback_ms": path.base_rtt_ms,
                "rtt_delayed_ms": path.rtt_ms,
            }
            for note in path.skipped:
                print(note)
            print(
                f"delayed path: {path.description}; Redis PING RTT {path.rtt_ms:.2f} ms "
                f"(loopback {path.base_rtt_ms:.3f} ms)"
            )
        # Start-up: each CLI against an empty Redis (interpreter, imports, connect).
        await redis.flushall()
        for cmd in (ours_cmd(server.url), rq_cmd(server.url)):
            run_timed(cmd, env=worker_env(server.url))  # warm the page cache
        empty: dict[str, Any] = {
            "ours": await time_cli(server, ours_cmd(server.url), 0, listed_ours, args.repeats),
            "rq": await time_cli(server, rq_cmd(server.url), 0, listed_rq, args.repeats),
        }
        results["startup"] = empty
        print(
            f"start-up (empty Redis): byconsole --snapshot {empty['ours']['seconds']:.3f} s "
            f"({empty['ours']['max_rss_mb']:.0f} MB), rq info {empty['rq']['seconds']:.3f} s "
            f"({empty['rq']['max_rss_mb']:.0f} MB)"
        )
        for n in sizes:
            await redis.flushall()
            await populate(redis, n)
            producer = Producer(redis)
            for t in TYPES:
                await producer.submit(t, {})
            register_rq_workers(server.url, n)
            row: dict[str, Any] = await in_process(server, args.repeats)
            row["ours"] = await time_cli(server, ours_cmd(server.url), n, listed_ours, args.repeats)
            row["rq"] = await time_cli(server, rq_cmd(server.url), n, listed_rq, args.repeats)
            row["speedup"] = ratio(row["rq"]["seconds"], row["ours"]["seconds"])
            row["listing_speedup"] = ratio(row["rq_worker_all_ms"], row["reader_ms"])
            results["loopback"][str(n)] = row
            print(
                f"{n:>6,} workers, loopback: byconsole --snapshot {row['ours']['seconds']:.3f} s "
                f"({row['ours']['commands']:,} commands, {row['ours']['max_rss_mb']:.0f} MB) | "
                f"rq info {row['rq']['seconds']:.3f} s ({row['rq']['commands']:,} commands, "
                f"{row['rq']['max_rss_mb']:.0f} MB) | CLI {row['speedup']:.1f}x faster"
            )
            print(
                f"{n:>6,} workers, in process: FleetReader.read {row['reader_ms']:.1f} ms in "
                f"{row['reader_round_trips']} round trips ({row['reader_commands']:,} commands) | "
                f"rq Worker.all + fields {row['rq_worker_all_ms']:.1f} ms | "
                f"{row['listing_speedup']:.1f}x faster"
            )
            if path is not None:
                url = path.url_for(server.port)
                slow: dict[str, Any] = {
                    "ours": await time_cli(
                        server, ours_cmd(url), n, listed_ours, args.repeats, path.wrap
                    ),
                    "rq": await time_cli(server, rq_cmd(url), n, listed_rq, 1, path.wrap),
                }
                extra = path.rtt_ms - path.base_rtt_ms
                for who in ("ours", "rq"):
                    # Time the path added, in round trips: what the client waited on
                    # (fastest runs on both sides: noise only ever adds time).
                    added = min(slow[who]["runs"]) - min(row[who]["runs"])
                    slow[who]["implied_round_trips"] = max(0.0, added * 1000 / extra)
                slow["speedup"] = ratio(slow["rq"]["seconds"], slow["ours"]["seconds"])
                results["delayed"][str(n)] = slow
                print(
                    f"{n:>6,} workers, +{path.rtt_ms:.2f} ms RTT: byconsole --snapshot "
                    f"{slow['ours']['seconds']:.3f} s (~{slow['ours']['implied_round_trips']:.0f}"
                    f" round trips) | rq info {slow['rq']['seconds']:.3f} s "
                    f"(~{slow['rq']['implied_round_trips']:,.0f} round trips) | "
                    f"{slow['speedup']:.1f}x faster"
                )
    finally:
        if path is not None:
            path.close()
        await redis.aclose()
        server.cleanup()
    return results


def main() -> int:
    """Parse flags, run, print, write JSON."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="100,1000,10000")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--delay-ms", type=float, default=1.0, help="added RTT for the second pass (0: none)"
    )
    parser.add_argument("--no-netns", action="store_true", help="use the delay relay directly")
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args()
    print(f"machine: {machine()}")
    results = asyncio.run(measure(args))
    write_results(args.json, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
