"""How long ``FleetReader.read()`` alone holds the event loop, and where.

    .venv/bin/python -m bench.read_stall [--workers 10000] [--reads 7] [--top 8]
        [--trees A B] [--rounds 5] [--json PATH]

One process, a fleet written by the runtime's own heartbeat (``bench.common``), then
``--reads`` reads (after one unrecorded), each with:

* a 1 ms ticker on the loop: the **longest stall** is the largest gap between ticks;
* every loop callback timed (``asyncio.events.Handle._run``): the **slowest steps**,
  each named by where its task resumed and where it suspended again (or finished), so
  packing, sending, reply parsing and snapshot building show up as separate lines.

``--trees A B`` runs the same probe in a fresh process per tree with ``PYTHONPATH`` set to
the tree (A B A B …, ``--rounds`` rounds after one warm-up, order alternating) and prints
per tree the median and min of each process's median stall, with load averages.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import inspect
import json
import os
import statistics
import subprocess
import sys
import threading
import time
import traceback
from collections import Counter
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()


def _frames(task: asyncio.Task[Any]) -> list[Any]:
    """The task's frames, outermost first, following each coroutine's ``await``."""
    frames = []
    coro: Any = task.get_coro()
    while coro is not None:
        frame = getattr(coro, "cr_frame", None) or getattr(coro, "gi_frame", None)
        if frame is None:
            break
        frames.append(frame)
        coro = getattr(coro, "cr_await", None) or getattr(coro, "gi_yieldfrom", None)
    return frames


def _where(task: asyncio.Task[Any] | None) -> str:
    """Where a task is: its innermost project frame, then its innermost frame."""
    if task is None or task.done():
        return "done"
    frames = _frames(task)
    if not frames:
        return "?"
    ours = [f for f in frames if "worker_runtime" in f.f_code.co_filename]
    frame = (ours or frames)[-1]
    inner = frames[-1]
    name = Path(frame.f_code.co_filename).name
    tail = ""
    if inner is not frame:
        tail = f" > {Path(inner.f_code.co_filename).name}:{inner.f_lineno} {inner.f_code.co_name}"
    return f"{name}:{frame.f_lineno} {frame.f_code.co_name}{tail}"


class StepTimer:
    """Times every loop callback; labels the slow ones by where their task ran."""

    def __init__(self, threshold_ms: float = 2.0) -> None:
        self.threshold = threshold_ms / 1000
        self.steps: list[tuple[float, str]] = []
        self.collections: list[tuple[float, int, str]] = []
        self._original: Any = None
        self._gc_started = 0.0

    def _gc(self, phase: str, info: dict[str, Any]) -> None:
        # A collection holds the interpreter whichever thread runs it: time each one.
        if phase == "start":
            self._gc_started = time.perf_counter()
        else:
            took = (time.perf_counter() - self._gc_started) * 1000
            self.collections.append((took, info["generation"], threading.current_thread().name))

    def install(self) -> None:
        """Wrap ``Handle._run`` (every callback the loop runs goes through it)."""
        original = asyncio.events.Handle._run
        timer = self

        def timed(handle: Any) -> None:
            cb = handle._callback
            task = getattr(cb, "__self__", None)
            task = task if isinstance(task, asyncio.Task) else None
            before = _where(task) if task is not None else repr(cb)[:80]
            started = time.perf_counter()
            original(handle)
            took = time.perf_counter() - started
            if took >= timer.threshold:
                after = _where(task) if task is not None else ""
                timer.steps.append((took * 1000, f"{before}  ->  {after}"))

        self._original = original
        asyncio.events.Handle._run = timed  # type: ignore[method-assign,assignment]
        gc.callbacks.append(self._gc)

    def uninstall(self) -> None:
        """Put the original back."""
        if self._original is not None:
            asyncio.events.Handle._run = self._original  # type: ignore[method-assign]
            self._original = None
        if self._gc in gc.callbacks:
            gc.callbacks.remove(self._gc)


async def _ticker(gaps: list[float], period: float = 0.001) -> None:
    last = time.perf_counter()
    while True:
        await asyncio.sleep(period)
        now = time.perf_counter()
        gaps.append((now - last - period) * 1000)
        last = now


async def probe(
    workers: int, reads: int, top: int, freeze_from: int | None = None
) -> dict[str, Any]:
    """Populate ``workers`` workers and time ``reads`` reads (after one warm-up)."""
    from bench.common import populate, redis_client, start_redis
    from worker_runtime.fleet import FleetReader
    from worker_runtime.keys import Keys

    server = start_redis()
    redis = redis_client(server.url)
    timer = StepTimer()
    try:
        await populate(redis, workers)
        # As the console reads (byconsole.backend), when asked: the snapshot frozen.
        known = inspect.signature(FleetReader).parameters
        options: dict[str, Any] = (
            {}
            if freeze_from is None or "freeze_from" not in known
            else {"freeze_from": freeze_from}
        )
        reader = FleetReader(redis, Keys(), **options)
        snapshot = await reader.read()
        if len(snapshot.workers) != workers:
            raise SystemExit(f"read {len(snapshot.workers)} of {workers} workers")
        stalls: list[float] = []
        read_ms: list[float] = []
        timer.install()
        for _ in range(reads):
            gaps: list[float] = []
            ticker = asyncio.create_task(_ticker(gaps))
            await asyncio.sleep(0.01)
            started = time.perf_counter()
            # The previous snapshot stays alive during the read, as in the console, and
            # is freed only after the ticker stopped (freeing it is not the read's work).
            fresh = await reader.read()
            read_ms.append((time.perf_counter() - started) * 1000)
            await asyncio.sleep(0.005)
            ticker.cancel()
            stalls.append(max(gaps, default=0.0))
            snapshot = fresh
        timer.uninstall()
    finally:
        timer.uninstall()
        await redis.aclose()
        server.cleanup()
    # Per step label: how often it was slow, its median and max (over every read).
    by_label: dict[str, list[float]] = {}
    for ms, label in timer.steps:
        by_label.setdefault(label, []).append(ms)
    ranked = sorted(by_label.items(), key=lambda kv: -max(kv[1]))[:top]
    slow_gc = sorted(timer.collections, reverse=True)[:top]
    return {
        "workers": workers,
        "reads": reads,
        "freeze_from": freeze_from,
        "longest_stall_ms": {"median": statistics.median(stalls), "min": min(stalls)},
        "stalls_ms": [round(s, 1) for s in stalls],
        "read_ms": {"median": statistics.median(read_ms), "min": min(read_ms)},
        "slow_steps": [
            {
                "step": label,
                "n": len(v),
                "median_ms": round(statistics.median(v), 1),
                "max_ms": round(max(v), 1),
            }
            for label, v in ranked
        ],
        "slowest_collections": [
            {"ms": round(ms, 1), "generation": g, "thread": t} for ms, g, t in slow_gc if ms >= 1
        ],
        "steps_over_2ms_per_read": round(
            sum(Counter(label for _, label in timer.steps).values()) / reads, 1
        ),
    }


def show(figures: dict[str, Any]) -> None:
    """Print one probe's figures."""
    s, r = figures["longest_stall_ms"], figures["read_ms"]
    print(
        f"FleetReader.read at {figures['workers']:,} workers: longest loop stall median "
        f"{s['median']:.1f} ms (min {s['min']:.1f}), read {r['median']:.0f} ms "
        f"(min {r['min']:.0f}); stalls {figures['stalls_ms']}"
    )
    print(f"  slowest loop steps (>= 2 ms: {figures['steps_over_2ms_per_read']} per read):")
    for row in figures["slow_steps"]:
        print(
            f"   {row['max_ms']:6.1f} max {row['median_ms']:6.1f} med x{row['n']:<3} {row['step']}"
        )
    collections = ", ".join(
        f"{c['ms']:.1f} ms gen {c['generation']} ({c['thread']})"
        for c in figures["slowest_collections"]
    )
    print(f"  slowest garbage collections: {collections or 'none over 1 ms'}")


def ab(
    trees: list[str], workers: int, reads: int, rounds: int, freeze_from: int | None
) -> dict[str, Any]:
    """Each tree's probe in its own process, interleaved; median/min of the medians."""
    from bench.common import interleave, load_average

    def side(tree: str) -> Any:
        def run() -> float:
            env = {**os.environ, "PYTHONPATH": tree}
            cmd = [sys.executable, str(HERE), "--child", "--workers", str(workers)]
            cmd += ["--reads", str(reads)]
            if freeze_from is not None:
                cmd += ["--freeze-from", str(freeze_from)]
            done = subprocess.run(cmd, env=env, cwd=tree, capture_output=True, text=True)
            if done.returncode != 0:
                raise SystemExit(f"{tree}: {done.stderr.strip().splitlines()[-3:]}")
            figures = json.loads(done.stdout.strip().splitlines()[-1])
            median: float = figures["longest_stall_ms"]["median"]
            return median

        return run

    print(f"load average before: {load_average()}")
    result = interleave({t: side(t) for t in trees}, repeats=rounds)
    for t in trees:
        st = result[t]
        print(
            f"{t}: longest stall per read (median of {reads}) median {st['median']:.1f} ms, "
            f"min {st['min']:.1f} ms, samples {[round(x, 1) for x in st['samples']]}"
        )
    print(f"load average: {result['load_before']} -> {result['load_after']}")
    return result


def main() -> int:
    """Parse flags, run, print."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=10_000)
    parser.add_argument("--reads", type=int, default=7)
    parser.add_argument("--top", type=int, default=8)
    parser.add_argument("--trees", nargs="+", help="A/B the probe over these source trees")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--freeze-from",
        type=int,
        help="the reader's freeze_from (as the console sets it; trees without it ignore it)",
    )
    parser.add_argument("--json", help="write the figures here")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.trees:
        result = ab(args.trees, args.workers, args.reads, args.rounds, args.freeze_from)
        if args.json:
            Path(args.json).write_text(json.dumps(result, indent=2))
        return 0
    try:
        figures = asyncio.run(probe(args.workers, args.reads, args.top, args.freeze_from))
    except Exception:
        traceback.print_exc()
        return 1
    if not args.child:
        show(figures)
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2))
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
