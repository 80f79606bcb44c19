"""Run the worker chaos scenario repeatedly, keep its artifacts, explain any surprise.

    python -m bench.chaos_repeat --dir /tmp/chaos --seeds 7,8,9 --repeat 3
    python -m bench.chaos_repeat --dir /tmp/chaos --seeds 7 --repeat 5 --burn 2

Each run goes to ``DIR/seed<S>-<n>/`` (journal, worker logs) and is left there. On an
unexplained duplicate (or a loss) the run's evidence is printed: the task's journal
lines with the fault lines around them, the stream entries it ran from (with ``-v`` the
workers log each start), and every worker log line naming one of those entry ids or the
task id. ``--burn N`` runs N CPU burners alongside, since the surprises show on a
loaded machine. Exits 1 if any run had one.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from bench.faults import Event, read_journal, worker_chaos
from worker_runtime.embedded import RedisServer

_RUNNING = re.compile(r"running \S+ (\d+-\d+) \(task (\w+)")
"""The DEBUG line of :meth:`Replica.start_task`: entry id, task id."""


def _entry_ids(log_dir: Path, task_id: str) -> list[str]:
    """The stream entry ids the workers ran ``task_id`` from (their DEBUG lines)."""
    found: list[str] = []
    for path in sorted(log_dir.glob("*.log")):
        for match in _RUNNING.finditer(path.read_text(errors="replace")):
            if match.group(2) == task_id and match.group(1) not in found:
                found.append(match.group(1))
    return found


def _around(events: list[Event], task_id: str) -> list[str]:
    """The task's journal lines, and every fault of a process that ran it until its last.

    Faults of the task's runners are shown however far back: a stop journalled long
    before a start may be what explains it.
    """
    marks = [i for i, e in enumerate(events) if e.kind != "F" and e.subject == task_id]
    if not marks:
        return []
    runners = {events[i].pid for i in marks}
    return [
        f"{i:6d} {e.kind} {e.pid} {e.subject}"
        for i, e in enumerate(events[: marks[-1] + 1])
        if e.subject == task_id or (e.kind == "F" and e.pid in runners)
    ]


def _log_lines(log_dir: Path, needles: list[str]) -> list[str]:
    lines = []
    for path in sorted(log_dir.glob("*.log")):
        for line in path.read_text(errors="replace").splitlines():
            if any(n in line for n in needles):
                lines.append(f"{path.stem}: {line}")
    return lines


async def one_run(workdir: Path, seed: int, tasks: int, verbose: bool) -> bool:
    """One scenario into ``workdir``; True when it had an unexplained duplicate or a loss."""
    if workdir.exists():
        shutil.rmtree(workdir)
    workdir.mkdir(parents=True)
    server = RedisServer().start()
    try:
        result = await worker_chaos(server.url, workdir, tasks=tasks, seed=seed, verbose=verbose)
    finally:
        server.cleanup()
    t = result.tally
    load = os.getloadavg()
    print(
        f"{workdir.name}: faults {result.fault_summary}; completed {t.completed}/{t.submitted}, "
        f"extra runs {t.extra_runs} {dict(t.explained_by)}, lost {t.lost}, "
        f"unexplained {len(t.unexplained)}, {result.seconds} s, "
        f"load {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}",
        flush=True,
    )
    events = read_journal(workdir / "journal.txt")
    pids = {e.pid for e in events if e.kind != "F"}
    for task_id in t.unexplained:
        ids = _entry_ids(workdir / "logs", task_id)
        print(f"  unexplained {task_id}: entries {ids}")
        for line in _around(events, task_id):
            print(f"    {line}")
        needles = [task_id, *ids]
        for line in _log_lines(workdir / "logs", needles):
            print(f"    {line}")
    if t.unexplained:
        print(f"  worker pids seen: {sorted(pids)}")
    return bool(t.unexplained or t.lost)


def main(argv: list[str] | None = None) -> int:
    """Run the scenario ``--repeat`` times per seed."""
    parser = argparse.ArgumentParser(prog="python -m bench.chaos_repeat", description=__doc__)
    parser.add_argument("--dir", type=Path, required=True, help="where runs are kept")
    parser.add_argument("--seeds", default="7", help="comma-separated seeds")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--tasks", type=int, default=2000)
    parser.add_argument("--burn", type=int, default=0, help="CPU burner processes alongside")
    parser.add_argument("-v", "--verbose", action="store_true", help="workers log at DEBUG")
    args = parser.parse_args(argv)
    burners = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.burn)
    ]
    bad = False
    try:
        for n in range(args.repeat):
            for seed in (int(s) for s in args.seeds.split(",")):
                workdir = args.dir / f"seed{seed}-{n}"
                bad |= asyncio.run(one_run(workdir, seed, args.tasks, args.verbose))
    finally:
        for proc in burners:
            proc.kill()
            proc.wait()
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
