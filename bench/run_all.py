"""Run every side-by-side benchmark once and write BENCHMARKS.md (``make bench``).

    .venv/bin/python bench/run_all.py [--quick] [--only NAME,...] [--results DIR]

Each benchmark runs as its own process (``python -m bench.NAME ... --json FILE``), with
its output shown live and kept for the report. ``--quick`` shrinks every size so the
whole suite finishes in a couple of minutes (to check the scripts, not for figures).
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
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import ROOT, versions
from bench.report import Run, render

BENCHMARKS: dict[str, tuple[str, list[str], list[str]]] = {
    # name: (module, full-size arguments, --quick arguments)
    "fleet_listing": (
        "bench.fleet_listing",
        ["--sizes", "100,1000,10000", "--repeats", "3", "--delay-ms", "1"],
        ["--sizes", "100,1000", "--repeats", "1", "--delay-ms", "1"],
    ),
    "throughput": (
        "bench.throughput",
        ["--tasks", "20000", "--concurrency", "100"],
        ["--tasks", "2000", "--concurrency", "100"],
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
    "console": (
        "bench.console_scale",
        ["--sizes", "1000,10000,50000", "--repeats", "3"],
        ["--sizes", "1000,5000", "--repeats", "1"],
    ),
    "headless": (
        "bench.headless_scale",
        ["--sizes", "1000,10000", "--repeats", "5"],
        ["--sizes", "500", "--repeats", "5"],
    ),
    "console_stall": (
        "bench.console_stall",
        ["--live", "10000", "--static", "100000", "--refreshes", "5"],
        ["--live", "1000", "--static", "5000", "--refreshes", "2"],
    ),
    "heartbeat": (
        "bench.heartbeat_load",
        ["--replicas", "10000", "--instances", "100", "--window", "20"],
        ["--replicas", "2000", "--instances", "20", "--window", "5"],
    ),
    "profiles": (
        "bench.profiles",
        ["--workers", "10000"],
        ["--workers", "2000", "--only", "startup,reader,tui"],
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
    redis = subprocess.run(["redis-server", "--version"], capture_output=True, text=True)
    pkgs = versions(
        "redis", "hiredis", "pydantic", "textual", "rich", "rq", "arq", "taskiq",
        "taskiq-redis", "dramatiq", "celery", "kombu",
    )  # fmt: skip
    return {
        "CPU": f"{cpu}, {os.cpu_count()} cores",
        "memory": mem,
        "OS": f"{platform.system()} {platform.release()}",
        "Python": platform.python_version(),
        "Redis": redis.stdout.split()[2].removeprefix("v=") if redis.stdout else "unknown",
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


def main() -> int:
    """Run the suite; write the JSON figures and BENCHMARKS.md."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (checks the scripts)")
    parser.add_argument("--only", help="comma-separated benchmark names")
    parser.add_argument("--results", default=str(ROOT / "bench" / "results"))
    parser.add_argument(
        "--output", default=str(ROOT / "BENCHMARKS.md"), help="where to write the report"
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
    for name in names:
        module, full, quick = BENCHMARKS[name]
        path = results_dir / f"{name}.json"
        path.unlink(missing_ok=True)
        shown, output, code = run_one(name, module, quick if args.quick else full, path)
        run.commands[name] = shown
        run.outputs[name] = output
        if code == 0 and path.exists():
            run.results[name] = json.loads(path.read_text())
        else:
            tail = output.strip().splitlines()[-1:] or [f"exit {code}"]
            run.errors[name] = tail[0]
    run.seconds = time.perf_counter() - started
    meta = {
        "outputs": run.outputs,
        "commands": run.commands,
        "errors": run.errors,
        "started": run.started,
        "seconds": run.seconds,
        "load_before": run.load_before,
        "environment": run.environment,
    }
    (results_dir / "run.json").write_text(json.dumps(meta, indent=2))
    Path(args.output).write_text(render(run))
    print(f"\nwrote {args.output} in {run.seconds / 60:.1f} min")
    return 1 if run.errors else 0


if __name__ == "__main__":
    sys.exit(main())
