"""Interleaved side-by-side measurement: A B A B …, so a busy machine hits both alike.

Back-to-back repeats (all of A, then all of B) let a change in the machine's load
between the two blocks flatter or sink a ratio; interleaving spreads it over both.
Every comparison reports median and min per side and the load average before and after.
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Awaitable, Callable, Mapping
from typing import Any


def load_average() -> str:
    """The 1, 5 and 15 minute load averages, as ``/proc/loadavg`` shows them."""
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} {five:.2f} {fifteen:.2f}"


def stats(samples: list[float]) -> dict[str, Any]:
    """Median, min, max and the samples themselves."""
    return {
        "median": statistics.median(samples),
        "min": min(samples),
        "max": max(samples),
        "n": len(samples),
        "samples": samples,
    }


def _finish(samples: dict[str, list[float]], before: str) -> dict[str, Any]:
    out: dict[str, Any] = {name: stats(values) for name, values in samples.items()}
    out["load_before"] = before
    out["load_after"] = load_average()
    return out


def interleave(
    sides: Mapping[str, Callable[[], float]], repeats: int = 5, warmup: int = 1
) -> dict[str, Any]:
    """Run every side once per round, ``repeats`` rounds (after ``warmup`` unrecorded).

    Args:
        sides: name -> a function that runs once and returns its figure (seconds, ms…).
        repeats: recorded rounds (at least 5 for a reported ratio).
        warmup: unrecorded rounds first (page cache, Redis, imports).

    Returns:
        Per side :func:`stats`, plus ``load_before`` and ``load_after``.
    """
    before = load_average()
    samples: dict[str, list[float]] = {name: [] for name in sides}
    for round_ in range(warmup + repeats):
        # Alternate which side goes first, so neither always runs on a warmer machine.
        order = list(sides) if round_ % 2 == 0 else list(reversed(list(sides)))
        for name in order:
            value = sides[name]()
            if round_ >= warmup:
                samples[name].append(value)
    return _finish(samples, before)


async def ainterleave(
    sides: Mapping[str, Callable[[], Awaitable[float]]], repeats: int = 5, warmup: int = 1
) -> dict[str, Any]:
    """:func:`interleave` for coroutines (in-process figures on one event loop)."""
    before = load_average()
    samples: dict[str, list[float]] = {name: [] for name in sides}
    for round_ in range(warmup + repeats):
        order = list(sides) if round_ % 2 == 0 else list(reversed(list(sides)))
        for name in order:
            value = await sides[name]()
            if round_ >= warmup:
                samples[name].append(value)
    return _finish(samples, before)


def ratio_line(result: Mapping[str, Any], a: str, b: str, unit: str = "s") -> str:
    """``a median … (min …) vs b median … (min …): ratio x (median), y (min)``."""
    ra, rb = result[a], result[b]
    med = ra["median"] / rb["median"] if rb["median"] else float("inf")
    low = ra["min"] / rb["min"] if rb["min"] else float("inf")
    return (
        f"{a} {ra['median']:.3f} {unit} (min {ra['min']:.3f}) vs {b} {rb['median']:.3f} {unit} "
        f"(min {rb['min']:.3f}): {med:.2f}x median, {low:.2f}x min "
        f"[load {result['load_before']} -> {result['load_after']}]"
    )
