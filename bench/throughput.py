"""No-op task throughput of one worker process: worker_runtime vs arq, taskiq, dramatiq, celery.

    .venv/bin/python -m bench.throughput [--tasks 20000] [--concurrency 100]
        [--systems worker_runtime,arq,taskiq,dramatiq,celery] [--results [--sessions 100]]
        [--repeats 5] [--json PATH]
    .venv/bin/python -m bench.throughput --ab BASE_TREE [--results] [--repeats 5] ...

``--results`` stores every task's output in every system: worker_runtime tasks carry a
session id (round-robin over ``--sessions`` sessions, 20 in a row each), so each result
goes to the session's data stream and its registry; dramatiq runs its Results
middleware, taskiq its Redis result backend, celery its Redis result backend, arq keeps
results as it always does. ``--repeats N`` runs the systems interleaved (A B C … C B A …)
N times after one warm-up round and reports median and min (a system that fails is
reported as failed and not run again; the ceiling follows).
``--ab BASE_TREE`` compares worker_runtime from this tree against the one in
``BASE_TREE`` (e.g. a ``git worktree`` of the commit before a change), interleaved the
same way.

For every system, on the same private ``redis-server``, one after the other:

1. FLUSHALL, then queue ``--tasks`` no-op tasks through the system's own client API
   (a separate process; not part of the figure);
2. start one worker process with the same concurrency (``--concurrency``);
3. each task only counts itself in-process (``bench.peers.counter``): drain time is
   from the first task to the last, so start-up is excluded for every system alike;
4. record the worker's CPU time, Redis's CPU time (``INFO cpu``) and the Redis
   commands it took (``INFO commandstats``) per task.

Then the ceiling on the same server: a pipelined XREADGROUP COUNT 200 + XACK loop in
one redis-py process (hiredis), pipelined XADD from redis-py, and ``redis-benchmark``
XADD unpipelined and at pipeline 16.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Mapping
from functools import partial
from pathlib import Path
from typing import Any

from bench.common import (
    BIN,
    ROOT,
    ainterleave,
    calls_delta,
    machine,
    proc_stat,
    ratio,
    ratio_line,
    redis_client,
    server_counters,
    start_redis,
    stats,
    versions,
    worker_env,
    write_results,
)
from worker_runtime.embedded import RedisServer

SYSTEMS = ("worker_runtime", "arq", "taskiq", "dramatiq", "celery")

CLK_TCK = os.sysconf("SC_CLK_TCK")


def worker_cmd(system: str, concurrency: int) -> list[str]:
    """The command line that starts one worker process of ``system``."""
    c = str(concurrency)
    ours = [
        str(BIN / "worker-runtime"),
        "run",
        "bench.handlers:counted",
        "--type",
        "bench",
        "--instance",
        "tp",
        "--concurrency",
        c,
    ]
    return {
        "worker_runtime": ours,
        # The same worker, fed legacy {kind, data} entries (bench.envelope_throughput).
        "worker_runtime_legacy": ours,
        "arq": [str(BIN / "arq"), "bench.peers.arq_app.WorkerSettings"],
        "taskiq": [
            str(BIN / "taskiq"),
            "worker",
            "bench.peers.taskiq_app:broker",
            "--workers",
            "1",
            "--max-async-tasks",
            c,
            "--log-level",
            "WARNING",
        ],
        "dramatiq": [
            str(BIN / "dramatiq"),
            "bench.peers.dramatiq_app",
            "--processes",
            "1",
            "--threads",
            c,
        ],
        "celery": [
            str(BIN / "celery"),
            "-A",
            "bench.peers.celery_app",
            "worker",
            "-P",
            "threads",
            "-c",
            c,
            "--loglevel",
            "WARNING",
        ],
    }[system]


CONFIG = {
    "worker_runtime": "worker-runtime run --concurrency C (fetch_count 200, defaults otherwise)",
    "worker_runtime_legacy": "worker-runtime run --concurrency C, tasks queued as legacy "
    "{kind, data} entries",
    "arq": "arq WorkerSettings max_jobs=C (defaults otherwise: results kept 1 h)",
    "taskiq": "taskiq worker --workers 1 --max-async-tasks C, RedisStreamBroker (defaults)",
    "dramatiq": "dramatiq --processes 1 --threads C, RedisBroker (defaults)",
    "celery": "celery worker -P threads -c C, Redis broker, ignore_result (defaults otherwise)",
}
CONFIG_RESULTS = {
    "worker_runtime": "worker-runtime run --concurrency C, every task with a session id "
    "(result to the session data stream + registry)",
    "worker_runtime_legacy": "worker-runtime run --concurrency C, legacy {kind, data} "
    "entries, every task with a session id (result to the session data stream + registry)",
    "arq": CONFIG["arq"],
    "taskiq": "taskiq worker --workers 1 --max-async-tasks C, RedisStreamBroker "
    "+ RedisAsyncResultBackend (defaults)",
    "dramatiq": "dramatiq --processes 1 --threads C, RedisBroker + Results(RedisBackend), "
    "store_results=True",
    "celery": "celery worker -P threads -c C, Redis broker + Redis result backend",
}


def tree_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of ``pid`` and all its descendants (from /proc)."""
    total = 0.0
    stack = [pid]
    while stack:
        p = stack.pop()
        try:
            fields = proc_stat(p)
            total += (int(fields[11]) + int(fields[12])) / CLK_TCK
            for task in Path(f"/proc/{p}/task").iterdir():
                children = (task / "children").read_text().split()
                stack.extend(int(c) for c in children)
        except (OSError, IndexError, ValueError):
            continue
    return total


def stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM the worker's process group; SIGKILL it after 15 s."""
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(15)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(5)
    except ProcessLookupError:
        pass


async def run_system(
    server: RedisServer,
    system: str,
    tasks: int,
    concurrency: int,
    timeout: float,
    results: bool = False,
    sessions: int = 100,
    root: Path | None = None,
) -> dict[str, Any]:
    """Queue ``tasks``, then time one worker process of ``system`` draining them.

    Args:
        results: store every task's output (see the module docstring).
        sessions: worker_runtime sessions the tasks are spread over (with ``results``).
        root: run the worker's code from this source tree instead of this one (the
            baseline of an A/B comparison; queued by this tree's client alike).
    """
    mode = {"BENCH_RESULTS": "1", "BENCH_SESSIONS": str(sessions)} if results else {}
    redis = redis_client(server.url)
    try:
        await redis.flushall()
        queued = subprocess.run(
            [sys.executable, "-m", "bench.peers.enqueue", system, server.url, str(tasks)],
            cwd=ROOT,
            env={**os.environ, **mode},
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if queued.returncode != 0:
            raise RuntimeError(f"enqueue failed: {queued.stderr.strip().splitlines()[-1:]}")
        enqueue_s = float(queued.stdout.strip().splitlines()[-1])
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "done.json"
            env = worker_env(
                server.url,
                BENCH_REDIS_URL=server.url,
                BENCH_TASKS=str(tasks),
                BENCH_OUT=str(out),
                BENCH_CONCURRENCY=str(concurrency),
                PYTHONPATH=str(root or ROOT),
                **mode,
            )
            before_cmds, before_cpu = await server_counters(redis)
            log = Path(tmp) / "worker.log"
            with log.open("wb") as log_file:
                proc = subprocess.Popen(
                    worker_cmd(system, concurrency),
                    cwd=root or ROOT,
                    env=env,
                    stdout=log_file,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            try:
                deadline = time.monotonic() + timeout
                while not out.exists():
                    if proc.poll() is not None:
                        raise RuntimeError(f"worker exited: {log.read_text()[-800:]}")
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"no completion within {timeout:g} s")
                    await asyncio.sleep(0.01)
                worker_cpu = tree_cpu_seconds(proc.pid)
                after_cmds, after_cpu = await server_counters(redis)
            finally:
                stop(proc)
            done = json.loads(out.read_text())
    finally:
        await redis.aclose()
    drain = done["last"] - done["first"]
    commands = calls_delta(before_cmds, after_cmds)
    return {
        "tasks": tasks,
        "tasks_per_s": (tasks - 1) / drain if drain > 0 else float("inf"),
        "drain_s": drain,
        "enqueue_s": enqueue_s,
        "worker_cpu_s": worker_cpu,
        "worker_cpu_us_per_task": worker_cpu / tasks * 1e6,
        "redis_cpu_s": after_cpu - before_cpu,
        "redis_commands_per_task": sum(commands.values()) / tasks,
        "redis_commands": commands,
        "results": results,
        "config": (CONFIG_RESULTS if results else CONFIG)[system].replace("C", str(concurrency)),
    }


async def raw_loop(server: RedisServer, tasks: int, batch: int = 200) -> dict[str, float]:
    """The ceiling of one redis-py process: pipelined XADD, then XREADGROUP + XACK.

    Each consume round trip acknowledges the previous batch and reads the next one in
    one pipeline, so it costs one round trip per ``batch`` entries.
    """
    redis = redis_client(server.url)
    stream, group = "raw:bench", "raw"
    try:
        await redis.flushall()
        started = time.perf_counter()
        for start in range(0, tasks, 1000):
            pipe = redis.pipeline(transaction=False)
            for _ in range(min(1000, tasks - start)):
                pipe.xadd(stream, {"kind": "task", "data": "{}"})
            await pipe.execute()
        xadd_rate = tasks / (time.perf_counter() - started)
        await redis.xgroup_create(stream, group, id="0")
        done = 0
        ids: list[str] = []
        started = time.perf_counter()
        while done < tasks:
            pipe = redis.pipeline(transaction=False)
            if ids:
                pipe.xack(stream, group, *ids)
            pipe.xreadgroup(group, "c1", {stream: ">"}, count=batch)
            reply = (await pipe.execute())[-1]
            ids = [entry_id for _, entries in reply for entry_id, _ in entries] if reply else []
            done += len(ids)
        if ids:
            await redis.xack(stream, group, *ids)
        consume_rate = tasks / (time.perf_counter() - started)
    finally:
        await redis.aclose()
    return {"xadd_pipelined_per_s": xadd_rate, "xreadgroup_xack_per_s": consume_rate}


def redis_benchmark(server: RedisServer, requests: int) -> dict[str, float]:
    """``redis-benchmark`` XADD, unpipelined and at pipeline 16 (50 clients, its default)."""
    out: dict[str, float] = {}
    for pipeline in (1, 16):
        done = subprocess.run(
            [
                "redis-benchmark",
                *("-p", str(server.port), "-n", str(requests), "-P", str(pipeline), "--csv"),
                *("XADD", "rb:bench", "*", "kind", "task"),
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        rows = [line.split('","') for line in done.stdout.splitlines() if line.startswith('"XADD')]
        out[f"redis_benchmark_xadd_p{pipeline}_per_s"] = float(rows[0][1]) if rows else 0.0
    return out


RunOnce = Callable[[], Awaitable[dict[str, Any]]]
"""One run of one side: its :func:`run_system` row (``RuntimeError`` or
``subprocess.TimeoutExpired`` when it fails)."""


async def interleaved(
    sides: Mapping[str, RunOnce], repeats: int
) -> tuple[dict[str, Any], dict[str, list[dict[str, Any]]], dict[str, str]]:
    """Every side once per round (order alternating), ``repeats`` rounds after a warm-up.

    A side that fails is reported as failed and not run again. Returns the tasks/s
    :func:`stats` per side (with the load average before and after), each side's rows of
    its recorded rounds (the warm-up left out) and the failures.
    """
    rows: dict[str, list[dict[str, Any]]] = {name: [] for name in sides}
    failed: dict[str, str] = {}
    width = max(map(len, sides))

    def timed(name: str) -> Callable[[], Awaitable[float]]:
        async def once() -> float:
            if name in failed:
                return float("nan")
            try:
                row = await sides[name]()
            except (RuntimeError, subprocess.TimeoutExpired) as exc:
                failed[name] = str(exc)
                print(f"  {name:<{width}} failed: {exc}", flush=True)
                return float("nan")
            rows[name].append(row)
            print(
                f"  {name:<{width}} {row['tasks_per_s']:>9,.0f} tasks/s"
                f"  worker CPU {row['worker_cpu_us_per_task']:5.1f} us/task"
                f"  Redis {row['redis_commands_per_task']:5.2f} commands/task,"
                f" CPU {row['redis_cpu_s']:.2f} s",
                flush=True,
            )
            return float(row["tasks_per_s"])

        return once

    rates = await ainterleave({name: timed(name) for name in sides}, repeats=repeats)
    return rates, {name: found[1:] for name, found in rows.items()}, failed


def side_figures(rate: dict[str, Any], recorded: list[dict[str, Any]]) -> dict[str, Any]:
    """One side's figures over its recorded rounds: tasks/s (``rate``), worker and Redis
    CPU per task (:func:`stats`), Redis commands per task (median), the last round's
    commands by name and configuration."""
    return {
        "tasks_per_s": rate,
        "worker_cpu_us_per_task": stats([r["worker_cpu_us_per_task"] for r in recorded]),
        "redis_commands_per_task": statistics.median(
            r["redis_commands_per_task"] for r in recorded
        ),
        "redis_cpu_us_per_task": stats([r["redis_cpu_s"] / r["tasks"] * 1e6 for r in recorded]),
        "redis_commands": recorded[-1]["redis_commands"],
        "config": recorded[-1]["config"],
    }


def print_side(name: str, figures: dict[str, Any], width: int = 15) -> None:
    """The summary line of one side's :func:`side_figures`."""
    rate, cpu = figures["tasks_per_s"], figures["worker_cpu_us_per_task"]
    print(
        f"{name:<{width}} median {rate['median']:>9,.0f} tasks/s"
        f" (min {rate['min']:,.0f}, max {rate['max']:,.0f})"
        f"  worker CPU median {cpu['median']:5.1f} us/task (min {cpu['min']:.1f})"
        f"  Redis {figures['redis_commands_per_task']:.2f} commands/task,"
        f" CPU median {figures['redis_cpu_us_per_task']['median']:.1f} us/task"
    )


async def measure(args: argparse.Namespace) -> dict[str, Any]:
    """Every figure of this benchmark: the sides interleaved, then the ceiling.

    The sides are the systems, or with ``--ab`` worker_runtime from this tree and from
    the baseline tree.
    """
    systems = [s for s in args.systems.split(",") if s]
    unknown = set(systems) - set(SYSTEMS)
    if unknown:
        raise SystemExit(f"unknown systems: {', '.join(sorted(unknown))}")
    sides: dict[str, tuple[str, Path | None]] = (
        {"worker_runtime": ("worker_runtime", None), "baseline": ("worker_runtime", args.ab)}
        if args.ab
        else {system: (system, None) for system in systems}
    )
    server = start_redis()

    def run_once(system: str, root: Path | None) -> RunOnce:
        return partial(
            run_system,
            server,
            system,
            args.tasks,
            args.concurrency,
            args.timeout,
            results=args.results,
            sessions=args.sessions,
            root=root,
        )

    ceiling: dict[str, float] = {}
    try:
        rates, rows, failed = await interleaved(
            {name: run_once(*side) for name, side in sides.items()}, args.repeats
        )
        if not args.ab:
            ceiling = await raw_loop(server, args.tasks)
            ceiling.update(redis_benchmark(server, max(args.tasks * 5, 100_000)))
    finally:
        server.cleanup()
    out: dict[str, Any] = {
        "machine": machine(),
        "versions": versions(
            "arq", "taskiq", "taskiq-redis", "dramatiq", "celery", "kombu", "redis", "hiredis"
        ),
        "tasks": args.tasks,
        "concurrency": args.concurrency,
        "results": args.results,
        "sessions": args.sessions if args.results else None,
        "repeats": args.repeats,
        "load_before": rates["load_before"],
        "load_after": rates["load_after"],
        "sides": {},
    }
    for name in sides:
        if name in failed:
            out["sides"][name] = {"error": failed[name]}
            continue
        out["sides"][name] = side_figures(rates[name], rows[name])
        print_side(name, out["sides"][name])
    ok = [name for name in sides if name not in failed]
    if ok:
        first, *others = ok
        for other in others:
            print(ratio_line(rates, first, other, unit="tasks/s"))
    print(f"load average {rates['load_before']} -> {rates['load_after']} (shared machine)")
    if not args.ab:
        systems_view(out, rows, failed, ceiling)
    return out


def systems_view(
    out: dict[str, Any],
    rows: dict[str, list[dict[str, Any]]],
    failed: dict[str, str],
    ceiling: dict[str, float],
) -> None:
    """The peers in one row each (``systems``, ``ceiling`` …).

    Each system's figures are the medians over its recorded runs; its tasks/s also
    carries the min (``tasks_per_s_min``); the ratio to the fastest peer is given for
    the medians and for the mins.
    """
    out["systems"] = {}
    for name, recorded in rows.items():
        if name in failed:
            out["systems"][name] = {"error": failed[name]}
            continue
        row = {
            key: statistics.median(r[key] for r in recorded)
            for key, value in recorded[-1].items()
            if isinstance(value, int | float) and not isinstance(value, bool)
        }
        row["tasks_per_s"] = out["sides"][name]["tasks_per_s"]["median"]
        row["tasks_per_s_min"] = out["sides"][name]["tasks_per_s"]["min"]
        row["config"] = recorded[-1]["config"]
        out["systems"][name] = row
    out["ceiling"] = ceiling
    if ceiling:
        print(
            f"ceiling: XREADGROUP COUNT 200 + XACK loop {ceiling['xreadgroup_xack_per_s']:,.0f}/s,"
            f" pipelined XADD (redis-py) {ceiling['xadd_pipelined_per_s']:,.0f}/s,"
            f" redis-benchmark XADD {ceiling['redis_benchmark_xadd_p1_per_s']:,.0f}/s"
            f" (-P 16: {ceiling['redis_benchmark_xadd_p16_per_s']:,.0f}/s)"
        )
    ok = {s: r for s, r in out["systems"].items() if "tasks_per_s" in r}
    peers = {s: r for s, r in ok.items() if s != "worker_runtime"}
    if "worker_runtime" in ok and peers:
        fastest = max(peers, key=lambda s: peers[s]["tasks_per_s"])
        ours = ok["worker_runtime"]
        out["fastest_peer"] = fastest
        out["vs_fastest_peer"] = ratio(ours["tasks_per_s"], peers[fastest]["tasks_per_s"])
        out["vs_fastest_peer_min"] = ratio(
            ours["tasks_per_s_min"], peers[fastest]["tasks_per_s_min"]
        )
        if ceiling:
            out["vs_ceiling"] = ratio(ours["tasks_per_s"], ceiling["xreadgroup_xack_per_s"])
        print(
            f"worker_runtime vs fastest peer ({fastest}): {out['vs_fastest_peer']:.2f}x median, "
            f"{out['vs_fastest_peer_min']:.2f}x min"
        )


def main() -> int:
    """Parse flags, run, print, write JSON."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=20_000)
    parser.add_argument("--concurrency", type=int, default=100)
    parser.add_argument("--systems", default=",".join(SYSTEMS))
    parser.add_argument("--timeout", type=float, default=180.0, help="per system, seconds")
    parser.add_argument(
        "--results", action="store_true", help="store every task's output (see above)"
    )
    parser.add_argument(
        "--sessions", type=int, default=100, help="worker_runtime sessions with --results"
    )
    parser.add_argument(
        "--repeats", type=int, default=1, help="interleaved rounds after one warm-up round"
    )
    parser.add_argument(
        "--ab", type=Path, help="compare worker_runtime with the one in this source tree"
    )
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args()
    if args.ab and not (args.ab / "worker_runtime" / "__init__.py").is_file():
        parser.error(f"--ab: {args.ab} holds no worker_runtime package")
    if args.sessions < 1:
        parser.error("--sessions must be at least 1")
    print(f"machine: {machine()}")
    kind = "no-op tasks, results stored," if args.results else "no-op tasks"
    print(f"{args.tasks:,} {kind} queued before each worker starts")
    print(f"concurrency {args.concurrency} in every system")
    results = asyncio.run(measure(args))
    write_results(args.json, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
