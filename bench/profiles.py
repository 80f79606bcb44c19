"""Profiles behind the figures: where the time goes when a target is missed.

    .venv/bin/python -m bench.profiles [--workers 10000] [--static 100000]
        [--only reader,table,tui,startup,worker,worker_results,static] [--json PATH]

* ``reader``: ``FleetReader.read()`` at ``--workers`` under pyinstrument, and its CPU time
  with the garbage collector on and off;
* ``table``: ``byconsole --snapshot --format table`` under py-spy;
* ``tui``: the TUI refresh after 1% of the workers changed, under pyinstrument, inside
  the headless console (``bench.console_scale`` child);
* ``startup``: ``python -X importtime`` of ``byconsole.cli`` and ``rq.cli``;
* ``worker``: ``worker-runtime run`` draining 20,000 no-op tasks, under py-spy;
* ``worker_results``: the same with every task's output stored (session results);
* ``static``: the console on a synthetic ``--static``-worker fleet under pyinstrument:
  first load, sort, filter, page down.

Each prints the functions with the most self time (the hot spots to fix).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from bench.common import (
    BIN,
    ROOT,
    machine,
    populate,
    redis_client,
    start_redis,
    worker_env,
    write_results,
)
from worker_runtime.embedded import RedisServer
from worker_runtime.fleet import FleetReader
from worker_runtime.keys import Keys

TOP = 12


def top_pyinstrument(session: Any, top: int = TOP) -> list[dict[str, Any]]:
    """Functions by self time from a pyinstrument session."""
    selfs: Counter[str] = Counter()
    root = session.root_frame()
    stack: list[tuple[Any, str]] = [(root, "<root>")] if root is not None else []
    while stack:
        frame, parent = stack.pop()
        if frame.is_synthetic:
            # pyinstrument's "[self]"/"[await]" leaves: the time of the frame above.
            name = parent if frame.function == "[self]" else f"{frame.function} in {parent}"
        else:
            name = f"{frame.function} ({frame.file_path_short}:{frame.line_no})"
        own = frame.time - sum(c.time for c in frame.children)
        selfs[name] += own
        stack.extend((c, name) for c in frame.children)
    total = (root.time if root is not None else 0.0) or 1.0
    return [
        {"function": name, "self_ms": s * 1000, "pct": s / total * 100}
        for name, s in selfs.most_common(top)
    ]


def top_pyspy(raw: str, top: int = TOP) -> tuple[list[dict[str, Any]], int]:
    """Functions by self samples from ``py-spy record --format raw`` output."""
    selfs: Counter[str] = Counter()
    samples = 0
    for line in raw.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        samples += n
        selfs[stack.split(";")[-1]] += n
    return [
        {"function": name, "samples": n, "pct": n / samples * 100}
        for name, n in selfs.most_common(top)
    ], samples


def by_package_pyspy(raw: str, top: int = TOP) -> list[dict[str, Any]]:
    """Self samples by the top-level package (or module) of the leaf frame's file."""
    counts: Counter[str] = Counter()
    samples = 0
    for line in raw.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        leaf = stack.split(";")[-1]
        where = leaf.rpartition("(")[2].split(":")[0]
        # py-spy shortens paths to the import root: "rich/text.py", "selectors.py".
        parts = Path(where).parts
        if "site-packages" in parts:
            parts = parts[parts.index("site-packages") + 1 :]
        package = (parts[0] if len(parts) > 1 else Path(where).stem) if parts else "?"
        counts[package] += int(count)
        samples += int(count)
    return [
        {"function": name, "samples": n, "pct": n / max(1, samples) * 100}
        for name, n in counts.most_common(top)
    ]


def show(title: str, rows: list[dict[str, Any]]) -> None:
    """Print a profile's hot spots."""
    print(f"-- {title}")
    for row in rows:
        amount = f"{row['self_ms']:8.1f} ms" if "self_ms" in row else f"{row['samples']:6d} smp"
        print(f"   {row['pct']:5.1f}% {amount}  {row['function'][:110]}")


# -- profiles --------------------------------------------------------------------------


async def profile_reader(server: RedisServer, workers: int) -> dict[str, Any]:
    """FleetReader.read under pyinstrument; CPU time with GC on and off."""
    from pyinstrument import Profiler

    redis = redis_client(server.url)
    try:
        reader = FleetReader(redis, Keys())
        await reader.read()
        cpu: dict[str, list[float]] = {"gc on": [], "gc off": []}
        keep: list[Any] = []
        for _ in range(3):
            for mode in cpu:
                (gc.disable if mode == "gc off" else gc.enable)()
                started = time.process_time()
                keep = [*keep[-1:], await reader.read()]  # a console holds the last one
                cpu[mode].append((time.process_time() - started) * 1000)
        gc.enable()
        profiler = Profiler(interval=0.0005, async_mode="enabled")
        profiler.start()
        for _ in range(3):
            await reader.read()
        profiler.stop()
    finally:
        await redis.aclose()
    top = top_pyinstrument(profiler.last_session)
    out: dict[str, Any] = {
        "cpu_ms_gc_on": statistics.median(cpu["gc on"]),
        "cpu_ms_gc_off": statistics.median(cpu["gc off"]),
        "top": top,
    }
    print(
        f"FleetReader.read at {workers:,} workers: CPU {out['cpu_ms_gc_on']:.0f} ms with the "
        f"garbage collector, {out['cpu_ms_gc_off']:.0f} ms without"
    )
    show("FleetReader.read (pyinstrument, 3 reads)", top)
    return out


def pyspy(args: list[str], env: dict[str, str], rate: int = 250) -> dict[str, Any]:
    """Run ``args`` under ``py-spy record``; its hot spots."""
    spy = shutil.which("py-spy") or str(BIN / "py-spy")
    if not Path(spy).exists():
        return {"error": "py-spy is not installed (pip install py-spy)"}
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "raw.txt"
        started = time.perf_counter()
        done = subprocess.run(
            [spy, "record", "-r", str(rate), "-f", "raw", "-o", str(out), "--", *args],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        seconds = time.perf_counter() - started
        if not out.exists():
            return {"error": (done.stderr or done.stdout).strip()[-300:]}
        text = out.read_text()
        top, samples = top_pyspy(text)
    return {
        "top": top,
        "packages": by_package_pyspy(text),
        "samples": samples,
        "seconds": seconds,
    }


def profile_table(server: RedisServer, workers: int) -> dict[str, Any]:
    """``byconsole --snapshot --format table`` under py-spy."""
    cmd = [str(BIN / "byconsole"), "--snapshot", "--format", "table", "--redis-url", server.url]
    out = pyspy(cmd, worker_env(server.url))
    if "top" in out:
        print(f"byconsole --snapshot --format table at {workers:,}: {out['seconds']:.1f} s")
        show("byconsole --snapshot --format table (py-spy, self samples)", out["top"])
        show("the same by package", out["packages"])
    return out


async def profile_tui(server: RedisServer, workers: int, fleet: list[Any]) -> dict[str, Any]:
    """The 1%-changed TUI refresh under pyinstrument, in the headless console."""
    from bench.console_scale import tui_figures

    figures = await tui_figures(server.url, workers, fleet, profile=True)
    if "error" in figures:
        return figures
    out = {"top": figures.get("profile", []), "apply_ms": figures.get("changed_1pct_apply_ms")}
    show(f"TUI refresh, 1% of {workers:,} rows changed (pyinstrument)", out["top"])
    return out


def profile_startup() -> dict[str, Any]:
    """Import time of the two CLIs (median of 3, self time per module)."""
    out: dict[str, Any] = {}
    for name, module in (("byconsole", "byconsole.cli"), ("rq", "rq.cli")):
        runs: list[dict[str, int]] = []
        totals: list[int] = []
        for _ in range(3):
            done = subprocess.run(
                [sys.executable, "-X", "importtime", "-c", f"import {module}"],
                capture_output=True,
                text=True,
                cwd=ROOT,
            )
            selfs: dict[str, int] = {}
            total = 0
            for line in done.stderr.splitlines():
                parts = line.removeprefix("import time:").split("|")
                if len(parts) != 3 or not parts[0].strip().isdigit():
                    continue
                own, cumulative, mod = int(parts[0]), int(parts[1]), parts[2].strip()
                selfs[mod] = own
                if parts[2].startswith(" ") and not parts[2].startswith("  "):
                    total += cumulative  # a top-level import
            runs.append(selfs)
            totals.append(total)
        mods = {m: float(statistics.median(r.get(m, 0) for r in runs)) for m in runs[0]}
        total_ms = statistics.median(totals) / 1000
        # By top-level package: what pulling in pydantic, redis, rich ... costs.
        packages: Counter[str] = Counter()
        for mod, us in mods.items():
            packages[mod.split(".")[0]] += int(us)
        out[name] = {
            "import_ms": total_ms,
            "top": [
                {"function": p, "self_ms": us / 1000, "pct": us / 1000 / total_ms * 100}
                for p, us in packages.most_common(TOP)
            ],
            "modules": [
                {"function": m, "self_ms": us / 1000, "pct": us / 1000 / total_ms * 100}
                for m, us in sorted(mods.items(), key=lambda kv: -kv[1])[:TOP]
            ],
        }
        print(f"import {module}: {total_ms:.0f} ms")
        show(f"{module} imports by package (self time summed)", out[name]["top"])
    return out


async def profile_worker(
    server: RedisServer, tasks: int = 20_000, results: bool = False
) -> dict[str, Any]:
    """``worker-runtime run`` draining ``tasks`` no-op tasks, under py-spy (drain only).

    The worker starts suspended (admin state written first), py-spy attaches, then a
    resume starts the drain: start-up is not in the profile. With ``results`` every task
    carries a session id, so its output is stored (as ``bench.throughput --results``).
    """
    from bench.peers.worker_runtime_app import enqueue
    from worker_runtime.admin import WorkerManager
    from worker_runtime.models import AdminState, Lifecycle, now_ms

    keys = Keys()
    redis = redis_client(server.url)
    await redis.flushall()
    mode = {"BENCH_RESULTS": "1"} if results else {}
    # The enqueue reads its mode from the environment, as in bench.throughput.
    saved = os.environ.pop("BENCH_RESULTS", None)
    os.environ.update(mode)
    try:
        await asyncio.to_thread(enqueue, server.url, tasks)
    finally:
        os.environ.pop("BENCH_RESULTS", None)
        if saved is not None:
            os.environ["BENCH_RESULTS"] = saved
    worker_id = "prof-r0"
    suspended = AdminState(lifecycle=Lifecycle.SUSPENDED.value, updated_at=now_ms())
    await redis.hset(
        keys.worker_admin(worker_id),
        mapping={k: str(v) for k, v in suspended.model_dump(exclude_none=True).items()},
    )
    spy = shutil.which("py-spy") or str(BIN / "py-spy")
    if not Path(spy).exists():
        return {"error": "py-spy is not installed (pip install py-spy)"}
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        marker = Path(tmp) / "done.json"
        raw = Path(tmp) / "raw.txt"
        env = worker_env(
            server.url,
            BENCH_TASKS=str(tasks),
            BENCH_OUT=str(marker),
            PYTHONPATH=str(ROOT),
            **mode,
        )
        cmd = [str(BIN / "worker-runtime"), "run", "bench.handlers:counted", "--type", "bench"]
        cmd += ["--instance", "prof", "--concurrency", "100"]
        worker = subprocess.Popen(
            cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        spying: subprocess.Popen[bytes] | None = None
        try:
            deadline = time.monotonic() + 60
            while not await redis.exists(keys.worker_online(worker_id)):
                if time.monotonic() > deadline or worker.poll() is not None:
                    return {"error": "the worker did not come online"}
                await asyncio.sleep(0.05)
            spying = subprocess.Popen(
                [spy, "record", "-r", "500", "-f", "raw", "-o", str(raw), "-p", str(worker.pid)],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            await asyncio.sleep(1.0)  # py-spy attached
            await WorkerManager(redis).resume_worker(worker_id)
            while not marker.exists() and time.monotonic() < deadline + 120:
                await asyncio.sleep(0.02)
            spying.send_signal(signal.SIGINT)  # py-spy writes its output and exits
            spying.wait(30)
        finally:
            if spying is not None and spying.poll() is None:
                spying.kill()
            worker.send_signal(signal.SIGTERM)
            worker.wait(30)
            await redis.aclose()
        if not raw.exists():
            return {"error": "py-spy wrote nothing"}
        done = json.loads(marker.read_text()) if marker.exists() else {}
        top, samples = top_pyspy(raw.read_text())
        out = {
            "top": top,
            "packages": by_package_pyspy(raw.read_text()),
            "samples": samples,
            "drain_s": done.get("last", 0) - done.get("first", 0),
        }
    kind = "no-op tasks, outputs stored" if results else "no-op tasks"
    show(f"worker-runtime draining {tasks:,} {kind} (py-spy, self samples)", out["top"])
    show("the same by package", out["packages"])
    return out


IDLE = ("select (", "poll (", "epoll")
"""Frames where the event loop waits for I/O: idle time, left out of the hot spots."""


def _busy(top: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [row for row in top if not row["function"].startswith(IDLE)]


async def profile_static(count: int) -> dict[str, Any]:
    """The console on a synthetic ``count``-worker fleet under pyinstrument.

    Profiled one by one (the whole thread, every task of the loop; waiting for I/O left
    out): the first load of the Workers view from the snapshot, sorting by jobs, a filter
    keeping 1%, and paging down, each until the table has done it and painted.
    """
    from pyinstrument import Profiler

    from bench.common import snapshot_fleet
    from byconsole.tui.app import ConsoleApp
    from byconsole.tui.backend import StaticBackend

    snapshot = snapshot_fleet(count)
    app = ConsoleApp(StaticBackend(snapshot), refresh=3600, clock=lambda: 0.0)
    out: dict[str, Any] = {"workers": count}
    async with app.run_test(size=(120, 36)) as pilot:
        while app.snapshot is None:
            await pilot.pause(0.01)
        main = app.main_screen
        view = main.workers_view
        table = view.table

        def loaded() -> bool:
            return table.row_count >= count and not getattr(view, "_preparing", False)

        while not loaded():
            await pilot.pause(0.01)
        table.focus()
        await pilot.pause()
        prefix = f"worker-{(count // 100 - 1):03d}" if count >= 1000 else "worker-0000"
        first = table.ordered_keys()[:3]

        def reload() -> None:
            main.reset(app.backend.endpoint, None)
            main.show_snapshot(snapshot)

        row = table.cursor_row
        steps: list[tuple[str, Any, Any]] = [
            ("first load", reload, loaded),
            (
                "sort by jobs",
                lambda: view.sort_by("jobs"),
                lambda: table.ordered_keys()[:3] != first,
            ),
            (
                "filter 1%",
                lambda: setattr(view, "filter_text", prefix),
                lambda: table.row_count <= max(count // 100, 100),
            ),
            (
                "filter cleared",
                lambda: setattr(view, "filter_text", ""),
                lambda: table.row_count == count,
            ),
            ("page down", lambda: app.simulate_key("pagedown"), lambda: table.cursor_row != row),
        ]
        for label, action, done in steps:
            profiler = Profiler(interval=0.0005, async_mode="disabled")
            profiler.start()
            started = time.perf_counter()
            action()
            deadline = started + 120
            while not done() and time.perf_counter() < deadline:
                await asyncio.sleep(0.0005)
            await pilot.pause()  # the paint that follows
            elapsed = (time.perf_counter() - started) * 1000
            profiler.stop()
            top = _busy(top_pyinstrument(profiler.last_session, TOP + 4))[:TOP]
            out[label] = {"ms": elapsed, "done": done(), "top": top}
            print(f"{label} at {count:,} workers: {elapsed:.0f} ms (under the profiler)")
            show(f"{label}, {count:,} workers (pyinstrument, self time, idle left out)", top)
    return out


async def measure(args: argparse.Namespace) -> dict[str, Any]:
    """Run the chosen profiles."""
    only = set(args.only.split(","))
    results: dict[str, Any] = {"machine": machine(), "workers": args.workers, "only": args.only}
    if "startup" in only:
        results["startup"] = profile_startup()
    server = start_redis()
    try:
        fleet: list[Any] = []
        redis = redis_client(server.url)
        if only & {"reader", "table", "tui"}:
            fleet = await populate(redis, args.workers)
        if "reader" in only:
            results["reader"] = await profile_reader(server, args.workers)
        if "table" in only:
            results["table"] = profile_table(server, args.workers)
        if "tui" in only:
            results["tui"] = await profile_tui(server, args.workers, fleet)
        if "worker" in only:
            results["worker"] = await profile_worker(server)
        if "worker_results" in only:
            results["worker_results"] = await profile_worker(server, results=True)
        if "static" in only:
            results["static"] = await profile_static(args.static)
    finally:
        await redis.aclose()
        server.cleanup()
    return results


def main() -> int:
    """Parse flags, run, print, write JSON."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=10_000)
    parser.add_argument("--only", default="reader,table,tui,startup,worker,worker_results,static")
    parser.add_argument("--static", type=int, default=100_000, help="synthetic fleet size")
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args()
    print(f"machine: {machine()}")
    if os.geteuid() != 0:
        print("note: py-spy may need root (ptrace) to sample a process")
    results = asyncio.run(measure(args))
    write_results(args.json, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
