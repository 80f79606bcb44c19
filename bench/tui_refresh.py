"""Console refresh cost for 100 / 1,000 / 10,000 workers, headless at 120x36.

For each fleet size: the first load (every row added), then a refresh in which 1% of
the workers changed (lifecycle flipped, as a suspend would), then a refresh in which
nothing changed, then a filter that keeps 10 rows and its removal. Per step: "apply"
is the diff and table update (the event loop is busy: keys wait), "+paint" adds the
paint that follows, "all rows" is until every row is in the table (large loads are
added in passes of 1,000 rows with the event loop free in between), "longest stall"
is the longest time the event loop was blocked (how long a key press could wait).

    .venv/bin/python bench/tui_refresh.py [--sizes 100,1000,10000]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from byconsole.tui.app import ConsoleApp
from byconsole.tui.backend import StaticBackend
from worker_runtime.models import AdminState
from worker_runtime.snapshot import FleetSnapshot, RedisInfo, WorkerView
from worker_runtime.views import build_worker_view

NOW = 1_767_000_000_000


def fleet(n: int, suspended_every: int = 0) -> FleetSnapshot:
    """``n`` online workers over 10 instances; every ``suspended_every``-th suspended."""
    workers: list[WorkerView] = []
    for i in range(n):
        wid = f"worker-{i:05d}"
        lease = {
            "worker_id": wid,
            "instance_id": f"host-{i % 10}:{1000 + i % 10}",
            "ip_address": f"10.0.{i % 10}.{i % 250}",
            "role": "all",
            "agent_types": ["chat", "embed"] if i % 2 else ["report"],
            "lifecycle": "active",
            "concurrency": 8,
            "active_jobs": i % 8,
            "last_seen": NOW - 1000,
            "heartbeat_interval": 5.0,
            "app_version": "1.4.2",
        }
        admin = AdminState()
        if suspended_every and i % suspended_every == 0:
            admin = AdminState(lifecycle="suspended", reason="bench", updated_at=NOW)
        workers.append(build_worker_view(wid, lease, admin, [], [], NOW))
    return FleetSnapshot(generated_at=NOW, redis=RedisInfo(connected=True), workers=workers)


async def measure(n: int) -> dict[str, float]:
    """Milliseconds for each step at fleet size ``n``."""
    base = fleet(n)
    changed = fleet(n, suspended_every=100)  # 1% of rows differ
    app = ConsoleApp(StaticBackend(base), refresh=3600, clock=lambda: 0.0)
    out: dict[str, float] = {}
    async with app.run_test(size=(120, 36)) as pilot:
        while app.snapshot is None:
            await pilot.pause(0.05)
        main = app.main_screen
        view = main.workers_view

        async def step(name: str, apply: object, rows: int) -> None:
            stalls: list[float] = []

            async def ticker() -> None:
                # The longest gap between two 5 ms ticks is how long a key would wait.
                last = time.perf_counter()
                while True:
                    await asyncio.sleep(0.005)
                    now = time.perf_counter()
                    stalls.append(now - last)
                    last = now

            tick = asyncio.create_task(ticker())
            await asyncio.sleep(0.02)
            started = time.perf_counter()
            apply()  # type: ignore[operator]
            applied = time.perf_counter()
            await pilot.pause()
            painted = time.perf_counter()
            while view.table.row_count != rows:  # a large first load comes in passes
                await pilot.pause()
            done = time.perf_counter()
            tick.cancel()
            out[f"{name}: apply"] = (applied - started) * 1000
            out[f"{name}: +paint"] = (painted - started) * 1000
            out[f"{name}: all rows"] = (done - started) * 1000
            out[f"{name}: longest stall"] = max(stalls) * 1000

        main.reset(app.backend.endpoint, None)
        await pilot.pause()
        await step("first load", lambda: main.show_snapshot(base), n)
        await step("1% changed", lambda: main.show_snapshot(changed), n)
        suspended = [
            k
            for k in view.table.ordered_keys()
            if view.table.get_cell(k, "lifecycle").plain == "suspended"
        ]
        assert len(suspended) == n // 100
        same = fleet(n, suspended_every=100)  # equal content, new objects (as a new read)
        await step("unchanged", lambda: main.show_snapshot(same), n)
        await step(
            "filter 90% out", lambda: setattr(view, "filter_text", "worker-0000"), min(n, 10)
        )
        await step("filter cleared", lambda: setattr(view, "filter_text", ""), n)
    return out


def main() -> int:
    """Print one table of figures."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="100,1000,10000")
    sizes = [int(s) for s in parser.parse_args().sizes.split(",")]
    results = {n: asyncio.run(measure(n)) for n in sizes}
    steps = list(next(iter(results.values())))
    print(f"{'step (ms)':<24}" + "".join(f"{n:>12,}" for n in sizes))
    for name in steps:
        print(f"{name:<24}" + "".join(f"{results[n][name]:>12.1f}" for n in sizes))
    return 0


if __name__ == "__main__":
    sys.exit(main())
