"""Console at scale: fleet read + snapshot build, TUI table update, peak RSS.

    .venv/bin/python -m bench.console_scale [--sizes 1000,10000,50000] [--repeats 3]
        [--no-tui] [--json PATH]

For each fleet size N (written by the runtime's own heartbeat, ``bench.common``):

* in process: ``FleetReader.read()`` (median of ``--repeats``), split into the time in
  its pipelined round trips (redis-py encode, Redis, reply parse) and the rest (models,
  derivations, the snapshot), plus ``--format json`` rendering of the snapshot;
* ``byconsole --snapshot --format json`` and ``--format table`` as subprocesses: wall
  time and peak RSS;
* the TUI, headless at 120x36 in its own process (``ConsoleApp`` with the real Redis
  backend, exactly what ``byconsole`` runs): time until every row is in the table,
  then 1% of the workers are suspended in Redis and one refresh is timed — "apply"
  is the table update while the event loop is busy, "+paint" adds the repaint; then
  a refresh where nothing changed; and the process's peak RSS. The fleet beats (the
  runtime's heartbeat) before every refresh, as a live one does, so ages stay current.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import (
    BIN,
    ROOT,
    SimInstance,
    machine,
    populate,
    redis_client,
    run_timed,
    start_redis,
    versions,
    worker_env,
    write_fleet,
    write_results,
)
from worker_runtime.fleet import FleetReader
from worker_runtime.keys import Keys
from worker_runtime.models import AdminState, Lifecycle, now_ms
from worker_runtime.snapshot import FleetSnapshot

KEYS = Keys()


class TimedReader(FleetReader):
    """A :class:`FleetReader` that adds up the time spent in its round trips."""

    round_trip_s = 0.0

    async def _run(self, queue: Any) -> list[Any]:
        started = time.perf_counter()
        try:
            return await super()._run(queue)
        finally:
            self.round_trip_s += time.perf_counter() - started


async def reader_figures(url: str, repeats: int) -> dict[str, Any]:
    """Median read time, its round-trip share, and JSON rendering time."""
    redis = redis_client(url)
    reader = TimedReader(redis, KEYS)
    totals: list[float] = []
    trips: list[float] = []
    snap: FleetSnapshot | None = None
    try:
        await reader.read()
        for _ in range(repeats):
            reader.round_trip_s = 0.0
            started = time.perf_counter()
            snap = await reader.read()
            totals.append((time.perf_counter() - started) * 1000)
            trips.append(reader.round_trip_s * 1000)
    finally:
        await redis.aclose()
    assert snap is not None
    started = time.perf_counter()
    json.dumps(snap.model_dump(mode="json"))
    render = (time.perf_counter() - started) * 1000
    return {
        "read_ms": statistics.median(totals),
        "round_trips_ms": statistics.median(trips),
        "build_ms": statistics.median(t - r for t, r in zip(totals, trips, strict=True)),
        "round_trips": reader.round_trips,
        "json_render_ms": render,
        "workers": len(snap.workers),
    }


def cli_figures(url: str, fmt: str, expect: int) -> dict[str, Any]:
    """``byconsole --snapshot --format FMT``: wall time and peak RSS."""
    done = run_timed(
        [str(BIN / "byconsole"), "--snapshot", "--format", fmt, "--redis-url", url],
        env=worker_env(url),
    )
    if done.returncode not in (0, 1):
        raise SystemExit(f"byconsole --snapshot failed: {done.stderr.strip()[-300:]}")
    if fmt == "json" and len(json.loads(done.stdout)["workers"]) != expect:
        raise SystemExit("byconsole --snapshot did not list every worker")
    return {"seconds": done.seconds, "max_rss_mb": done.max_rss_mb}


# -- the TUI child process -------------------------------------------------------------
#
# The parent beats the fleet (the runtime's heartbeat) whenever the child asks, before
# the first load and before every timed refresh: ages stay what a live fleet shows
# ("<10s"), so only the intended 1% of rows change, and the simulated replicas do not
# count in the console's RSS. The protocol is one line each way on the raw file
# descriptors (Textual may capture ``sys.stdout`` while the app runs).


async def ask_parent_to_beat() -> None:
    """Ask the parent for a heartbeat of the whole fleet; return once it is written."""
    os.write(1, b"beat\n")
    await asyncio.to_thread(os.read, 0, 64)


async def tui_child(url: str, count: int) -> dict[str, Any]:
    """Run the console headless on ``url``; time the first load and a 1% update."""
    from byconsole.tui.app import ConsoleApp
    from byconsole.tui.backend import RedisBackend
    from worker_runtime.settings import RedisSettings

    redis = redis_client(url)
    await ask_parent_to_beat()
    app = ConsoleApp(RedisBackend(RedisSettings(url=url)), refresh=3600)
    out: dict[str, Any] = {}
    try:
        async with app.run_test(size=(120, 36)) as pilot:
            main = app.main_screen
            table = main.workers_view.table
            started = time.perf_counter()
            deadline = started + 300
            while table.row_count < count:
                if time.perf_counter() > deadline:
                    raise SystemExit(f"the table showed {table.row_count} of {count} rows")
                if app.failures:
                    out["first_poll_failed"] = True
                await pilot.pause(0.02)
            out["first_load_s"] = time.perf_counter() - started
            out["read_ms"] = app.snapshot.redis.read_ms if app.snapshot else None

            applied: list[float] = []
            original = main.show_snapshot

            def timed(snapshot: FleetSnapshot) -> None:
                t = time.perf_counter()
                original(snapshot)
                applied.append(time.perf_counter() - t)

            main.show_snapshot = timed  # type: ignore[method-assign]

            async def refresh(label: str) -> None:
                await ask_parent_to_beat()
                polls = len(applied)
                app.request_poll()
                while len(applied) == polls:
                    await pilot.pause(0.005)
                done_apply = time.perf_counter()
                await pilot.pause()
                out[f"{label}_apply_ms"] = applied[-1] * 1000
                out[f"{label}_paint_ms"] = (applied[-1] + time.perf_counter() - done_apply) * 1000

            await refresh("unchanged_warm")
            # 1% of the workers suspended by an operator: their lifecycle cell changes.
            ids = sorted(str(w) for w in await redis.smembers(KEYS.workers))[::100]
            state = AdminState(
                lifecycle=Lifecycle.SUSPENDED.value,
                reason="bench",
                updated_at=now_ms(),
                updated_by="bench@local",
            )
            pipe = redis.pipeline(transaction=False)
            for wid in ids:
                pipe.hset(
                    KEYS.worker_admin(wid),
                    mapping={k: str(v) for k, v in state.model_dump(exclude_none=True).items()},
                )
            await pipe.execute()
            await refresh("changed_1pct")
            suspended = sum(
                1
                for k in table.ordered_keys()
                if table.get_cell(k, "lifecycle").plain == "suspended"
            )
            out["changed_rows"] = len(ids)
            out["changed_rows_shown"] = suspended
            await refresh("unchanged")
    finally:
        await redis.aclose()
    return out


async def tui_figures(url: str, count: int, fleet: list[SimInstance]) -> dict[str, Any]:
    """Run :func:`tui_child` in its own process, beating ``fleet`` when it asks.

    Returns its figures and its peak RSS (GNU ``time``, as :func:`run_timed`).
    """
    gnu_time = shutil.which("time") or "/usr/bin/time"
    env = worker_env(url)
    with tempfile.TemporaryDirectory() as tmp:
        rss_file = Path(tmp) / "rss"
        child = [sys.executable, "-m", "bench.console_scale", "--tui-child", url, str(count)]
        if Path(gnu_time).exists():
            child = [gnu_time, "-f", "%M", "-o", str(rss_file), *child]
        proc = await asyncio.create_subprocess_exec(
            *child,
            cwd=ROOT,
            env=env,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            limit=2**24,
        )
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        last = b""
        beats: list[float] = []
        while line := await proc.stdout.readline():
            if line.strip() == b"beat":
                started = time.perf_counter()
                await write_fleet(fleet[0].ctx.redis, fleet)  # type: ignore[arg-type]
                beats.append(time.perf_counter() - started)
                proc.stdin.write(b"ok\n")
                await proc.stdin.drain()
            elif line.strip():
                last = line
        err = await proc.stderr.read()
        code = await proc.wait()
        if code != 0:
            tail = err.decode("utf-8", "replace").strip().splitlines()[-3:]
            return {"error": " | ".join(tail) or f"exit {code}"}
        figures: dict[str, Any] = json.loads(last)
        # Ages are shown in 10 s steps: a fleet that takes seconds to beat may see some
        # rows cross a step between two refreshes (the "unchanged" one included).
        figures["fleet_beat_s"] = max(beats, default=0.0)
        lines = rss_file.read_text().split() if rss_file.exists() else []
        figures["max_rss_mb"] = float(lines[-1]) / 1024 if lines and lines[-1].isdigit() else 0.0
    return figures


async def measure(args: argparse.Namespace) -> dict[str, Any]:
    """Every figure of this benchmark."""
    sizes = [int(s) for s in args.sizes.split(",")]
    server = start_redis()
    redis = redis_client(server.url)
    results: dict[str, Any] = {
        "machine": machine(),
        "versions": versions("textual", "rich", "pydantic", "redis", "hiredis"),
        "sizes": {},
    }
    try:
        for n in sizes:
            await redis.flushall()
            fleet = await populate(redis, n)
            row: dict[str, Any] = await reader_figures(server.url, args.repeats)
            row["snapshot_json"] = cli_figures(server.url, "json", n)
            row["snapshot_table"] = cli_figures(server.url, "table", n)
            print(
                f"{n:>6,} workers: FleetReader.read {row['read_ms']:7.1f} ms "
                f"(round trips {row['round_trips_ms']:.1f} ms x{row['round_trips']}, "
                f"build {row['build_ms']:.1f} ms), JSON render {row['json_render_ms']:.0f} ms | "
                f"byconsole --snapshot json {row['snapshot_json']['seconds']:.2f} s "
                f"{row['snapshot_json']['max_rss_mb']:.0f} MB, table "
                f"{row['snapshot_table']['seconds']:.2f} s "
                f"{row['snapshot_table']['max_rss_mb']:.0f} MB"
            )
            if not args.no_tui:
                tui = await tui_figures(server.url, n, fleet)
                row["tui"] = tui
                if "error" in tui:
                    print(f"{n:>6,} workers: TUI failed: {tui['error']}")
                else:
                    print(
                        f"{n:>6,} workers: TUI first load {tui['first_load_s']:.2f} s; "
                        f"1% changed: apply {tui['changed_1pct_apply_ms']:.1f} ms, "
                        f"+paint {tui['changed_1pct_paint_ms']:.1f} ms; unchanged: apply "
                        f"{tui['unchanged_apply_ms']:.1f} ms; peak RSS {tui['max_rss_mb']:.0f} MB"
                    )
            results["sizes"][str(n)] = row
    finally:
        await redis.aclose()
        server.cleanup()
    return results


def main() -> int:
    """Parse flags, run, print, write JSON."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,10000,50000")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-tui", action="store_true")
    parser.add_argument("--json", help="write the figures here")
    parser.add_argument("--tui-child", nargs=2, metavar=("URL", "N"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.tui_child:
        figures = asyncio.run(tui_child(args.tui_child[0], int(args.tui_child[1])))
        print(json.dumps(figures))
        return 0
    print(f"machine: {machine()}")
    results = asyncio.run(measure(args))
    write_results(args.json, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
