"""Fleet listing: ``byconsole --snapshot`` vs ``rq info``, same Redis, same run.

    .venv/bin/python -m bench.fleet_listing [--sizes 100,1000,10000] [--repeats 5]
        [--delay-ms 1] [--delay-sizes 1000] [--table] [--no-netns] [--json PATH]

On one private ``redis-server``, every comparison interleaved (``bench.common``: A B C,
C B A …, ``--repeats`` recorded rounds, median and min per side, load average before and
after):

* start-up: ``byconsole --snapshot --format json`` vs ``rq info`` on an empty Redis;
* per fleet size N: our N workers written by the runtime's own heartbeat
  (``bench.common``: instances of 100 replicas over three agent types, one task queued
  per type) beside N ``rq.Worker`` objects registered with rq's own ``register_birth()``
  on three queues (one job each); each CLI as a fresh subprocess (interpreter start-up
  included on both sides; with ``--table`` also ``--format table``): wall and CPU time,
  peak RSS, Redis commands per listing (``INFO commandstats`` deltas, from one
  unrecorded run of each side first);
* per N, in process: ``FleetReader.read()`` (read + build, the time in its pipelined
  round trips apart) against the floor, a bare pipelined read of the same keys with each
  lease decoded from JSON and nothing else; and ``rq.Worker.all()``;
* then both CLIs again with the client behind a delayed network path (``bench.netdelay``:
  netns + netem when the kernel allows it, else a delay relay) at ``--delay-sizes``.

CPU time (user + system) sits beside wall time: on a shared machine it moves less with
other people's load.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import re
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any

import redis as sync_redis
from redis.asyncio import Redis
from rq import Queue, Worker

from bench.common import (
    BIN,
    TYPES,
    ainterleave,
    calls_delta,
    command_calls,
    interleave,
    machine,
    populate,
    private_redis,
    ratio,
    redis_client,
    run_timed,
    stats,
    versions,
    worker_env,
    write_results,
)
from bench.netdelay import DelayedPath
from worker_runtime.embedded import RedisServer
from worker_runtime.fleet import FleetReader
from worker_runtime.keys import Keys
from worker_runtime.producer import Producer


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


def ours_cmd(url: str, fmt: str = "json") -> list[str]:
    """``byconsole --snapshot --format FMT``."""
    return [str(BIN / "byconsole"), "--snapshot", "--format", fmt, "--redis-url", url]


def rq_cmd(url: str) -> list[str]:
    """``rq info``."""
    return [str(BIN / "rq"), "info", "--url", url]


def listed_ours(stdout: str) -> int:
    """Workers in a ``--format json`` snapshot (-1 when the output is not one)."""
    try:
        return len(json.loads(stdout)["workers"])
    except (ValueError, KeyError, TypeError):
        return -1


WORKER_ROW = re.compile(r"^\S+-r\d+(\s|$)")
"""A Workers-table row of a ``--format table`` snapshot: it starts with a replica's id."""


def listed_table(stdout: str) -> int:
    """Worker rows in a ``--format table`` snapshot (ids are never wrapped)."""
    return sum(1 for line in stdout.splitlines() if WORKER_ROW.match(line))


def listed_rq(stdout: str) -> int:
    """Workers in ``rq info`` output: its ``N workers, M queues`` line (-1 if absent)."""
    for line in reversed(stdout.splitlines()):
        words = line.split()
        if len(words) >= 2 and words[1] == "workers," and words[0].isdigit():
            return int(words[0])
    return -1


def _listing(side: str) -> Any:
    """How many workers a side's output lists."""
    return {"rq": listed_rq, "table": listed_table}.get(side, listed_ours)


async def time_clis(
    server: RedisServer,
    sides: dict[str, list[str]],
    expect: int,
    repeats: int,
    wrap: list[str] | None = None,
) -> dict[str, Any]:
    """Run listing CLIs interleaved (A B C … C B A …, ``bench.common``).

    One unrecorded run of each side first counts the Redis commands it sends (and warms
    the page cache); then ``repeats`` recorded rounds. Per side: median (``seconds``),
    min, every run, peak RSS and the commands; their CPU times under ``cpu``; plus the
    load average before and after.
    """
    admin = redis_client(server.url)
    rss: dict[str, list[float]] = {name: [] for name in sides}
    cpu: dict[str, list[float]] = {name: [] for name in sides}
    commands: dict[str, dict[str, int]] = {}

    def once(name: str) -> float:
        done = run_timed(sides[name], env=worker_env(server.url), wrap=wrap)
        listed = _listing(name)(done.stdout)
        if done.returncode not in (0, 1) or listed != expect:
            tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
            raise SystemExit(
                f"{Path(sides[name][0]).name} listed {listed} of {expect} workers "
                f"(exit {done.returncode}): {' | '.join(tail)}"
            )
        rss[name].append(done.max_rss_mb)
        cpu[name].append(done.cpu_seconds)
        return done.seconds

    try:
        for name in sides:
            before = command_calls(await admin.info("commandstats"))
            once(name)
            after = command_calls(await admin.info("commandstats"))
            commands[name] = calls_delta(before, after)
        timed = interleave({name: partial(once, name) for name in sides}, repeats, warmup=0)
    finally:
        await admin.aclose()
    out: dict[str, Any] = {
        "repeats": repeats,
        "load_before": timed["load_before"],
        "load_after": timed["load_after"],
        # The first run of each side counted commands: it is no sample.
        "cpu": {name: stats(samples[1:]) for name, samples in cpu.items()},
    }
    for name in sides:
        out[name] = {
            "seconds": timed[name]["median"],
            "min": timed[name]["min"],
            "median": timed[name]["median"],
            "runs": timed[name]["samples"],
            "max_rss_mb": max(rss[name]),
            "commands": sum(commands[name].values()),
            "commands_by_name": commands[name],
        }
    return out


class TimedReader(FleetReader):
    """A :class:`FleetReader` that adds up the time spent in its pipelined round trips."""

    round_trip_s = 0.0

    async def _run(self, queue: Any) -> list[Any]:
        started = time.perf_counter()
        try:
            return await super()._run(queue)
        finally:
            self.round_trip_s += time.perf_counter() - started


async def floor_read(redis: Redis, k: Keys) -> int:
    """The bare read: the same keys in the same round trips, leases decoded, no models."""
    pipe = redis.pipeline(transaction=False)
    pipe.smembers(k.workers)
    pipe.smembers(k.agent_types)
    pipe.zrange(k.instances, 0, -1, withscores=True)
    pipe.get(k.leader_lock)
    pipe.hgetall(k.scale_targets)
    first = await pipe.execute()
    ids, types = sorted(first[0]), sorted(first[1])
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
    return len([json.loads(raw) if raw else None for raw in replies[0]])


async def in_process(server: RedisServer, n: int, repeats: int) -> dict[str, Any]:
    """``FleetReader.read()`` vs the floor (interleaved), and ``rq.Worker.all()``."""
    redis = redis_client(server.url)
    keys = Keys()
    reader = TimedReader(redis, keys)
    trips: list[float] = []

    async def read() -> float:
        reader.round_trip_s = 0.0
        started = time.perf_counter()
        snap = await reader.read()
        elapsed = (time.perf_counter() - started) * 1000
        assert len(snap.workers) == n
        trips.append(reader.round_trip_s * 1000)
        return elapsed

    async def floor() -> float:
        started = time.perf_counter()
        count = await floor_read(redis, keys)
        elapsed = (time.perf_counter() - started) * 1000
        assert count == n
        return elapsed

    try:
        await reader.read()  # warm the connection
        before = command_calls(await redis.info("commandstats"))
        await reader.read()
        after = command_calls(await redis.info("commandstats"))
        versus = await ainterleave({"read_build": read, "floor": floor}, repeats)
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
    trip_ms = statistics.median(trips[-repeats:])
    return {
        "read_vs_floor": versus,
        "reader_ms": versus["read_build"]["median"],
        "reader_round_trips": reader.round_trips,
        "round_trips_ms": trip_ms,
        "build_ms": versus["read_build"]["median"] - trip_ms,
        "reader_commands": sum(per_read.values()),
        "reader_commands_by_name": per_read,
        "rq_worker_all_ms": statistics.median(rq_times),
    }


def speedup(row: dict[str, Any], side: str = "ours", key: str = "speedup") -> None:
    """Set ``row[key]`` (medians) and ``row[key + "_min"]`` (mins): how many times faster
    than ``rq info`` the ``side`` CLI listed the fleet."""
    row[key] = ratio(row["rq"]["seconds"], row[side]["seconds"])
    row[f"{key}_min"] = ratio(row["rq"]["min"], row[side]["min"])


async def measure(args: argparse.Namespace) -> dict[str, Any]:
    """Every figure of this benchmark."""
    sizes = [int(s) for s in args.sizes.split(",")]
    path: DelayedPath | None = None
    results: dict[str, Any] = {
        "machine": machine(),
        "versions": versions("rq", "redis", "hiredis", "pydantic"),
        "sizes": sizes,
        "repeats": args.repeats,
        "loopback": {},
        "delayed": {},
    }
    async with contextlib.AsyncExitStack() as stack:
        server, redis = await stack.enter_async_context(private_redis())
        if args.delay_ms > 0:
            path = DelayedPath(args.delay_ms, allow_netns=not args.no_netns).open(server)
            stack.callback(path.close)
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
        empty = await time_clis(
            server, {"ours": ours_cmd(server.url), "rq": rq_cmd(server.url)}, 0, args.repeats
        )
        results["startup"] = empty
        print(
            f"start-up (empty Redis): byconsole --snapshot {empty['ours']['seconds']:.3f} s "
            f"(min {empty['ours']['min']:.3f}, {empty['ours']['max_rss_mb']:.0f} MB), "
            f"rq info {empty['rq']['seconds']:.3f} s (min {empty['rq']['min']:.3f}, "
            f"{empty['rq']['max_rss_mb']:.0f} MB) [load {empty['load_before']} -> "
            f"{empty['load_after']}]"
        )
        delay_sizes = (
            {int(s) for s in args.delay_sizes.split(",") if s} if args.delay_sizes else set(sizes)
        )
        for n in sizes:
            await redis.flushall()
            await populate(redis, n)
            producer = Producer(redis)
            for t in TYPES:
                await producer.submit(t, {})
            register_rq_workers(server.url, n)
            row: dict[str, Any] = await in_process(server, n, args.repeats)
            sides = {"ours": ours_cmd(server.url), "rq": rq_cmd(server.url)}
            if args.table:
                sides["table"] = ours_cmd(server.url, "table")
            clis = await time_clis(server, sides, n, args.repeats)
            row.update(clis)
            speedup(row)
            if "table" in row:
                speedup(row, "table", "table_speedup")
            row["listing_speedup"] = ratio(row["rq_worker_all_ms"], row["reader_ms"])
            results["loopback"][str(n)] = row
            table = (
                f" | --format table {row['table']['seconds']:.3f} s (min "
                f"{row['table']['min']:.3f}), {row['table_speedup']:.1f}x faster than rq info"
                if "table" in row
                else ""
            )
            print(
                f"{n:>6,} workers, loopback: byconsole --snapshot {row['ours']['seconds']:.3f} s "
                f"(min {row['ours']['min']:.3f}; {row['ours']['commands']:,} commands, "
                f"{row['ours']['max_rss_mb']:.0f} MB) | rq info {row['rq']['seconds']:.3f} s "
                f"(min {row['rq']['min']:.3f}; {row['rq']['commands']:,} commands, "
                f"{row['rq']['max_rss_mb']:.0f} MB) | CLI {row['speedup']:.1f}x faster "
                f"(mins: {row['speedup_min']:.1f}x){table} [load {row['load_before']} -> "
                f"{row['load_after']}]"
            )
            floor = row["read_vs_floor"]["floor"]
            print(
                f"{n:>6,} workers, in process: FleetReader.read {row['reader_ms']:.1f} ms in "
                f"{row['reader_round_trips']} round trips ({row['round_trips_ms']:.1f} ms; "
                f"{row['reader_commands']:,} commands), floor {floor['median']:.1f} ms | "
                f"rq Worker.all + fields {row['rq_worker_all_ms']:.1f} ms | "
                f"{row['listing_speedup']:.1f}x faster"
            )
            if path is not None and n in delay_sizes:
                url = path.url_for(server.port)
                slow = await time_clis(
                    server, {"ours": ours_cmd(url), "rq": rq_cmd(url)}, n, args.repeats, path.wrap
                )
                extra = path.rtt_ms - path.base_rtt_ms
                for who in ("ours", "rq"):
                    # Time the path added, in round trips: what the client waited on
                    # (fastest runs on both sides: noise only ever adds time).
                    added = slow[who]["min"] - row[who]["min"]
                    slow[who]["implied_round_trips"] = max(0.0, added * 1000 / extra)
                speedup(slow)
                slow["rtt_ms"] = path.rtt_ms
                results["delayed"][str(n)] = slow
                print(
                    f"{n:>6,} workers, {path.rtt_ms:.2f} ms RTT: byconsole --snapshot "
                    f"{slow['ours']['seconds']:.3f} s (min {slow['ours']['min']:.3f}, "
                    f"~{slow['ours']['implied_round_trips']:.0f} round trips) | rq info "
                    f"{slow['rq']['seconds']:.3f} s (min {slow['rq']['min']:.3f}, "
                    f"~{slow['rq']['implied_round_trips']:,.0f} round trips) | "
                    f"{slow['speedup']:.1f}x faster (mins: {slow['speedup_min']:.1f}x) "
                    f"[load {slow['load_before']} -> {slow['load_after']}]"
                )
    return results


def main() -> int:
    """Parse flags, run, print, write JSON."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="100,1000,10000")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--delay-ms", type=float, default=1.0, help="added RTT for the second pass (0: none)"
    )
    parser.add_argument("--no-netns", action="store_true", help="use the delay relay directly")
    parser.add_argument(
        "--delay-sizes", default="", help="sizes measured over the delayed path (default: all)"
    )
    parser.add_argument(
        "--table", action="store_true", help="time --format table against rq info too"
    )
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args()
    print(f"machine: {machine()}")
    results = asyncio.run(measure(args))
    write_results(args.json, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
