"""The performance targets, evaluated from the figures of one ``run_all``.

Pure functions over the benchmarks' JSON figures (``bench/results/*.json``): no I/O, no
figure written down anywhere but in those files. A figure a run did not produce (a
benchmark failed, was skipped, or an older result file lacks it) is reported as "not
measured", never guessed and never a crash.

Every figure is a median with its min (and max where the worst case is the target)
over the runs a benchmark made; a ratio of two sides is the ratio of their medians and
the ratio of their mins (the sides ran interleaved, ``bench.common``).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from bench.common import markdown_table

Direction = Literal["at_most", "below", "at_least"]
"""``value <= limit``, ``value < limit`` or ``value >= limit``."""

LOOKUP_ERRORS = (KeyError, TypeError, ValueError, ZeroDivisionError, IndexError, AttributeError)
"""What a missing or malformed figure raises while it is looked up."""


@dataclass(frozen=True)
class Figure:
    """One measured value: median and min over ``n`` runs (and max when it matters)."""

    median: float
    low: float
    high: float | None = None
    n: int = 0
    detail: str = ""
    """What the value is made of (the two sides of a ratio, CPU per task …)."""
    size: int | None = None
    """The fleet size it was measured at, when that differs from the target's."""


@dataclass(frozen=True)
class Goal:
    """One target: what is measured, its limit and which way is better."""

    label: str
    limit: float
    direction: Direction
    unit: str
    """``ms``, ``MB``, ``s``, ``x`` (a ratio) or ``tasks/s``."""
    source: str
    """The benchmark that measures it."""
    judged_on: Literal["median", "max"] = "median"
    size: int | None = None
    """The fleet size the target names (a figure from another size is flagged)."""


@dataclass(frozen=True)
class Verdict:
    """A goal and the figure measured for it (``None``: not measured)."""

    goal: Goal
    figure: Figure | None
    why_missing: str = ""

    @property
    def value(self) -> float | None:
        """The value the goal is judged on."""
        if self.figure is None:
            return None
        if self.goal.judged_on == "max" and self.figure.high is not None:
            return self.figure.high
        return self.figure.median

    @property
    def met(self) -> bool | None:
        """Whether the target is met (``None``: not measured)."""
        value = self.value
        if value is None or math.isnan(value):
            return None
        limit = self.goal.limit
        if self.goal.direction == "at_most":
            return value <= limit
        if self.goal.direction == "below":
            return value < limit
        return value >= limit

    @property
    def gap(self) -> str:
        """How far from the target (or the margin when it is met)."""
        value, met = self.value, self.met
        if value is None or met is None:
            return ""
        limit, unit = self.goal.limit, self.goal.unit
        if self.goal.direction == "at_least":
            if met:
                return f"margin {value / limit:.2f}x" if limit else ""
            if value <= 0:
                return "no speed to compare"
            return f"needs {limit / value:.2f}x more"
        over = value - limit
        if met:
            return f"margin {fmt(-over, unit)}"
        times = f" ({value / limit:.2f}x the target)" if limit else ""
        return f"{fmt(over, unit)} over{times}"

    @property
    def result(self) -> str:
        """``met`` / ``not met`` / ``not measured`` (with the size when it differs)."""
        met = self.met
        if met is None:
            return "not measured"
        word = "met" if met else "not met"
        size = self.figure.size if self.figure else None
        if size is not None and self.goal.size is not None and size != self.goal.size:
            return f"{word} (at {size:,} workers, not {self.goal.size:,})"
        return word


def fmt(value: float | None, unit: str) -> str:
    """A value in its unit, at the precision that unit is read at."""
    if value is None or math.isnan(value):
        return "n/a"
    if math.isinf(value):
        return "inf"
    if unit == "ms":
        return f"{value:,.1f} ms"
    if unit == "MB":
        return f"{value:,.0f} MB"
    if unit == "s":
        return f"{value:.3f} s"
    if unit == "us":
        return f"{value:,.1f} us"
    if unit == "x":
        return f"{value:.2f}x"
    if unit == "tasks/s":
        return f"{value:,.0f} tasks/s"
    return f"{value:g} {unit}"


def goal_text(goal: Goal) -> str:
    """``≤ 50 ms``, ``< 1,000 ms``, ``≥ 2.00x`` …"""
    sign = {"at_most": "≤", "below": "<", "at_least": "≥"}[goal.direction]
    return f"{sign} {fmt(goal.limit, goal.unit)}"


# -- figures from samples and interleaved sides ---------------------------------------------


def _numbers(values: Iterable[Any]) -> list[float]:
    return [
        float(v)
        for v in values
        if isinstance(v, int | float) and not isinstance(v, bool) and not math.isnan(v)
    ]


def from_samples(values: Iterable[Any], detail: str = "", size: int | None = None) -> Figure | None:
    """Median, min and max of the numeric samples (``None`` when there are none)."""
    samples = _numbers(values)
    if not samples:
        return None
    return Figure(
        statistics.median(samples), min(samples), max(samples), len(samples), detail, size
    )


def side(result: Mapping[str, Any], name: str) -> tuple[float, float, int]:
    """Median, min and run count of one side of an interleaved comparison.

    Accepts ``bench.common`` stats (``median``/``min``/``n``) and the CLI timings
    of ``bench.fleet_listing`` (``seconds``/``min``/``runs``).
    """
    r = result[name]
    median = float(r["median"] if "median" in r else r["seconds"])
    low = float(r["min"])
    n = int(r["n"]) if "n" in r else len(r.get("runs", []))
    return median, low, n


def ratio(
    result: Mapping[str, Any],
    top: str,
    bottom: str,
    unit: str = "s",
    size: int | None = None,
    names: tuple[str, str] | None = None,
) -> Figure:
    """``top / bottom`` of an interleaved comparison: ratio of medians, ratio of mins."""
    a_med, a_min, a_n = side(result, top)
    b_med, b_min, b_n = side(result, bottom)
    a_name, b_name = names or (top, bottom)
    detail = (
        f"{a_name} {fmt(a_med, unit)} (min {fmt(a_min, unit)}) / {b_name} {fmt(b_med, unit)} "
        f"(min {fmt(b_min, unit)})"
    )
    load = _load(result)
    return Figure(a_med / b_med, a_min / b_min, None, min(a_n, b_n), detail + load, size)


def _load(result: Mapping[str, Any]) -> str:
    before, after = result.get("load_before"), result.get("load_after")
    return f"; load {before} -> {after}" if before and after else ""


def by_size(table: Mapping[str, Any]) -> list[tuple[int, Any]]:
    """The entries of a table keyed by fleet size (sizes as text, as JSON keeps them) as
    ``(size, entry)``, smallest first."""
    return sorted(((int(n), entry) for n, entry in table.items()), key=lambda e: e[0])


def _sized(table: Mapping[str, Any], size: int) -> tuple[int, Any]:
    """The entry for ``size``, else the largest one there is."""
    entries = dict(by_size(table))
    if not entries:
        raise KeyError(size)
    found = size if size in entries else max(entries)
    return found, entries[found]


# -- the targets ----------------------------------------------------------------------------

Lookup = Callable[[Mapping[str, Any]], Figure | None]


def _runs(results: Mapping[str, Any], kind: str, size: int) -> tuple[int, list[dict[str, Any]]]:
    """The console runs of ``kind`` (``live`` or ``static``) at ``size``, failed ones left out."""
    cs = results["console_stall"]
    runs = cs.get(f"{kind}_runs") or {n: [f] for n, f in cs[kind].items()}
    found_size, found = _sized(runs, size)
    ok = [f for f in found if "error" not in f]
    if not ok:
        raise ValueError(found[0].get("error", "no run"))
    return found_size, ok


LIVE, STATIC = ("live", 10_000), ("static", 100_000)
"""The console runs a target reads, and the size it names."""


def _pooled(runs: list[dict[str, Any]], key: str, per_run: str = "samples") -> list[Any]:
    """Every sample of ``key`` across runs (a run without samples gives its median)."""
    out: list[Any] = []
    for run in runs:
        value = run[key]
        if isinstance(value, dict):
            out += value.get(per_run) or [value["median"]]
        else:
            out.append(value)
    return out


def _per_run(which: tuple[str, int], key: str, samples: str = "") -> Lookup:
    """One figure per console run (or every sample under ``samples`` where a run has them)."""

    def lookup(results: Mapping[str, Any]) -> Figure | None:
        size, runs = _runs(results, *which)
        values: list[Any] = []
        for r in runs:
            values += r.get(samples) or [r[key]] if samples else [r[key]]
        return from_samples(values, "", size)

    return lookup


def live_stall(results: Mapping[str, Any]) -> Figure | None:
    """Longest loop stall of each refresh, every run pooled."""
    size, runs = _runs(results, *LIVE)
    return from_samples(
        _pooled(runs, "refresh_longest_stall_ms"), f"{len(runs)} console run(s)", size
    )


def live_keys(results: Mapping[str, Any]) -> Figure | None:
    """Key → cursor moved, for keys pressed during refreshes."""
    size, runs = _runs(results, *LIVE)
    keys = _pooled(runs, "keys_during_refresh_ms")
    over = sum(int(r["keys_during_refresh_ms"].get("over_50ms", 0)) for r in runs)
    total = sum(int(r["keys_during_refresh_ms"].get("n", 0)) for r in runs)
    return from_samples(keys, f"{over} of {total} keys over 50 ms", size)


def _static_latency(labels: tuple[str, ...]) -> Lookup:
    def lookup(results: Mapping[str, Any]) -> Figure | None:
        size, runs = _runs(results, *STATIC)
        worst = [max(r["latency_ms"][label] for label in labels) for r in runs]
        return from_samples(worst, "slowest of " + ", ".join(labels) + " per run", size)

    return lookup


def _listed(results: Mapping[str, Any], size: int) -> tuple[int, Any]:
    return _sized(results["fleet_listing"]["loopback"], size)


def read_vs_floor(results: Mapping[str, Any]) -> Figure | None:
    """``FleetReader.read()`` / the bare pipelined read, same run."""
    size, row = _listed(results, 10_000)
    return ratio(row["read_vs_floor"], "read_build", "floor", "ms", size, ("read", "floor"))


def table_vs_json(results: Mapping[str, Any]) -> Figure | None:
    """``--format table`` / ``--format json``, fresh processes."""
    size, row = _listed(results, 10_000)
    return ratio(row, "table", "ours", "s", size, ("table", "json"))


def _vs_rq(kind: Literal["loopback", "delayed"], size: int, ours: str = "ours") -> Lookup:
    def lookup(results: Mapping[str, Any]) -> Figure | None:
        fl = results["fleet_listing"]
        found, row = _sized(fl[kind], size)
        name = "--format table" if ours == "table" else "byconsole --snapshot"
        fig = ratio(row, "rq", ours, "s", found, ("rq info", name))
        if kind == "delayed":
            rtt = row.get("rtt_ms") or fl.get("delay", {}).get("rtt_delayed_ms")
            path = fl.get("delay", {}).get("kind", "")
            extra = f"; PING RTT {rtt:.2f} ms ({path})" if rtt else ""
            fig = Figure(fig.median, fig.low, None, fig.n, fig.detail + extra, fig.size)
        return fig

    return lookup


def cold_start(results: Mapping[str, Any]) -> Figure | None:
    """``byconsole --snapshot`` start-up / ``rq info``'s, empty Redis."""
    startup = results["fleet_listing"]["startup"]
    return ratio(startup, "ours", "rq", "s", None, ("byconsole", "rq info"))


def results_speedup(results: Mapping[str, Any]) -> Figure | None:
    """Runtime with results stored, this tree / the previous one."""
    tp = results["throughput_results"]
    sides = tp["sides"]
    fig = ratio(
        _tp_sides(tp),
        "worker_runtime",
        "baseline",
        "tasks/s",
        None,
        ("now", "before"),
    )
    cpu = "; worker CPU/task " + ", ".join(
        f"{name} {sides[key]['worker_cpu_us_per_task']['median']:.0f} us"
        for name, key in (("now", "worker_runtime"), ("before", "baseline"))
    )
    base = tp.get("baseline_rev")
    rev = f"; before = {base}" if base else ""
    return Figure(fig.median, fig.low, None, fig.n, fig.detail + cpu + rev, None)


def _comparison(sides: Mapping[str, Any], measured: Mapping[str, Any]) -> dict[str, Any]:
    """``sides`` as one interleaved comparison, with the load averages ``measured`` holds."""
    load = {k: measured.get(k) for k in ("load_before", "load_after")}
    return {**sides, **load}


def _tp_sides(tp: Mapping[str, Any]) -> dict[str, Any]:
    """The interleaved tasks/s stats of ``bench.throughput --ab`` as one comparison."""
    rates = {n: s["tasks_per_s"] for n, s in tp["sides"].items() if "error" not in s}
    return _comparison(rates, tp)


def results_rate(results: Mapping[str, Any]) -> Figure | None:
    """Tasks/s of the runtime with results stored, every recorded run."""
    tp = results["throughput_results"]
    ours = tp["sides"]["worker_runtime"]
    cpu = ours["worker_cpu_us_per_task"]
    detail = f"worker CPU/task median {cpu['median']:.0f} us (min {cpu['min']:.0f} us)"
    fig = from_samples(ours["tasks_per_s"]["samples"], detail + _load(tp))
    return fig


def _envelope(figure: str, unit: str) -> Lookup:
    """Envelope / native of one figure's stats (``bench.envelope_throughput``)."""

    def lookup(results: Mapping[str, Any]) -> Figure | None:
        r = results["envelope_throughput"]
        sides = {name: side[figure] for name, side in r["sides"].items()}
        return ratio(_comparison(sides, r), "envelope", "native", unit)

    return lookup


COMPARISONS: dict[str, Callable[[Mapping[str, Any]], list[tuple[str, int, bool]]]] = {}
"""Filled below: benchmark -> its comparisons as (name, rounds, load recorded)."""


def _interleaved(r: Mapping[str, Any]) -> tuple[int, bool]:
    # The sides are the timed entries; others (the CPU times beside them) are not sides.
    rounds = [
        side(r, k)[2]
        for k, v in r.items()
        if isinstance(v, dict) and ("median" in v or "seconds" in v)
    ]
    return min(rounds, default=0), bool(r.get("load_before") and r.get("load_after"))


def _listing_comparisons(r: Mapping[str, Any]) -> list[tuple[str, int, bool]]:
    out = [("start-up", *_interleaved(_cli_sides(r["startup"])))] if "startup" in r else []
    for kind in ("loopback", "delayed"):
        for n, row in r.get(kind, {}).items():
            out.append((f"{kind} {int(n):,}", *_interleaved(_cli_sides(row))))
            if "read_vs_floor" in row:
                out.append((f"read_vs_floor {int(n):,}", *_interleaved(row["read_vs_floor"])))
    return out


def _cli_sides(row: Mapping[str, Any]) -> dict[str, Any]:
    return _comparison({k: row[k] for k in ("ours", "rq", "table") if k in row}, row)


def _throughput_comparisons(r: Mapping[str, Any]) -> list[tuple[str, int, bool]]:
    return [("A/B", *_interleaved(_tp_sides(r)))]


def _peer_comparisons(r: Mapping[str, Any]) -> list[tuple[str, int, bool]]:
    if "sides" not in r:
        return [("peers, one run each", 1, False)]
    return [("peers", *_interleaved(_tp_sides(r)))]


COMPARISONS.update(
    fleet_listing=_listing_comparisons,
    throughput_results=_throughput_comparisons,
    throughput=_peer_comparisons,
    envelope_throughput=_throughput_comparisons,
)


def interleaving(results: Mapping[str, Any]) -> tuple[bool | None, str]:
    """Whether every comparison ran interleaved ≥ 5 rounds with the load recorded."""
    found: list[tuple[str, int, bool]] = []
    broken: list[str] = []
    for bench, collect in COMPARISONS.items():
        if bench not in results:
            continue
        try:
            found += [(f"{bench} {name}", n, load) for name, n, load in collect(results[bench])]
        except LOOKUP_ERRORS:
            broken.append(bench)
    if not found:
        return None, "no comparison measured"
    short = [f"{name}: {n}" for name, n, load in found if n < 5]
    unloaded = [name for name, _, load in found if not load]
    parts = [f"{len(found)} comparisons, fewest rounds {min(n for _, n, _ in found)}"]
    if short:
        parts.append("under 5 rounds: " + ", ".join(short))
    if unloaded:
        parts.append("no load average: " + ", ".join(unloaded))
    if broken:
        parts.append("unreadable: " + ", ".join(broken))
    return not short and not unloaded and not broken, "; ".join(parts)


# fmt: off
GOALS: list[tuple[Goal, Lookup]] = [
    # (target, how its figure is found)
    (Goal("10,000 workers: longest event-loop stall during a refresh",
          50, "at_most", "ms", "console_stall", "max", 10_000), live_stall),
    (Goal("10,000 workers: keys pressed during a refresh answered",
          50, "at_most", "ms", "console_stall", "max", 10_000), live_keys),
    (Goal("10,000 workers: first paint of the Workers view after the read",
          300, "below", "ms", "console_stall", size=10_000),
     _per_run(LIVE, "first_paint_after_read_ms")),
    (Goal("10,000 workers: 1%-changed refresh painted after the read",
          30, "below", "ms", "console_stall", size=10_000),
     _per_run(LIVE, *(f"changed_1pct_painted_after_read_{k}" for k in ("ms", "samples")))),
    (Goal("10,000 workers: console peak RSS",
          200, "below", "MB", "console_stall", size=10_000), _per_run(LIVE, "peak_rss_mb")),
    (Goal("100,000 workers: first paint after the read",
          1_000, "below", "ms", "console_stall --static", size=100_000),
     _per_run(STATIC, "first_paint_after_read_ms")),
    (Goal("100,000 workers: scroll (page down, end, home) until painted",
          100, "below", "ms", "console_stall --static", size=100_000),
     _static_latency(("page down", "end", "home"))),
    (Goal("100,000 workers: filter (1%, cleared) until painted",
          100, "below", "ms", "console_stall --static", size=100_000),
     _static_latency(("filter 1%", "filter cleared"))),
    (Goal("100,000 workers: sort (by jobs, reversed) until painted",
          100, "below", "ms", "console_stall --static", size=100_000),
     _static_latency(("sort by jobs", "sort reversed"))),
    (Goal("100,000 workers: console peak RSS",
          1_024, "below", "MB", "console_stall --static", size=100_000),
     _per_run(STATIC, "peak_rss_mb")),
    (Goal("10,000 workers: read + build / the floor (bare pipelined read, same fields)",
          1.5, "at_most", "x", "fleet_listing", size=10_000), read_vs_floor),
    (Goal("10,000 workers: `--snapshot --format table` / our `--format json`",
          1.5, "at_most", "x", "fleet_listing", size=10_000), table_vs_json),
    (Goal("10,000 workers: `--format table` speed-up over `rq info`, end to end",
          3, "at_least", "x", "fleet_listing", size=10_000),
     _vs_rq("loopback", 10_000, "table")),
    (Goal("cold start: `byconsole --snapshot` / `rq info` (empty Redis)",
          1.0, "at_most", "x", "fleet_listing"), cold_start),
    (Goal("1,000 workers, loopback: snapshot speed-up over `rq info`, end to end",
          2, "at_least", "x", "fleet_listing", size=1_000),
     _vs_rq("loopback", 1_000)),
    (Goal("10,000 workers, loopback: snapshot speed-up over `rq info`, end to end",
          5, "at_least", "x", "fleet_listing", size=10_000),
     _vs_rq("loopback", 10_000)),
    (Goal("1,000 workers, ~1 ms round trip: snapshot speed-up over `rq info`",
          5, "at_least", "x", "fleet_listing (delay relay)", size=1_000),
     _vs_rq("delayed", 1_000)),
    (Goal("runtime with task outputs stored: speed-up over the previous runtime",
          2, "at_least", "x", "throughput --results --ab"), results_speedup),
    (Goal("runtime with task outputs stored: throughput",
          10_000, "at_least", "tasks/s", "throughput --results --ab"),
     results_rate),
    (Goal("task envelope, results delivered: throughput / the legacy entry's (issue 28)",
          0.8, "at_least", "x", "envelope_throughput"), _envelope("tasks_per_s", "tasks/s")),
    (Goal("task envelope, results delivered: worker CPU per task / the legacy entry's "
          "(issue 28)", 1.25, "at_most", "x", "envelope_throughput"),
     _envelope("worker_cpu_us_per_task", "us")),
]
# fmt: on


RESULTS_OF = {
    "console_stall": "console_stall",
    "fleet_listing": "fleet_listing",
    "throughput": "throughput_results",
    "envelope_throughput": "envelope_throughput",
}
"""A goal's script -> the name ``run_all`` files its figures under."""


@dataclass
class Table:
    """The evaluated targets, and the interleaving check."""

    verdicts: list[Verdict] = field(default_factory=list)
    interleaved: tuple[bool | None, str] = (None, "")


def evaluate(results: Mapping[str, Any], errors: Mapping[str, str] | None = None) -> Table:
    """Every target against the figures in ``results`` (benchmark name -> its JSON)."""
    errors = errors or {}
    table = Table()
    for goal, lookup in GOALS:
        bench = RESULTS_OF[goal.source.split()[0]]
        try:
            figure = lookup(results)
            why = "" if figure is not None else "no samples"
        except LOOKUP_ERRORS as exc:
            figure = None
            if bench in errors:
                why = f"{bench} failed: {errors[bench]}"
            elif bench not in results:
                why = f"{bench} did not run"
            else:
                why = f"no figure ({type(exc).__name__}: {exc})"
        table.verdicts.append(Verdict(goal, figure, why))
    table.interleaved = interleaving(results)
    return table


HEADER = ["target", "goal", "median", "min", "max", "n", "result", "gap", "measured by", "detail"]


def render(table: Table) -> list[str]:
    """The Markdown table (and its notes) for BENCHMARKS.md."""
    rows: list[list[str]] = []
    for v in table.verdicts:
        g, f = v.goal, v.figure
        judged = " (judged on the max)" if g.judged_on == "max" else ""
        script, *flags = g.source.split()
        rows.append([
            g.label,
            goal_text(g) + judged,
            fmt(f.median, g.unit) if f else "",
            fmt(f.low, g.unit) if f else "",
            fmt(f.high, g.unit) if f and f.high is not None else "",
            str(f.n) if f else "",
            f"**{v.result}**",
            v.gap,
            " ".join([f"`bench/{script}.py`", *flags]),
            (f.detail if f else v.why_missing).replace("|", "/"),
        ])  # fmt: skip
    met, how = table.interleaved
    word = "not measured" if met is None else ("met" if met else "not met")
    label = "every comparison interleaved (ABAB…), ≥ 5 rounds, load average before and after"
    rows.append([label, "≥ 5 rounds", "", "", "", "", f"**{word}**", "", "`bench/common.py`", how])
    return markdown_table(HEADER, rows)
