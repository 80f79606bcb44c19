"""Envelope path vs native path: one worker draining a backlog, results delivered.

    .venv/bin/python -m bench.envelope_throughput [--tasks 20000] [--concurrency 100]
        [--sessions 100] [--repeats 5] [--json PATH]

Every task we submit is by-framework's ``ASK_AGENT`` envelope now
(``bench.peers.worker_runtime_app``: ``Producer.submit_many``); the native path is the
legacy ``{kind, data}`` entry older producers wrote
(``bench.peers.worker_runtime_legacy_app``). Both sides run the same worker
(``worker-runtime run bench.handlers:counted``, whose tasks answer ``"ok"``) with every
task's result delivered the way its client reads it: each task carries a session id
(20 in a row per session, round-robin over ``--sessions``), so its result goes to the
session's data stream and its execution record to the session registry
(envelope: ``finalAnswer`` + ``appStreamResponse`` and by-framework's record; native:
one result entry and our record). After each run the results are counted in Redis:
a run that delivered fewer than every task's is reported as failed.

Measured as ``bench.throughput`` measures a system (``run_system``: queue, start one
worker, time first to last task, worker CPU from /proc, Redis commands from INFO
commandstats), interleaved (A B, B A, …) after one warm-up round; prints median and
min per side and the envelope/native ratios of throughput and of CPU per task (the
targets, ``bench/targets.py``: >= 0.8 for throughput and <= 1.25 for CPU per task,
i.e. >= 0.8x the native path's efficiency), and of Redis's CPU per task
(commandstats counts the XADDs inside a script, so "commands/task" is what Redis ran,
not round trips).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from typing import Any

from bench.common import machine, ratio_line, redis_client, start_redis, write_results
from bench.throughput import RunOnce, interleaved, print_side, run_system, side_figures
from worker_runtime.embedded import RedisServer
from worker_runtime.keys import Keys

SIDES = {"envelope": "worker_runtime", "native": "worker_runtime_legacy"}
"""Side name -> the ``bench.throughput`` system that queues its tasks."""
RESULT_ENTRIES = {"envelope": 2, "native": 1}
"""Session data stream entries per task (answer + end of stream; one result entry)."""


async def delivered(server: RedisServer, sessions: int) -> tuple[int, int]:
    """Session data stream entries and registry task mappings left by the last run."""
    keys = Keys()
    redis = redis_client(server.url)
    try:
        entries = mapped = 0
        for n in range(sessions):
            entries += int(await redis.xlen(keys.session_data_stream(f"bench-{n}")))
            fields = await redis.hkeys(keys.session_registry(f"bench-{n}"))
            mapped += sum(1 for f in fields if str(f).startswith("msg_map:"))
        return entries, mapped
    finally:
        await redis.aclose()


async def measure(args: argparse.Namespace) -> dict[str, Any]:
    """Both sides interleaved; their figures and the ratios."""
    server = start_redis()

    def side(name: str) -> RunOnce:
        async def once() -> dict[str, Any]:
            row = await run_system(
                server,
                SIDES[name],
                args.tasks,
                args.concurrency,
                args.timeout,
                results=True,
                sessions=args.sessions,
            )
            entries, mapped = await delivered(server, args.sessions)
            want = args.tasks * RESULT_ENTRIES[name]
            if entries != want or mapped != args.tasks:
                raise RuntimeError(
                    f"results not delivered: {entries} of {want} entries, "
                    f"{mapped} of {args.tasks} records"
                )
            return row

        return once

    try:
        rates, rows, failed = await interleaved({n: side(n) for n in SIDES}, args.repeats)
    finally:
        server.cleanup()
    out: dict[str, Any] = {
        "machine": machine(),
        "tasks": args.tasks,
        "concurrency": args.concurrency,
        "sessions": args.sessions,
        "repeats": args.repeats,
        "load_before": rates["load_before"],
        "load_after": rates["load_after"],
        "sides": {},
    }
    if failed:
        out["failed"] = failed
        for name, why in failed.items():
            print(f"{name} failed: {why}")
        return out
    for name in SIDES:
        out["sides"][name] = side_figures(rates[name], rows[name])
        print_side(name, out["sides"][name], width=9)
    print(ratio_line(rates, "envelope", "native", unit="tasks/s"))
    envelope, native = out["sides"]["envelope"], out["sides"]["native"]
    for key, figure in (
        ("throughput_ratio", "tasks_per_s"),
        ("cpu_per_task_ratio", "worker_cpu_us_per_task"),
        ("redis_cpu_per_task_ratio", "redis_cpu_us_per_task"),
    ):
        out[key] = envelope[figure]["median"] / native[figure]["median"]
    print(
        f"envelope/native: throughput {out['throughput_ratio']:.2f}x (target >= 0.80), "
        f"CPU per task {out['cpu_per_task_ratio']:.2f}x (target <= 1.25, i.e. efficiency "
        f"{1 / out['cpu_per_task_ratio']:.2f}x >= 0.80); Redis CPU per task "
        f"{out['redis_cpu_per_task_ratio']:.2f}x"
    )
    return out


def main() -> int:
    """Parse flags, run, print, write JSON."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=20_000)
    parser.add_argument("--concurrency", type=int, default=100)
    parser.add_argument("--sessions", type=int, default=100)
    parser.add_argument("--timeout", type=float, default=180.0, help="per run, seconds")
    parser.add_argument("--repeats", type=int, default=5, help="interleaved rounds")
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args()
    if args.sessions < 1 or args.tasks < 2:
        parser.error("--sessions must be at least 1 and --tasks at least 2")
    print(f"machine: {machine()}")
    print(f"{args.tasks:,} no-op tasks, results delivered, queued before each worker starts")
    # Every task answers (bench.handlers.counted), so every result is delivered.
    os.environ["BENCH_ANSWER"] = "ok"
    results = asyncio.run(measure(args))
    write_results(args.json, results)
    return 1 if "failed" in results else 0


if __name__ == "__main__":
    sys.exit(main())
