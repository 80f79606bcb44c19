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
from pathlib import Path

from bench.common import machine
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


async def _run_all(args: argparse.Namespace, work: Path) -> list[ScenarioResult]:
    results: list[ScenarioResult] = []
    if args.only in ("all", "redis"):
        results += await _redis_faults(args, work)
    if args.only in ("all", "chaos"):
        print(f"worker chaos over {args.chaos_tasks} tasks ...", file=sys.stderr)
        (work / "chaos").mkdir()
        server = RedisServer().start()
        try:
            results.append(
                await worker_chaos(
                    server.url, work / "chaos", tasks=args.chaos_tasks, seed=args.seed, timeout=600
                )
            )
        finally:
            server.cleanup()
    if args.only in ("all", "delivery"):
        results += await _delivery_faults(args, work)
    if args.only in ("all", "outages"):
        results += await _outage_faults(args, work)
    if args.only in ("all", "leader"):
        results += await _leader_faults(args, work)
    if args.only in ("all", "sentinel"):
        from bench.faults_sentinel import sentinel_failover

        print("Redis Sentinel: SENTINEL FAILOVER, then SIGKILL of the primary ...", file=sys.stderr)
        (work / "sentinel").mkdir()
        results.append(await sentinel_failover(work / "sentinel", tasks=args.sentinel_tasks))
    return results


async def _leader_faults(args: argparse.Namespace, work: Path) -> list[ScenarioResult]:
    for name in ("lp", "rehome", "drain", "stop", "forged"):
        (work / name).mkdir()
    results = []
    print("leader partitioned from Redis, lease 3 s ...", file=sys.stderr)
    results.append(await leader_partition(work / "lp", lease_s=3.0, tasks=200))
    print(f"leader SIGKILL while re-homing {args.rehome_tasks} direct tasks ...", file=sys.stderr)
    server = RedisServer().start()
    try:
        results.append(
            await rehome_kill(
                server.url,
                work / "rehome",
                tasks=args.rehome_tasks,
                kill_after=2_000,
                run_after=True,
            )
        )
    finally:
        server.cleanup()
    for drain, sub in ((True, "drain"), (False, "stop")):
        print(f"stable-id worker leaving for good ({sub}), retention 15 s ...", file=sys.stderr)
        results.append(
            await direct_tasks_stable_stop(
                work / sub,
                tasks=20,
                sleep=1.0 if drain else 3.0,
                retention=15.0,
                janitor_every=3.0,
                drain=drain,
            )
        )
    print("forged pushes on a busy worker ...", file=sys.stderr)
    results.append(await forged_pushes(work / "forged", tasks=20, forged=20))
    return results


async def _redis_faults(args: argparse.Namespace, work: Path) -> list[ScenarioResult]:
    for name in ("restart", "restart-np", "pause"):
        (work / name).mkdir()
    results = []
    print("Redis SIGKILL + restart with appendfsync always ...", file=sys.stderr)
    results.append(
        await redis_restart(
            work / "restart",
            tasks_before=args.restart_tasks,
            tasks_after=args.restart_tasks // 4,
            persistent=True,
        )
    )
    print("Redis SIGKILL + restart without persistence ...", file=sys.stderr)
    results.append(
        await redis_restart(
            work / "restart-np",
            tasks_before=args.restart_tasks // 2,
            tasks_after=args.restart_tasks // 4,
            persistent=False,
        )
    )
    print("Redis SIGSTOP ...", file=sys.stderr)
    results.append(await redis_pause(work / "pause", tasks=args.restart_tasks))
    return results


async def _delivery_faults(args: argparse.Namespace, work: Path) -> list[ScenarioResult]:
    for name in ("oom", "partition", "poison", "rolling", "direct"):
        (work / name).mkdir()
    results = []
    print(f"Redis out of memory, {args.oom_tasks} fail-once tasks ...", file=sys.stderr)
    results.append(await redis_oom(work / "oom", tasks=args.oom_tasks, oom_s=7.0))
    print("network partition + SIGTERM ...", file=sys.stderr)
    results.append(await partition(work / "partition", tasks=20, grace=5.0, sleep=8.0))
    print("poison task with a stable --instance ...", file=sys.stderr)
    results.append(await poison_stable_instance(work / "poison", good=20, max_deliveries=3))
    print("rolling restarts of a long task ...", file=sys.stderr)
    results.append(await rolling_restarts(work / "rolling", restarts=3, max_deliveries=2))
    print("SIGTERM of a worker with direct tasks ...", file=sys.stderr)
    results.append(await direct_tasks_sigterm(work / "direct", tasks=20, sleep=3.0))
    return results


async def _outage_faults(args: argparse.Namespace, work: Path) -> list[ScenarioResult]:
    for name in ("stops", "oom-long", "stall", "aof", "wait"):
        (work / name).mkdir()
    results = []
    print(f"graceful stops of a {args.backlog_tasks}-task backlog ...", file=sys.stderr)
    results.append(await graceful_stops(work / "stops", tasks=args.backlog_tasks, stops=20))
    print("Redis out of memory under long tasks ...", file=sys.stderr)
    results.append(await oom_long_tasks(work / "oom-long", tasks=8, sleep=6.0, oom_s=5.0))
    print("SIGSTOP of a worker past its lease ...", file=sys.stderr)
    results.append(await stalled_worker(work / "stall", tasks=10, sleep=4.0, stall_s=4.0))
    print("AOF rewrite + Redis restart ...", file=sys.stderr)
    results.append(await aof_restart_depth(work / "aof", before=2000, after=500))
    print("Redis restart under submit --wait clients ...", file=sys.stderr)
    results.append(await submit_wait_restart(work / "wait", clients=6, late=2, down_s=1.0))
    return results


def _outage_notes(r: ScenarioResult) -> list[str]:
    """The observations of :mod:`bench.faults_outages` scenarios worth a line."""
    notes = []
    if "dead_never_run" in r.notes:
        notes.append(
            f"{r.name}: dead-lettered without ever running: {r.notes['dead_never_run']} "
            f"(completed before the final burst: {r.notes['done_before_burst']:,})"
        )
    if "double_results" in r.notes:
        notes.append(
            f"{r.name}: tasks with two results on their session stream: "
            f"{r.notes['double_results']} (the duplicates counted are the handlers the stopped "
            "process had started; their outcome there was dropped, not acknowledged)"
        )
    if "redis_lag" in r.notes:
        notes.append(
            f"{r.name}: Redis reported lag {r.notes['redis_lag']} on the consumed stream; "
            f"depth shown {r.notes['depth']}, `--max-depth 0` exit {r.notes['max_depth_0_exit']}, "
            f"run_until_idle returned after {r.notes['run_until_idle_s']} s"
        )
    if "client_exit_codes" in r.notes:
        notes.append(
            f"{r.name}: client exit codes {r.notes['client_exit_codes']}, "
            f"{r.notes['clients_with_result']} printed their result"
        )
    return notes


def table(results: list[ScenarioResult]) -> str:
    """The results as Markdown."""
    rows = [
        "| scenario | faults injected | submitted | completed | duplicated (extra runs) "
        "| lost | time |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    notes = []
    for r in results:
        t = r.tally
        why = ", ".join(f"{k} {n}" for k, n in sorted(t.explained_by.items()))
        dup = f"{t.duplicated} ({t.extra_runs}{': ' + why if why else ''})"
        rows.append(
            f"| {r.name} | {r.fault_summary} | {t.submitted:,} | {t.completed:,} | {dup} "
            f"| {t.lost} | {r.seconds:.0f} s |"
        )
        if "before_lost_with_data" in r.notes:
            notes.append(
                f"{r.name}: counts only tasks submitted after the restart; "
                f"{r.notes['before_lost_with_data']} submitted before it were never started "
                "and went with the data (no persistence), as expected."
            )
        if t.retries:
            notes.append(
                f"{r.name}: {t.retries} re-runs followed a failure the handler raised on "
                "purpose (retries, not duplicates)"
            )
        if "kill_to_new_primary_s" in r.notes:
            notes.append(
                f"{r.name}: the sentinels named a new primary "
                f"{r.notes['kill_to_new_primary_s']} s after the SIGKILL "
                "(down-after-milliseconds 1000)"
            )
        if "stop_s" in r.notes:
            notes.append(
                f"{r.name}: the partitioned worker stopped {r.notes['stop_s']} s after SIGTERM "
                f"(exit {r.notes['exit_code']}); another worker reran the tasks it had cut"
            )
        if "poison_runs" in r.notes:
            notes.append(
                f"{r.name}: the poison task (not counted above) ran {r.notes['poison_runs']} "
                f"times, then was dead-lettered: {r.notes['poison_dead_lettered']}; the "
                "duplicate counted is the poison itself"
            )
        if "old_stream_pending" in r.notes:
            notes.append(
                f"{r.name}: entries left pending on the stopped worker's own stream: "
                f"{r.notes['old_stream_pending']}"
            )
        notes += _outage_notes(r)
        if r.notes.get("pending_after"):
            notes.append(f"{r.name}: {r.notes['pending_after']} entries left PENDING")
        if "step_down_s" in r.notes:
            notes.append(
                f"{r.name}: the cut-off leader stopped its modules {r.notes['step_down_s']} s "
                f"after the cut, its successor was elected at {r.notes['successor_s']} s; "
                f"janitor writes of the old leader after the cut: {r.notes['janitor_writes_of_a']}"
            )
        if "moved_before_kill" in r.notes:
            notes.append(
                f"{r.name}: killed after {r.notes['moved_before_kill']:,} moves; the type's "
                f"stream then held {r.notes['type_stream_entries']:,} entries "
                f"({r.notes['distinct_task_ids']:,} distinct, {r.notes['missing']} missing)"
            )
        if "all_done_after_s" in r.notes:
            notes.append(
                f"{r.name}: re-homed {r.notes.get('rehomed_after_s', '?')} s after the worker "
                f"left, all run {r.notes['all_done_after_s']} s after; left on its stream: "
                f"{r.notes['left_on_own_stream']}"
            )
        if "refused_logged" in r.notes:
            notes.append(
                f"{r.name}: refused and logged {r.notes['refused_logged']}; lifecycle after: "
                f"{r.notes['lifecycle_after']}"
            )
        if t.unexplained:
            notes.append(f"{r.name}: {len(t.unexplained)} UNEXPLAINED duplicate(s)")
    return "\n".join(rows + [""] + [f"* {n}" for n in notes])


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
        choices=["all", "redis", "chaos", "delivery", "outages", "leader", "sentinel"],
        default="all",
        help="a subset",
    )
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="faults-") as tmp:
        results = asyncio.run(_run_all(args, Path(tmp)))
    if args.only == "outages":
        print(f"Outage and ownership faults, {machine()}; see bench/faults_outages.py.")
        print(
            "Command: python -m bench.faults_report --only outages "
            f"--backlog-tasks {args.backlog_tasks}\n"
        )
    elif args.only == "leader":
        print(f"Leader and control faults, {machine()}; see bench/faults_delivery.py.")
        print(
            f"Command: python -m bench.faults_report --only leader --rehome-tasks "
            f"{args.rehome_tasks}\n"
        )
    elif args.only == "delivery":
        print(f"Delivery faults, {machine()}; worker processes as in bench/faults_delivery.py.")
        print(
            f"Command: python -m bench.faults_report --only delivery --oom-tasks {args.oom_tasks}\n"
        )
    else:
        print(f"Fault injection, {machine()}; 3 worker processes, 1 replica each, concurrency 10.")
        print(
            f"Command: python -m bench.faults_report --chaos-tasks {args.chaos_tasks} "
            f"--restart-tasks {args.restart_tasks} --seed {args.seed} "
            f"--oom-tasks {args.oom_tasks} --backlog-tasks {args.backlog_tasks} "
            f"--rehome-tasks {args.rehome_tasks} --sentinel-tasks {args.sentinel_tasks} "
            f"--only {args.only}\n"
        )
    print(table(results))
    bad = any(r.tally.lost or r.tally.unexplained or r.notes.get("pending_after") for r in results)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
