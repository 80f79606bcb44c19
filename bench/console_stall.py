"""Console responsiveness at scale: event-loop stalls, key latency, paints, RSS.

    .venv/bin/python -m bench.console_stall [--live 10000] [--static 100000]
        [--refreshes 5] [--repeats 1] [--json PATH]

Live (``--live N``, the real ``ConsoleApp`` with the Redis backend, headless at 120x36,
in its own process; the fleet written and beaten by the runtime's own heartbeat,
``bench.common``, in the parent so it does not count in the console's RSS):

* **longest event-loop stall** while a refresh reads, diffs and paints: a 5 ms ticker
  on the console's loop records the largest gap between ticks;
* **key latency during a refresh**: every 20 ms a key (down/up) is posted as a
  terminal key press would be; the time until the table's cursor has moved;
* **first paint after the read**: from the first snapshot arriving (the read done) to
  the first frame with rows; and until every row is in the table;
* **1%-changed refresh**: 1% of the workers suspended in Redis, then one refresh: from
  the snapshot arriving to the change applied, and to it painted; and from the refresh
  requested (read included: work moved into the read step is not hidden) to painted;
* **peak RSS** of the console process (``VmHWM``).

Each of ``--refreshes`` refreshes (after the first load) is measured; median and max.
``--repeats N`` runs N rounds of (live run, static run), each a fresh console process,
and keeps every run's figures (first paint and RSS get N samples, per-refresh figures
N x ``--refreshes``).

Static (``--static N``, a synthetic N-worker snapshot, no Redis: the read is not what
is measured): first paint after the snapshot arrives, then latency of scrolling
(page down, end), filtering (a filter keeping 1%, then cleared) and sorting (next
column, reversed), each until painted; peak RSS.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from bench.common import (
    ROOT,
    admin_hash,
    load_average,
    machine,
    populate,
    private_redis,
    versions,
    worker_env,
    write_fleet,
    write_results,
)
from worker_runtime.keys import Keys
from worker_runtime.models import AdminState, Lifecycle, now_ms

KEYS = Keys()


def peak_rss_mb() -> float:
    """This process's peak resident set (``VmHWM``; a fresh exec starts its own)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


class LoopWatch:
    """A 5 ms ticker on the running loop: the longest gap is the longest stall."""

    def __init__(self) -> None:
        self.gaps: list[float] = []
        self._task: asyncio.Task[None] | None = None

    async def _tick(self) -> None:
        last = time.perf_counter()
        while True:
            await asyncio.sleep(0.005)
            now = time.perf_counter()
            self.gaps.append((now - last - 0.005) * 1000)
            last = now

    def start(self) -> None:
        """Start recording (clears earlier gaps)."""
        self.gaps = []
        self._task = asyncio.create_task(self._tick())

    def stop(self) -> float:
        """Stop; the longest stall in ms."""
        if self._task is not None:
            self._task.cancel()
        return max(self.gaps, default=0.0)


class KeyProbe:
    """Posts a key every 20 ms and records how long until the cursor moved."""

    def __init__(self, app: Any, table: Any) -> None:
        self.app = app
        self.table = table
        self.latencies: list[float] = []
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        down = True
        while True:
            before = self.table.cursor_row
            if self.table.row_count < 3:
                await asyncio.sleep(0.02)
                continue
            key = "down" if down or before == 0 else "up"
            down = not down
            posted = time.perf_counter()
            self.app.simulate_key(key)
            while self.table.cursor_row == before:
                await asyncio.sleep(0.001)
            self.latencies.append((time.perf_counter() - posted) * 1000)
            await asyncio.sleep(0.02)

    def start(self) -> None:
        """Start pressing keys (clears earlier figures)."""
        self.latencies = []
        self._task = asyncio.create_task(self._run())

    def stop(self) -> list[float]:
        """Stop; the latencies in ms."""
        if self._task is not None:
            self._task.cancel()
        return self.latencies


class PaintWatch:
    """Records when the screen composes a frame.

    Each update the compositor renders reaches ``App._display`` (the headless driver
    then writes nothing; a terminal's would write it). A frame, not the table's own
    lines: a refresh repaints only what it changed (the visible rows whose cells
    changed, the header's counts), so the first frame after a change is when it is on
    screen, wherever it shows.
    """

    def __init__(self, app: Any) -> None:
        self.frames: list[float] = []
        display = app._display

        def recorded(screen: Any, renderable: Any) -> None:
            display(screen, renderable)
            if renderable is not None:
                self.frames.append(time.perf_counter())

        app._display = recorded

    async def painted_after(self, since: float, timeout: float = 10.0) -> float:
        """When the first frame composed after ``since`` (perf_counter) was done."""
        deadline = time.perf_counter() + timeout
        while not (self.frames and self.frames[-1] > since):
            if time.perf_counter() > deadline:
                return float("nan")
            await asyncio.sleep(0.0005)
        return next(t for t in self.frames if t > since)


def _preparing(view: Any) -> bool:
    """The view still builds rows in the background (every row counted once done)."""
    return bool(getattr(view, "_preparing", False))


# -- live: the real console on a real fleet, in a child process ---------------------------


async def ask_parent(word: str) -> None:
    """Ask the parent to do ``word`` (beat the fleet, suspend 1%); return once done."""
    os.write(1, f"{word}\n".encode())
    await asyncio.to_thread(os.read, 0, 64)


async def live_child(url: str, count: int, refreshes: int) -> dict[str, Any]:
    """Run the console on ``url``: first load, then timed refreshes."""
    from byconsole.tui.app import ConsoleApp
    from byconsole.tui.backend import RedisBackend
    from worker_runtime.settings import RedisSettings
    from worker_runtime.snapshot import FleetSnapshot

    await ask_parent("beat")
    app = ConsoleApp(RedisBackend(RedisSettings(url=url)), refresh=3600)
    out: dict[str, Any] = {}
    async with app.run_test(size=(120, 36)) as pilot:
        main = app.main_screen
        table = main.workers_view.table
        arrived: list[float] = []
        applied: list[float] = []
        original = main.show_snapshot

        def timed(snapshot: FleetSnapshot) -> None:
            arrived.append(time.perf_counter())
            original(snapshot)
            applied.append(time.perf_counter())

        main.show_snapshot = timed  # type: ignore[method-assign]
        paints = PaintWatch(app)
        watch = LoopWatch()
        watch.start()
        deadline = time.perf_counter() + 300
        while not applied:
            if time.perf_counter() > deadline:
                raise SystemExit("no snapshot reached the console")
            await asyncio.sleep(0.001)
        first_paint = await paints.painted_after(applied[0])
        out["first_paint_after_read_ms"] = (first_paint - arrived[0]) * 1000
        out["first_paint_rows"] = table.row_count
        while table.row_count < count or _preparing(main.workers_view):
            if time.perf_counter() > deadline:
                raise SystemExit(f"the table showed {table.row_count} of {count} rows")
            await pilot.pause(0.01)
        out["all_rows_after_read_ms"] = (time.perf_counter() - arrived[0]) * 1000
        out["first_load_longest_stall_ms"] = watch.stop()
        table.focus()
        await pilot.pause()

        probe = KeyProbe(app, table)
        stalls: list[float] = []
        keys: list[float] = []
        changed_apply: list[float] = []
        changed_paint: list[float] = []
        changed_request: list[float] = []
        unchanged_paint: list[float] = []
        for i in range(refreshes):
            change = i % 2 == 0
            await ask_parent("suspend" if change else "beat")
            polls = len(applied)
            watch.start()
            probe.start()
            requested = time.perf_counter()
            app.request_poll()
            while len(applied) == polls:
                await asyncio.sleep(0.001)
            painted = await paints.painted_after(applied[-1])
            await asyncio.sleep(0.05)  # keys keep coming right after the paint too
            stalls.append(watch.stop())
            keys += probe.stop()
            after_read = (applied[-1] - arrived[-1]) * 1000
            after_paint = (painted - arrived[-1]) * 1000
            if change:
                changed_apply.append(after_read)
                changed_paint.append(after_paint)
                changed_request.append((painted - requested) * 1000)
            else:
                unchanged_paint.append(after_paint)
        out["refresh_longest_stall_ms"] = {
            "median": statistics.median(stalls),
            "max": max(stalls),
            "samples": stalls,
        }
        out["keys_during_refresh_ms"] = {
            "n": len(keys),
            "median": statistics.median(keys) if keys else None,
            "max": max(keys, default=None),
            "over_50ms": sum(1 for k in keys if k > 50),
            "samples": keys,
        }
        out["changed_1pct_applied_after_read_ms"] = statistics.median(changed_apply)
        out["changed_1pct_painted_after_read_ms"] = statistics.median(changed_paint)
        out["changed_1pct_painted_after_read_samples"] = changed_paint
        out["changed_1pct_painted_after_request_ms"] = statistics.median(changed_request)
        out["unchanged_painted_after_read_ms"] = (
            statistics.median(unchanged_paint) if unchanged_paint else None
        )
        out["read_ms"] = app.snapshot.redis.read_ms if app.snapshot else None
    out["peak_rss_mb"] = peak_rss_mb()
    return out


async def suspend_some(redis: Any, every: int) -> None:
    """Flip every ``every``-th worker between suspended and active (an operator action)."""
    ids = sorted(str(w) for w in await redis.smembers(KEYS.workers))[::every]
    now = now_ms()
    pipe = redis.pipeline(transaction=False)
    for wid in ids:
        current = await redis.hget(KEYS.worker_admin(wid), "lifecycle")
        lifecycle = Lifecycle.ACTIVE if current == "suspended" else Lifecycle.SUSPENDED
        state = AdminState(lifecycle=lifecycle.value, reason="bench", updated_at=now)
        pipe.hset(
            KEYS.worker_admin(wid),
            mapping=admin_hash(state),
        )
    await pipe.execute()


async def live_once(redis: Any, url: str, fleet: Any, count: int, refreshes: int) -> Any:
    """Run :func:`live_child` once beside the fleet, answering its requests."""
    child = [sys.executable, "-m", "bench.console_stall", "--live-child", url]
    child += [str(count), str(refreshes)]
    proc = await asyncio.create_subprocess_exec(
        *child,
        cwd=ROOT,
        env=worker_env(url),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        limit=2**24,
    )
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    last = b""
    while line := await proc.stdout.readline():
        word = line.strip()
        if word in (b"beat", b"suspend"):
            await write_fleet(redis, fleet)
            if word == b"suspend":
                await suspend_some(redis, 100)
            proc.stdin.write(b"ok\n")
            await proc.stdin.drain()
        elif word:
            last = line
    err = await proc.stderr.read()
    if await proc.wait() != 0:
        tail = err.decode("utf-8", "replace").strip().splitlines()[-3:]
        return {"error": " | ".join(tail)}
    return json.loads(last)


async def rounds(live_n: int, static_n: int, refreshes: int, repeats: int) -> dict[str, Any]:
    """``repeats`` rounds of a live run then a static run (each a fresh console process).

    Alternating the two spreads a change in the machine's load over both; each run's
    figures are kept (``live_runs``/``static_runs``), the first also as ``live``/``static``.
    """
    out: dict[str, Any] = {}
    async with contextlib.AsyncExitStack() as stack:
        live = await stack.enter_async_context(private_redis()) if live_n else None
        fleet = await populate(live[1], live_n) if live is not None else None
        for i in range(repeats):
            if live is not None:
                server, redis = live
                figures = await live_once(redis, server.url, fleet, live_n, refreshes)
                out.setdefault("live_runs", {}).setdefault(str(live_n), []).append(figures)
                print(f"live {live_n:,} workers, run {i + 1}: {json.dumps(_brief(figures))}")
            if static_n:
                figures = await asyncio.to_thread(child_figures, ["--static-child", str(static_n)])
                out.setdefault("static_runs", {}).setdefault(str(static_n), []).append(figures)
                print(f"static {static_n:,} workers, run {i + 1}: {json.dumps(figures)}")
    for kind in ("live", "static"):
        if f"{kind}_runs" in out:
            out[kind] = {n: runs[0] for n, runs in out[f"{kind}_runs"].items()}
    return out


def _brief(figures: dict[str, Any]) -> dict[str, Any]:
    """A run's figures without the raw samples (for the log)."""
    return {
        k: {kk: vv for kk, vv in v.items() if kk != "samples"} if isinstance(v, dict) else v
        for k, v in figures.items()
        if not k.endswith("_samples")
    }


# -- static: a synthetic large fleet, no Redis -------------------------------------------


async def static_child(count: int) -> dict[str, Any]:
    """First paint, scroll, filter and sort latency at ``count`` workers."""
    from bench.common import snapshot_fleet
    from byconsole.tui.app import ConsoleApp
    from byconsole.tui.backend import StaticBackend

    snapshot = snapshot_fleet(count)
    app = ConsoleApp(StaticBackend(snapshot), refresh=3600, clock=lambda: 0.0)
    out: dict[str, Any] = {}
    async with app.run_test(size=(120, 36)) as pilot:
        while app.snapshot is None:
            await pilot.pause(0.01)
        main = app.main_screen
        view = main.workers_view
        table = view.table
        main.reset(app.backend.endpoint, None)
        await pilot.pause()
        paints = PaintWatch(app)
        watch = LoopWatch()
        watch.start()
        started = time.perf_counter()
        main.show_snapshot(snapshot)
        first_paint = await paints.painted_after(time.perf_counter())
        out["first_paint_after_read_ms"] = (first_paint - started) * 1000
        while table.row_count < count or _preparing(view):
            await pilot.pause(0.01)
        out["all_rows_after_read_ms"] = (time.perf_counter() - started) * 1000
        out["first_load_longest_stall_ms"] = watch.stop()
        table.focus()
        await pilot.pause()

        async def timed(action: Any, done: Any) -> float:
            begun = time.perf_counter()
            action()
            while not done():
                await asyncio.sleep(0.0005)
            painted = await paints.painted_after(time.perf_counter() - 0.0001)
            return (painted - begun) * 1000

        latencies: dict[str, list[float]] = {}
        for _ in range(5):
            row = table.cursor_row
            latencies.setdefault("page down", []).append(
                await timed(
                    lambda: app.simulate_key("pagedown"),
                    lambda row=row: bool(table.cursor_row != row),
                )
            )
        latencies["end"] = [
            await timed(lambda: app.simulate_key("ctrl+end"), lambda: table.cursor_row == count - 1)
        ]
        latencies["home"] = [
            await timed(lambda: app.simulate_key("ctrl+home"), lambda: table.cursor_row == 0)
        ]
        keep = max(1, count // 100)
        prefix = f"worker-{(count // 100 - 1):03d}" if count >= 1000 else "worker-0000"
        latencies["filter 1%"] = [
            await timed(
                lambda: setattr(view, "filter_text", prefix),
                lambda: table.row_count <= max(keep, 100),
            )
        ]
        latencies["filter cleared"] = [
            await timed(lambda: setattr(view, "filter_text", ""), lambda: table.row_count == count)
        ]
        # Sort by jobs (a different order from the id order), then reverse it.
        for label, action in (
            ("sort by jobs", lambda: view.sort_by("jobs")),
            ("sort reversed", view.action_reverse_sort),
        ):
            first = table.ordered_keys()[:3]
            latencies[label] = [
                await timed(action, lambda first=first: table.ordered_keys()[:3] != first)
            ]
        out["latency_ms"] = {k: max(v) for k, v in latencies.items()}
    out["peak_rss_mb"] = peak_rss_mb()
    return out


def child_figures(args: list[str]) -> dict[str, Any]:
    """Run one child of this module in a fresh process; its last line is its figures."""
    import subprocess

    proc = subprocess.run(
        [sys.executable, "-m", "bench.console_stall", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    if proc.returncode != 0:
        return {"error": " | ".join(proc.stderr.strip().splitlines()[-3:])}
    figures: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return figures


def main() -> int:
    """Parse flags, run, print, write JSON."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--live", type=int, default=10_000, help="live fleet size (0: skip)")
    parser.add_argument("--static", type=int, default=100_000, help="synthetic size (0: skip)")
    parser.add_argument("--refreshes", type=int, default=5)
    parser.add_argument(
        "--repeats", type=int, default=1, help="rounds of (live run, static run), alternating"
    )
    parser.add_argument("--json", help="write the figures here")
    parser.add_argument("--live-child", nargs=3, help=argparse.SUPPRESS)
    parser.add_argument("--static-child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.live_child:
        url, n, refreshes = args.live_child
        print(json.dumps(asyncio.run(live_child(url, int(n), int(refreshes)))))
        return 0
    if args.static_child:
        print(json.dumps(asyncio.run(static_child(args.static_child))))
        return 0
    print(f"machine: {machine()}")
    results: dict[str, Any] = {
        "machine": machine(),
        "versions": versions("textual", "rich", "pydantic", "redis"),
        "load_before": load_average(),
    }
    results["repeats"] = args.repeats
    results.update(asyncio.run(rounds(args.live, args.static, args.refreshes, args.repeats)))
    results["load_after"] = load_average()
    print(f"load average: {results['load_before']} -> {results['load_after']}")
    write_results(args.json, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
