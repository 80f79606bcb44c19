"""Regenerate ``screenshots/*.svg`` from the live demo fleet.

``python tools/screenshots.py screenshots`` (``make screenshots``) starts the demo
fleet, lets it run for a few seconds so queues, executions and metrics exist, then
drives the console headless: every view at 120x36 (plus a drill-down from the Types
view and the help legend), and the workers and dead-letter views at 80x24.

A repository tool, not part of the shipped ``byconsole`` package (operators never run it).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from byconsole.tui.app import ConsoleApp
from byconsole.tui.backend import RedisBackend
from byconsole.tui.demo import DemoFleet

VIEWS = (
    ("1", "workers"),
    ("2", "instances"),
    ("3", "types"),
    ("4", "metrics"),
    ("5", "events"),
    ("6", "dead"),
    ("7", "health"),
)

EXTRAS = (("3 enter", "drilldown"), ("question_mark", "help"))
"""Key sequences and names of the other screens the README shows (at 120x36)."""


async def _wait_for_data(app: ConsoleApp, timeout: float = 15.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while app.snapshot is None or not app.snapshot.workers:
        if loop.time() > deadline:
            raise RuntimeError("the demo fleet did not show up in the console")
        await asyncio.sleep(0.1)


async def take(out_dir: Path, warmup: float = 8.0) -> list[Path]:
    """Start the demo fleet, then save one SVG per view; returns the files written."""
    written: list[Path] = []
    async with DemoFleet() as fleet:
        assert fleet.settings is not None
        await asyncio.sleep(warmup)  # traffic, executions and a few metrics points
        small = (VIEWS[0], VIEWS[5])
        for size, views in (((120, 36), VIEWS), ((80, 24), small)):
            app = ConsoleApp(RedisBackend(fleet.settings), refresh=1.0)
            async with app.run_test(size=size) as pilot:
                await _wait_for_data(app)
                for key, view in views:
                    await pilot.press(key)
                    await pilot.pause(0.6)
                    suffix = "" if size == (120, 36) else f"-{size[0]}x{size[1]}"
                    name = f"{view}{suffix}.svg"
                    app.save_screenshot(name, path=str(out_dir))
                    written.append(out_dir / name)
                if size == (120, 36):
                    for keys, view in EXTRAS:
                        await pilot.press("1")
                        await pilot.press(*keys.split())
                        await pilot.pause(0.6)
                        name = f"{view}.svg"
                        app.save_screenshot(name, path=str(out_dir))
                        written.append(out_dir / name)
                        await pilot.press("escape")
                        await pilot.pause(0.2)
    return written


def main(argv: list[str] | None = None) -> int:
    """Command line: the output directory."""
    parser = argparse.ArgumentParser(prog="tools/screenshots.py")
    parser.add_argument("out_dir", nargs="?", default="screenshots")
    parser.add_argument("--warmup", type=float, default=8.0, help="seconds of demo traffic first")
    args = parser.parse_args(argv)
    Path(args.out_dir).mkdir(parents=True, exist_ok=True)
    for path in asyncio.run(take(Path(args.out_dir), args.warmup)):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
