"""Run every side-by-side benchmark once and write BENCHMARKS.md (``make bench``).

    .venv/bin/python bench/run_all.py [--quick] [--only NAME,...] [--results DIR]

Each benchmark runs as its own process (``python -m bench.NAME ... --json FILE``), with
its output shown live and kept for the report. ``--quick`` shrinks every size and
repeats twice, so the whole suite finishes in minutes (to check the plumbing, not for
figures). ``throughput_results`` runs against the previous runtime checked out with
``git worktree add --detach`` in a temporary directory (removed afterwards).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import ROOT, redis_version, versions
from bench.report import Run, render

BASELINE = "{baseline}"
"""Stands for the previous runtime's source tree in a benchmark's arguments."""

BASELINE_REV = "dbb524c"
"""The runtime before task outputs were stored per session by one script: the first
parent of the merge that brought it (7daf4bc, ``git log --oneline --
worker_runtime/batcher.py``). ``throughput_results`` compares this tree against it."""

LISTING = ("--delay-sizes", "1000", "--table")
"""The ~1 ms link only at the size its target names (``rq info`` makes ~2 round trips
per worker: 10,000 workers would take half a minute a run); ``--format table`` is timed
against ``rq info`` too."""

BENCHMARKS: dict[str, tuple[str, list[str], list[str]]] = {
    # name: (module, full-size arguments, --quick arguments). Sizes and repeats are the
    # ones bench/targets.py names; every comparison runs interleaved, 5 recorded rounds.
    "fleet_listing": (
        "bench.fleet_listing",
        [*("--sizes", "100,1000,10000", "--repeats", "5", "--delay-ms", "1"), *LISTING],
        [*("--sizes", "100,1000", "--repeats", "2", "--delay-ms", "1"), *LISTING],
    ),
    "console_stall": (
        "bench.console_stall",
        ["--live", "10000", "--static", "100000", "--refreshes", "5", "--repeats", "5"],
        ["--live", "1000", "--static", "5000", "--refreshes", "2", "--repeats", "2"],
    ),
    # Nine rounds: two processes share two cores, and whether they land on the same one
    # moved a single run by up to 1.8x (either side); the median of nine holds still.
    "throughput_results": (
        "bench.throughput",
        ["--results", "--ab", BASELINE, "--tasks", "20000", "--repeats", "9"],
        ["--results", "--ab", BASELINE, "--tasks", "2000", "--repeats", "2"],
    ),
    # The peers interleaved: 10,000 tasks a run keeps six rounds of the slowest peers
    # (~1,000 tasks/s) to a few minutes.
    "throughput": (
        "bench.throughput",
        ["--tasks", "10000", "--concurrency", "100", "--repeats", "5"],
        ["--tasks", "2000", "--concurrency", "100", "--repeats", "2"],
    ),
    "control": (
        "bench.control_latency",
        ["--commands", "500", "--pull-commands", "100", "--workers", "1,100"],
        [
            "--commands",
            "100",
            "--pull-commands",
            "10",
            "--workers",
            "1,100",
            "--celery-commands",
            "20",
        ],
    ),
    "heartbeat": (
        "bench.heartbeat_load",
        ["--replicas", "10000", "--instances", "100", "--window", "20"],
        ["--replicas", "2000", "--instances", "20", "--window", "5"],
    ),
    "envelope_throughput": (
        "bench.envelope_throughput",
        ["--tasks", "20000", "--repeats", "5"],
        ["--tasks", "2000", "--repeats", "2"],
    ),
}


def environment() -> dict[str, str]:
    """Machine and software, for the report."""
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = "unknown"
    try:
        kb = int(Path("/proc/meminfo").read_text().split()[1])
        mem = f"{kb / 2**20:.1f} GiB"
    except (OSError, ValueError, IndexError):
        pass
    pkgs = versions(
        "redis", "hiredis", "pydantic", "textual", "rich", "rq", "arq", "taskiq",
        "taskiq-redis", "dramatiq", "celery", "kombu",
    )  # fmt: skip
    return {
        "CPU": f"{cpu}, {os.cpu_count()} cores",
        "memory": mem,
        "OS": f"{platform.system()} {platform.release()}",
        "Python": platform.python_version(),
        "Redis": redis_version(),
        "packages": ", ".join(f"{k} {v}" for k, v in pkgs.items()),
    }


def run_one(name: str, module: str, args: list[str], json_path: Path) -> tuple[str, str, int]:
    """Run one benchmark, echoing its output; returns (command, output, exit code)."""
    cmd = [sys.executable, "-m", module, *args, "--json", str(json_path)]
    shown = " ".join(shlex.quote(c) for c in [".venv/bin/python", "-m", module, *args])
    print(f"\n=== {name}: {shown}", flush=True)
    proc = subprocess.Popen(
        cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    assert proc.stdout is not None
    lines: list[str] = []
    for line in proc.stdout:
        print(line, end="", flush=True)
        lines.append(line)
    return shown, "".join(lines), proc.wait()


def baseline_tree(rev: str, parent: Path) -> tuple[Path | None, str]:
    """A detached ``git worktree`` of ``rev`` under ``parent``; (path, why not)."""
    path = parent / "baseline"
    done = subprocess.run(
        ["git", "worktree", "add", "--detach", str(path), rev],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0 or not (path / "worker_runtime" / "__init__.py").is_file():
        lines = (done.stderr or done.stdout).strip().splitlines()
        return None, f"git worktree add {rev}: {lines[-1] if lines else done.returncode}"
    return path, ""


def drop_tree(path: Path) -> None:
    """Remove a worktree made by :func:`baseline_tree` (and git's record of it)."""
    subprocess.run(
        ["git", "worktree", "remove", "--force", str(path)], cwd=ROOT, capture_output=True
    )
    subprocess.run(["git", "worktree", "prune"], cwd=ROOT, capture_output=True)


def report_path(results_dir: Path, *, quick: bool, only: bool, output: str | None) -> Path:
    """Where a run writes its report: only a full run replaces the repository's
    BENCHMARKS.md; a quick or a partial one (``--only``) is written beside its figures."""
    if output:
        return Path(output)
    if quick:
        return results_dir / "BENCHMARKS-quick.md"
    if only:
        return results_dir / "BENCHMARKS-only.md"
    return ROOT / "BENCHMARKS.md"


def main() -> int:
    """Run the suite; write the JSON figures and BENCHMARKS.md."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (checks the scripts)")
    parser.add_argument("--only", help="comma-separated benchmark names")
    parser.add_argument(
        "--dry-run", action="store_true", help="print the commands it would run, run nothing"
    )
    parser.add_argument("--results", default=str(ROOT / "bench" / "results"))
    parser.add_argument(
        "--output",
        help="where to write the report (BENCHMARKS.md; with --quick, BENCHMARKS-quick.md "
        "in the results directory: quick figures are not figures; with --only, "
        "BENCHMARKS-only.md there: a partial run does not replace the whole report)",
    )
    parser.add_argument(
        "--baseline-rev",
        default=BASELINE_REV,
        help="the previous runtime for throughput_results (a git revision)",
    )
    args = parser.parse_args()
    if shutil.which("redis-server") is None:
        print("redis-server is not installed (make redis-server)", file=sys.stderr)
        return 2
    names = list(BENCHMARKS) if not args.only else args.only.split(",")
    unknown = [n for n in names if n not in BENCHMARKS]
    if unknown:
        print(f"unknown benchmarks: {', '.join(unknown)}", file=sys.stderr)
        return 2
    if args.dry_run:
        for name in names:
            module, full, quick = BENCHMARKS[name]
            shown = " ".join(shlex.quote(a) for a in (quick if args.quick else full))
            print(f"{name}: .venv/bin/python -m {module} {shown}")
        print(f"{BASELINE}: git worktree add --detach <tmp> {args.baseline_rev}")
        return 0
    results_dir = Path(args.results)
    results_dir.mkdir(parents=True, exist_ok=True)
    load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    run = Run(
        results={},
        started=datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z"),
        load_before=load,
        environment=environment(),
    )
    print(f"load average before: {load} (figures are only meaningful on a quiet machine)")
    started = time.perf_counter()
    scratch = Path(tempfile.mkdtemp(prefix="bench-"))
    baseline: Path | None = None
    try:
        for name in names:
            module, full, quick = BENCHMARKS[name]
            arguments = list(quick if args.quick else full)
            if BASELINE in arguments:
                if baseline is None:
                    baseline, why = baseline_tree(args.baseline_rev, scratch)
                    if baseline is None:
                        run.errors[name] = why
                        print(f"\n=== {name}: skipped: {why}", flush=True)
                        continue
                arguments = [str(baseline) if a == BASELINE else a for a in arguments]
            path = results_dir / f"{name}.json"
            path.unlink(missing_ok=True)
            began = time.perf_counter()
            shown, output, code = run_one(name, module, arguments, path)
            run.durations[name] = time.perf_counter() - began
            print(f"=== {name}: {run.durations[name] / 60:.1f} min", flush=True)
            run.commands[name] = shown
            run.outputs[name] = output
            if code == 0 and path.exists():
                run.results[name] = json.loads(path.read_text())
                if name == "throughput_results":
                    run.results[name]["baseline_rev"] = args.baseline_rev
            else:
                tail = output.strip().splitlines()[-1:] or [f"exit {code}"]
                run.errors[name] = tail[0]
    finally:
        if baseline is not None:
            drop_tree(baseline)
        shutil.rmtree(scratch, ignore_errors=True)
    run.seconds = time.perf_counter() - started
    run.load_after = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    print(f"load average after: {run.load_after}")
    meta = {
        "outputs": run.outputs,
        "commands": run.commands,
        "errors": run.errors,
        "started": run.started,
        "seconds": run.seconds,
        "load_before": run.load_before,
        "load_after": run.load_after,
        "environment": run.environment,
        "durations": run.durations,
    }
    (results_dir / "run.json").write_text(json.dumps(meta, indent=2))
    report = report_path(results_dir, quick=args.quick, only=bool(args.only), output=args.output)
    report.write_text(render(run))
    print(f"\nwrote {report} in {run.seconds / 60:.1f} min")
    return 1 if run.errors else 0


if __name__ == "__main__":
    sys.exit(main())
