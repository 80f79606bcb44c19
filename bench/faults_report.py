"""The closing table: faults injected, tasks submitted, completed, duplicated and lost.

    python -m bench.faults_report                  # default sizes (a few minutes)
    python -m bench.faults_report --chaos-tasks 2000 --restart-tasks 300   # quicker

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
from worker_runtime.embedded import RedisServer


async def _run_all(args: argparse.Namespace, work: Path) -> list[ScenarioResult]:
    for name in ("restart", "restart-np", "pause", "chaos"):
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
    print(f"worker chaos over {args.chaos_tasks} tasks ...", file=sys.stderr)
    server = RedisServer().start()
    try:
        results.append(
            await worker_chaos(
                server.url, work / "chaos", tasks=args.chaos_tasks, seed=args.seed, timeout=600
            )
        )
    finally:
        server.cleanup()
    return results


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
        if t.unexplained:
            notes.append(f"{r.name}: {len(t.unexplained)} UNEXPLAINED duplicate(s)")
    return "\n".join(rows + [""] + [f"* {n}" for n in notes])


def main(argv: list[str] | None = None) -> int:
    """Run every scenario and print the table."""
    parser = argparse.ArgumentParser(prog="python -m bench.faults_report", description=__doc__)
    parser.add_argument("--chaos-tasks", type=int, default=10_000)
    parser.add_argument("--restart-tasks", type=int, default=1_000)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="faults-") as tmp:
        results = asyncio.run(_run_all(args, Path(tmp)))
    print(f"Fault injection, {machine()}; 3 worker processes, 1 replica each, concurrency 10.")
    print(
        f"Command: python -m bench.faults_report --chaos-tasks {args.chaos_tasks} "
        f"--restart-tasks {args.restart_tasks} --seed {args.seed}\n"
    )
    print(table(results))
    bad = any(r.tally.lost or r.tally.unexplained for r in results)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
