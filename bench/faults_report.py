"""The closing table: faults injected, tasks submitted, completed, duplicated and lost.

    python -m bench.faults_report                  # default sizes (a few minutes)
    python -m bench.faults_report --chaos-tasks 2000 --restart-tasks 300   # quicker
    python -m bench.faults_report --only delivery  # OOM, partition, poison, SIGTERM rows
    python -m bench.faults_report --only outages   # graceful stops, OOM, SIGSTOP, AOF, --wait
    python -m bench.faults_report --only leader    # leader faults, gone workers, forged pushes
    python -m bench.faults_report --only sentinel  # SENTINEL FAILOVER, then SIGKILL of the primary

Runs the scenarios of :mod:`bench.faults` against real ``worker-runtime`` processes and
real ``redis-server`` instances, at larger sizes than ``tests/reliability`` does, and
prints one Markdown table. Exits 1 when a task was lost or a duplicate is unexplained.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from bench.common import machine, markdown_table
from bench.faults import ScenarioResult, redis_pause, redis_restart, worker_chaos
from bench.faults_delivery import (
    direct_tasks_sigterm,
    direct_tasks_stable_stop,
    forged_pushes,
    leader_partition,
    partition,
    poison_stable_instance,
    redis_oom,
    rehome_kill,
    rolling_restarts,
)
from bench.faults_outages import (
    aof_restart_depth,
    graceful_stops,
    oom_long_tasks,
    stalled_worker,
    submit_wait_restart,
)
from worker_runtime.embedded import RedisServer

Scenario = Callable[[argparse.Namespace, Path], Awaitable[ScenarioResult]]
"""One row of the table: the scenario run with the report's sizes in its directory."""


async def _on_own_server(run: Callable[[str], Awaitable[ScenarioResult]]) -> ScenarioResult:
    server = RedisServer().start()
    try:
        return await run(server.url)
    finally:
        server.cleanup()


async def _sentinel(a: argparse.Namespace, d: Path) -> ScenarioResult:
    from bench.faults_sentinel import sentinel_failover  # needs tests/sentinel.py

    return await sentinel_failover(d, tasks=a.sentinel_tasks)


GROUPS: dict[str, list[tuple[str, str, Scenario]]] = {
    # --only NAME: its rows as (directory, what is printed while it runs, scenario).
    "redis": [
        ("restart", "Redis SIGKILL + restart with appendfsync always",
         lambda a, d: redis_restart(d, tasks_before=a.restart_tasks,
                                    tasks_after=a.restart_tasks // 4, persistent=True)),
        ("restart-np", "Redis SIGKILL + restart without persistence",
         lambda a, d: redis_restart(d, tasks_before=a.restart_tasks // 2,
                                    tasks_after=a.restart_tasks // 4, persistent=False)),
        ("pause", "Redis SIGSTOP", lambda a, d: redis_pause(d, tasks=a.restart_tasks)),
    ],
    "chaos": [
        ("chaos", "worker chaos over {a.chaos_tasks} tasks",
         lambda a, d: _on_own_server(lambda url: worker_chaos(
             url, d, tasks=a.chaos_tasks, seed=a.seed, timeout=600))),
    ],
    "delivery": [
        ("oom", "Redis out of memory, {a.oom_tasks} fail-once tasks",
         lambda a, d: redis_oom(d, tasks=a.oom_tasks, oom_s=7.0)),
        ("partition", "network partition + SIGTERM",
         lambda a, d: partition(d, tasks=20, grace=5.0, sleep=8.0)),
        ("poison", "poison task with a stable --instance",
         lambda a, d: poison_stable_instance(d, good=20, max_deliveries=3)),
        ("rolling", "rolling restarts of a long task",
         lambda a, d: rolling_restarts(d, restarts=3, max_deliveries=2)),
        ("direct", "SIGTERM of a worker with direct tasks",
         lambda a, d: direct_tasks_sigterm(d, tasks=20, sleep=3.0)),
    ],
    "outages": [
        ("stops", "graceful stops of a {a.backlog_tasks}-task backlog",
         lambda a, d: graceful_stops(d, tasks=a.backlog_tasks, stops=20)),
        ("oom-long", "Redis out of memory under long tasks",
         lambda a, d: oom_long_tasks(d, tasks=8, sleep=6.0, oom_s=5.0)),
        ("stall", "SIGSTOP of a worker past its lease",
         lambda a, d: stalled_worker(d, tasks=10, sleep=4.0, stall_s=4.0)),
        ("aof", "AOF rewrite + Redis restart",
         lambda a, d: aof_restart_depth(d, before=2000, after=500)),
        ("wait", "Redis restart under submit --wait clients",
         lambda a, d: submit_wait_restart(d, clients=6, late=2, down_s=1.0)),
    ],
    "leader": [
        ("lp", "leader partitioned from Redis, lease 3 s",
         lambda a, d: leader_partition(d, lease_s=3.0, tasks=200)),
        ("rehome", "leader SIGKILL while re-homing {a.rehome_tasks} direct tasks",
         lambda a, d: _on_own_server(lambda url: rehome_kill(
             url, d, tasks=a.rehome_tasks, kill_after=2_000, run_after=True))),
        ("drain", "stable-id worker leaving for good (drain), retention 15 s",
         lambda a, d: direct_tasks_stable_stop(d, tasks=20, sleep=1.0, retention=15.0,
                                               janitor_every=3.0, drain=True)),
        ("stop", "stable-id worker leaving for good (stop), retention 15 s",
         lambda a, d: direct_tasks_stable_stop(d, tasks=20, sleep=3.0, retention=15.0,
                                               janitor_every=3.0, drain=False)),
        ("forged", "forged pushes on a busy worker",
         lambda a, d: forged_pushes(d, tasks=20, forged=20)),
    ],
    "sentinel": [
        ("sentinel", "Redis Sentinel: SENTINEL FAILOVER, then SIGKILL of the primary", _sentinel),
    ],
}  # fmt: skip


async def _run_all(args: argparse.Namespace, work: Path) -> list[ScenarioResult]:
    results: list[ScenarioResult] = []
    for group, rows in GROUPS.items():
        if args.only not in ("all", group):
            continue
        for directory, message, scenario in rows:
            print(message.format(a=args) + " ...", file=sys.stderr)
            (work / directory).mkdir()
            results.append(await scenario(args, work / directory))
    return results


NOTES: list[tuple[str, Callable[[dict[str, Any]], str]]] = [
    # (a ScenarioResult.notes key, the line it gives): one line per note a row has.
    ("before_lost_with_data",
     lambda n: f"counts only tasks submitted after the restart; {n['before_lost_with_data']} "
     "submitted before it were never started and went with the data (no persistence), as "
     "expected."),
    ("kill_to_new_primary_s",
     lambda n: f"the sentinels named a new primary {n['kill_to_new_primary_s']} s after the "
     "SIGKILL (down-after-milliseconds 1000)"),
    ("stop_s",
     lambda n: f"the partitioned worker stopped {n['stop_s']} s after SIGTERM (exit "
     f"{n['exit_code']}); another worker reran the tasks it had cut"),
    ("poison_runs",
     lambda n: f"the poison task (not counted above) ran {n['poison_runs']} times, then was "
     f"dead-lettered: {n['poison_dead_lettered']}; the duplicate counted is the poison itself"),
    ("old_stream_pending",
     lambda n: "entries left pending on the stopped worker's own stream: "
     f"{n['old_stream_pending']}"),
    ("dead_never_run",
     lambda n: f"dead-lettered without ever running: {n['dead_never_run']} (completed before "
     f"the final burst: {n['done_before_burst']:,})"),
    ("double_results",
     lambda n: f"tasks with two results on their session stream: {n['double_results']} (the "
     "duplicates counted are the handlers the stopped process had started; their outcome "
     "there was dropped, not acknowledged)"),
    ("redis_lag",
     lambda n: f"Redis reported lag {n['redis_lag']} on the consumed stream; depth shown "
     f"{n['depth']}, `--max-depth 0` exit {n['max_depth_0_exit']}, run_until_idle returned "
     f"after {n['run_until_idle_s']} s"),
    ("client_exit_codes",
     lambda n: f"client exit codes {n['client_exit_codes']}, {n['clients_with_result']} "
     "printed their result"),
    ("step_down_s",
     lambda n: f"the cut-off leader stopped its modules {n['step_down_s']} s after the cut, "
     f"its successor was elected at {n['successor_s']} s; janitor writes of the old leader "
     f"after the cut: {n['janitor_writes_of_a']}"),
    ("moved_before_kill",
     lambda n: f"killed after {n['moved_before_kill']:,} moves; the type's stream then held "
     f"{n['type_stream_entries']:,} entries ({n['distinct_task_ids']:,} distinct, "
     f"{n['missing']} missing)"),
    ("all_done_after_s",
     lambda n: f"re-homed {n.get('rehomed_after_s', '?')} s after the worker left, all run "
     f"{n['all_done_after_s']} s after; left on its stream: {n['left_on_own_stream']}"),
    ("refused_logged",
     lambda n: f"refused and logged {n['refused_logged']}; lifecycle after: "
     f"{n['lifecycle_after']}"),
]  # fmt: skip


HEADER = ["scenario", "faults injected", "submitted", "completed", "duplicated (extra runs)"]
HEADER += ["lost", "time"]
"""The table's columns; those after the first two are counts (right-aligned)."""


def table(results: list[ScenarioResult]) -> str:
    """The results as Markdown."""
    rows: list[list[str]] = []
    notes = []
    for r in results:
        t = r.tally
        why = ", ".join(f"{k} {n}" for k, n in sorted(t.explained_by.items()))
        dup = f"{t.duplicated} ({t.extra_runs}{': ' + why if why else ''})"
        counts = [f"{t.submitted:,}", f"{t.completed:,}", dup, str(t.lost), f"{r.seconds:.0f} s"]
        rows.append([r.name, r.fault_summary, *counts])
        lines = [line(r.notes) for key, line in NOTES if key in r.notes]
        if t.retries:
            lines.append(
                f"{t.retries} re-runs followed a failure the handler raised on purpose "
                "(retries, not duplicates)"
            )
        if r.notes.get("pending_after"):
            lines.append(f"{r.notes['pending_after']} entries left PENDING")
        if t.unexplained:
            lines.append(f"{len(t.unexplained)} UNEXPLAINED duplicate(s)")
        notes += [f"{r.name}: {line}" for line in lines]
    table = markdown_table(HEADER, rows, right=len(HEADER) - 2)
    return "\n".join([*table, *(f"* {n}" for n in notes)])


HEADINGS = {
    # --only NAME: the heading above the table, and the flags its command shows.
    "outages": ("Outage and ownership faults, {machine}; see bench/faults_outages.py.",
                "--only outages --backlog-tasks {a.backlog_tasks}"),
    "leader": ("Leader and control faults, {machine}; see bench/faults_delivery.py.",
               "--only leader --rehome-tasks {a.rehome_tasks}"),
    "delivery": ("Delivery faults, {machine}; worker processes as in bench/faults_delivery.py.",
                 "--only delivery --oom-tasks {a.oom_tasks}"),
}  # fmt: skip
EVERY_ROW = (
    "Fault injection, {machine}; 3 worker processes, 1 replica each, concurrency 10.",
    "--chaos-tasks {a.chaos_tasks} --restart-tasks {a.restart_tasks} --seed {a.seed} "
    "--oom-tasks {a.oom_tasks} --backlog-tasks {a.backlog_tasks} --rehome-tasks "
    "{a.rehome_tasks} --sentinel-tasks {a.sentinel_tasks} --only {a.only}",
)


def main(argv: list[str] | None = None) -> int:
    """Run every scenario and print the table."""
    parser = argparse.ArgumentParser(prog="python -m bench.faults_report", description=__doc__)
    parser.add_argument("--chaos-tasks", type=int, default=10_000)
    parser.add_argument("--restart-tasks", type=int, default=1_000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--oom-tasks", type=int, default=40)
    parser.add_argument("--rehome-tasks", type=int, default=30_000)
    parser.add_argument(
        "--backlog-tasks", type=int, default=20_000, help="backlog of the graceful-stop row"
    )
    parser.add_argument("--sentinel-tasks", type=int, default=600)
    parser.add_argument(
        "--only",
        choices=["all", *GROUPS],
        default="all",
        help="a subset",
    )
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="faults-") as tmp:
        results = asyncio.run(_run_all(args, Path(tmp)))
    heading, flags = HEADINGS.get(args.only, EVERY_ROW)
    print(heading.format(machine=machine()))
    print(f"Command: python -m bench.faults_report {flags.format(a=args)}\n")
    print(table(results))
    bad = any(r.tally.lost or r.tally.unexplained or r.notes.get("pending_after") for r in results)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
