"""The target table of BENCHMARKS.md: verdicts and gaps from given figures.

No benchmark runs here: the figures are written out below as a run would have saved
them, and the table must say met / not met / not measured and the gap from them alone.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from bench import targets
from bench.report import Run, render
from bench.targets import Figure, Goal, Verdict, evaluate


def _cmp(a: list[float], b: list[float], names: tuple[str, str]) -> dict[str, Any]:
    """An interleaved comparison as ``bench.common.interleave`` writes it."""
    out: dict[str, Any] = {"load_before": "0.10 0.20 0.30", "load_after": "0.40 0.50 0.60"}
    for name, samples in zip(names, (a, b), strict=True):
        ordered = sorted(samples)
        out[name] = {
            "median": ordered[len(ordered) // 2],
            "min": ordered[0],
            "max": ordered[-1],
            "n": len(samples),
            "samples": samples,
        }
    return out


def _cli(samples: list[float]) -> dict[str, Any]:
    """One CLI's timings as ``bench.fleet_listing`` writes them."""
    ordered = sorted(samples)
    return {
        "seconds": ordered[len(ordered) // 2],
        "min": ordered[0],
        "runs": samples,
        "max_rss_mb": 50.0,
        "commands": 10,
    }


def _row(**sides: dict[str, Any]) -> dict[str, Any]:
    """One size's interleaved CLIs as ``bench.fleet_listing`` writes them."""
    return {**sides, "load_before": "1.00 1.00 1.00", "load_after": "1.10 1.00 1.00"}


def _live(stalls: list[float], keys: list[float], first_paint: float) -> dict[str, Any]:
    return {
        "first_paint_after_read_ms": first_paint,
        "refresh_longest_stall_ms": {"median": 0.0, "max": max(stalls), "samples": stalls},
        "keys_during_refresh_ms": {
            "n": len(keys),
            "over_50ms": sum(1 for k in keys if k > 50),
            "median": 0.0,
            "samples": keys,
        },
        "changed_1pct_painted_after_read_ms": 25.0,
        "changed_1pct_painted_after_read_samples": [20.0, 25.0, 40.0],
        "peak_rss_mb": 180.0,
    }


def _static(sort_ms: float) -> dict[str, Any]:
    return {
        "first_paint_after_read_ms": 400.0,
        "latency_ms": {
            "page down": 10.0,
            "end": 30.0,
            "home": 20.0,
            "filter 1%": 150.0,
            "filter cleared": 90.0,
            "sort by jobs": sort_ms,
            "sort reversed": 40.0,
        },
        "peak_rss_mb": 900.0,
    }


def _stats(samples: list[float]) -> dict[str, Any]:
    """``bench.common.stats`` of ``samples``."""
    ordered = sorted(samples)
    return {
        "median": ordered[len(ordered) // 2],
        "min": ordered[0],
        "max": ordered[-1],
        "n": len(samples),
        "samples": samples,
    }


def _envelope_side(rates: list[float], cpu: list[float], redis_us: float) -> dict[str, Any]:
    """One side of ``bench.envelope_throughput`` (``bench.throughput.side_figures``)."""
    return {
        "tasks_per_s": _stats(rates),
        "worker_cpu_us_per_task": _stats(cpu),
        "redis_commands_per_task": 2.37 if redis_us > 25 else 1.37,
        "redis_cpu_us_per_task": _stats([redis_us] * len(rates)),
        "redis_commands": {"evalsha": 100},
        "config": "worker-runtime run --concurrency 100",
    }


def results() -> dict[str, Any]:
    """A whole run's figures, every target's figure present."""
    return {
        "console_stall": {
            "live_runs": {
                "10000": [
                    _live([10.0, 20.0, 30.0], [5.0, 8.0], 250.0),
                    _live([15.0, 60.0, 25.0], [5.0, 70.0], 350.0),
                    _live([12.0, 22.0, 32.0], [6.0, 9.0], 280.0),
                ]
            },
            "static_runs": {"100000": [_static(80.0), _static(120.0), _static(90.0)]},
        },
        "fleet_listing": {
            "startup": _row(ours=_cli([0.3] * 5), rq=_cli([0.25] * 5)),
            "loopback": {
                "1000": _row(ours=_cli([0.2] * 5), rq=_cli([0.5] * 5)),
                "10000": {
                    **_row(ours=_cli([0.5] * 5), rq=_cli([2.0] * 5), table=_cli([0.6] * 5)),
                    # read/floor = 2.0 (medians), 1.9 (mins)
                    "read_vs_floor": _cmp(
                        [190.0, 200.0, 200.0, 210.0, 220.0],
                        [100.0, 100.0, 100.0, 105.0, 110.0],
                        ("read_build", "floor"),
                    ),
                },
            },
            "delayed": {"1000": {**_row(ours=_cli([0.3] * 5), rq=_cli([3.0] * 5)), "rtt_ms": 1.2}},
            "delay": {"kind": "relay", "rtt_delayed_ms": 1.2},
        },
        "throughput_results": {
            "load_before": "1 1 1",
            "load_after": "1 1 1",
            "sides": {
                "worker_runtime": {
                    "tasks_per_s": {
                        "median": 12_000.0,
                        "min": 11_000.0,
                        "max": 13_000.0,
                        "n": 5,
                        "samples": [11_000.0, 12_000.0, 13_000.0, 12_500.0, 11_500.0],
                    },
                    "worker_cpu_us_per_task": {"median": 70.0, "min": 65.0},
                },
                "baseline": {
                    "tasks_per_s": {"median": 5_000.0, "min": 4_000.0, "max": 6_000.0, "n": 5},
                    "worker_cpu_us_per_task": {"median": 150.0, "min": 140.0},
                },
            },
        },
        # envelope/native: throughput 0.75x (median), 0.70x (min); CPU 1.20x, 1.25x.
        "envelope_throughput": {
            "tasks": 20_000,
            "concurrency": 100,
            "sessions": 100,
            "repeats": 5,
            "load_before": "0.50 0.40 0.30",
            "load_after": "0.60 0.50 0.40",
            "sides": {
                "envelope": _envelope_side(
                    [7_000.0, 7_500.0, 7_500.0, 8_000.0, 9_000.0],
                    [100.0, 110.0, 120.0, 125.0, 130.0],
                    30.0,
                ),
                "native": _envelope_side(
                    [10_000.0, 10_000.0, 10_000.0, 11_000.0, 12_000.0],
                    [80.0, 95.0, 100.0, 100.0, 105.0],
                    20.0,
                ),
            },
        },
    }


def by_label(table: targets.Table) -> dict[str, Verdict]:
    return {v.goal.label: v for v in table.verdicts}


def find(table: targets.Table, words: str) -> Verdict:
    """The one verdict whose label contains ``words``."""
    found = [v for v in table.verdicts if words in v.goal.label]
    assert len(found) == 1, [v.goal.label for v in found]
    return found[0]


def figure(table: targets.Table, words: str) -> Figure:
    """The figure of the one verdict whose label contains ``words`` (it must have one)."""
    found = find(table, words).figure
    assert found is not None, words
    return found


# -- one goal, one figure -----------------------------------------------------------------


def test_at_most_met_and_not_met_with_the_gap() -> None:
    goal = Goal("stall", 50, "at_most", "ms", "console_stall")
    assert Verdict(goal, Figure(50.0, 40.0)).met is True  # the limit itself is allowed
    over = Verdict(goal, Figure(80.0, 60.0))
    assert over.met is False
    assert over.result == "not met"
    assert over.gap == "30.0 ms over (1.60x the target)"
    assert Verdict(goal, Figure(20.0, 10.0)).gap == "margin 30.0 ms"


def test_below_is_strict() -> None:
    goal = Goal("paint", 300, "below", "ms", "console_stall")
    assert Verdict(goal, Figure(300.0, 200.0)).met is False
    assert Verdict(goal, Figure(299.9, 200.0)).met is True


def test_at_least_gap_is_the_factor_still_needed() -> None:
    goal = Goal("speed-up", 5, "at_least", "x", "fleet_listing")
    short = Verdict(goal, Figure(2.0, 2.5))
    assert short.met is False
    assert short.gap == "needs 2.50x more"
    assert Verdict(goal, Figure(6.0, 5.5)).met is True
    assert Verdict(goal, Figure(0.0, 0.0)).gap == "no speed to compare"


def test_worst_case_targets_are_judged_on_the_max() -> None:
    goal = Goal("stall", 50, "at_most", "ms", "console_stall", judged_on="max")
    verdict = Verdict(goal, Figure(median=20.0, low=10.0, high=70.0))
    assert verdict.value == 70.0
    assert verdict.met is False
    assert verdict.gap == "20.0 ms over (1.40x the target)"


def test_missing_or_nan_figure_is_not_measured() -> None:
    goal = Goal("rss", 200, "below", "MB", "console_stall")
    for verdict in (Verdict(goal, None), Verdict(goal, Figure(float("nan"), float("nan")))):
        assert verdict.met is None
        assert verdict.result == "not measured"
        assert verdict.gap == ""


def test_a_figure_from_another_size_says_so() -> None:
    goal = Goal("rss", 200, "below", "MB", "console_stall", size=10_000)
    assert Verdict(goal, Figure(100.0, 90.0, size=1_000)).result == (
        "met (at 1,000 workers, not 10,000)"
    )
    assert Verdict(goal, Figure(100.0, 90.0, size=10_000)).result == "met"


# -- a whole run ----------------------------------------------------------------------------


def test_every_target_from_a_full_run() -> None:
    table = evaluate(results())
    assert len(table.verdicts) == len(targets.GOALS)
    assert all(v.figure is not None for v in table.verdicts), [
        (v.goal.label, v.why_missing) for v in table.verdicts if v.figure is None
    ]
    stall = find(table, "longest event-loop stall")
    assert figure(table, "longest event-loop stall").high == 60.0  # every refresh pooled
    assert figure(table, "longest event-loop stall").n == 9
    assert stall.met is False
    assert find(table, "keys pressed").met is False
    assert "1 of 6 keys over 50 ms" in figure(table, "keys pressed").detail
    paint = figure(table, "first paint of the Workers view")
    assert (paint.median, paint.low) == (280.0, 250.0)
    assert find(table, "first paint of the Workers view").met is True
    assert figure(table, "1%-changed").median == 25.0
    assert figure(table, "sort (by jobs").median == 90.0
    assert find(table, "sort (by jobs").met is True
    assert find(table, "filter (1%").met is False  # 150 ms per run
    assert find(table, "100,000 workers: first paint").met is True
    read = find(table, "read + build")
    assert figure(table, "read + build").median == pytest.approx(2.0)
    assert figure(table, "read + build").low == pytest.approx(1.9)
    assert read.met is False and read.gap == "0.50x over (1.33x the target)"
    assert find(table, "cold start").met is False  # 0.30 s vs rq info's 0.25 s
    assert figure(table, "`--format table` speed-up").median == pytest.approx(2.0 / 0.6)
    assert find(table, "`--format table` speed-up").met is True
    assert figure(table, "1,000 workers, loopback").median == pytest.approx(2.5)
    assert find(table, "10,000 workers, loopback").met is False  # 4x < 5x
    assert find(table, "round trip").met is True
    assert "PING RTT 1.20 ms (relay)" in figure(table, "round trip").detail
    speedup = figure(table, "speed-up over the previous runtime")
    assert speedup.median == pytest.approx(2.4)
    assert "now 70 us, before 150 us" in speedup.detail
    assert find(table, "outputs stored: throughput").met is True
    rate = figure(table, "task envelope, results delivered: throughput")
    assert (rate.median, rate.low) == pytest.approx((0.75, 0.70))
    assert "load 0.50 0.40 0.30 -> 0.60 0.50 0.40" in rate.detail
    envelope = find(table, "task envelope, results delivered: throughput")
    assert envelope.met is False and envelope.gap == "needs 1.07x more"
    cpu = figure(table, "task envelope, results delivered: worker CPU per task")
    assert (cpu.median, cpu.low) == pytest.approx((1.2, 1.25))
    assert "envelope 120.0 us (min 100.0 us) / native 100.0 us" in cpu.detail
    assert find(table, "task envelope, results delivered: worker CPU").met is True
    assert table.interleaved[0] is True, table.interleaved


def test_nothing_measured_never_crashes() -> None:
    table = evaluate({}, {"fleet_listing": "exit 1"})
    assert {v.result for v in table.verdicts} == {"not measured"}
    read = find(table, "read + build")
    assert read.why_missing == "fleet_listing failed: exit 1"
    assert find(table, "longest event-loop stall").why_missing == "console_stall did not run"
    assert find(table, "envelope, results delivered: throughput").why_missing == (
        "envelope_throughput did not run"
    )
    assert table.interleaved == (None, "no comparison measured")


@pytest.mark.parametrize(
    "damage",
    [
        lambda r: r["console_stall"].update(live_runs={"10000": [{"error": "crashed"}]}),
        lambda r: r["console_stall"]["live_runs"]["10000"][0].pop("peak_rss_mb"),
        lambda r: r["fleet_listing"]["loopback"]["10000"].update(read_vs_floor="garbage"),
        lambda r: r["fleet_listing"].update(loopback={}),
        lambda r: r["throughput_results"]["sides"].pop("baseline"),
        lambda r: r["fleet_listing"]["loopback"]["10000"]["ours"].update(seconds=0.0),
        lambda r: r.update(console_stall=None),
        lambda r: r["envelope_throughput"].update(sides={}, failed={"native": "exit 1"}),
        lambda r: r["envelope_throughput"]["sides"]["native"]["tasks_per_s"].update(median=0),
    ],
)
def test_malformed_figures_are_not_measured(damage: Any) -> None:
    figures = copy.deepcopy(results())
    damage(figures)
    table = evaluate(figures)
    untouched = by_label(evaluate(results()))
    missing = [v for v in table.verdicts if v.result == "not measured"]
    assert missing, "the damaged figure must read as not measured"
    for v in table.verdicts:
        if v.result != "not measured":
            assert v.result == untouched[v.goal.label].result
    assert targets.render(table)  # renders all the same


def test_a_comparison_under_five_rounds_fails_the_interleaving_target() -> None:
    figures = results()
    figures["fleet_listing"]["startup"] = _row(ours=_cli([0.3] * 3), rq=_cli([0.25] * 3))
    met, how = evaluate(figures).interleaved
    assert met is False
    assert "fleet_listing start-up: 3" in how


def test_cpu_times_beside_the_sides_are_not_taken_for_a_side() -> None:
    # fleet_listing records CPU times next to the timed sides; they are no comparison.
    figures = results()
    cold = _row(ours=_cli([0.3] * 5), rq=_cli([0.25] * 5))
    cold["cpu"] = {"ours": {"median": 0.2, "min": 0.2}, "rq": {"median": 0.2, "min": 0.2}}
    figures["fleet_listing"]["startup"] = cold
    met, how = evaluate(figures).interleaved
    assert met is True, how
    assert "unreadable" not in how


def test_report_puts_the_table_near_the_top() -> None:
    run = Run(results=results(), errors={})
    text = render(run)
    head, table = text.split("## Targets (issues 14 and 28)", 1)
    assert "## Machine" in head
    top = table.split("\n## ", 1)[0]  # the targets section, up to the next section
    for goal, _ in targets.GOALS:
        assert goal.label in top
    assert top.count("**not met**") == len(
        [v for v in evaluate(results()).verdicts if v.met is False]
    )
    assert "**not measured**" not in top
    empty = render(Run(results={}))
    assert empty.count("**not measured**") == len(targets.GOALS) + 1


def test_envelope_section_from_its_figures() -> None:
    command = ".venv/bin/python -m bench.envelope_throughput --tasks 20000 --repeats 5"
    text = render(Run(results=results(), commands={"envelope_throughput": command}))
    section = text.split("## Task envelope vs the legacy entry", 1)[1].split("\n## ", 1)[0]
    assert "drains 20,000 no-op tasks" in section
    assert "5 recorded rounds after a warm-up" in section
    assert "load average 0.50 0.40 0.30 -> 0.60 0.50 0.40" in section
    assert "| envelope (`ASK_AGENT`) | 7,500 (min 7,000) | 120.0 us (min 100.0 us) | 2.37 " in (
        section
    )
    assert "| legacy `{kind, data}` | 10,000 (min 10,000) | 100.0 us (min 80.0 us) | 1.37 " in (
        section
    )
    assert "| 30.0 us (min 30.0 us) |" in section  # Redis CPU per task
    assert "throughput 0.75x / 0.70x, worker CPU per task 1.20x / 1.25x" in section
    assert "Redis CPU per task 1.50x / 1.50x" in section
    assert f"Command: `{command}`" in section


def test_a_missing_or_failed_envelope_run_reads_not_measured() -> None:
    figures = results()
    del figures["envelope_throughput"]
    failed = render(Run(results=figures, errors={"envelope_throughput": "native failed"}))
    top = failed.split("## Targets (issues 14 and 28)", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in top.splitlines() if "task envelope" in line]
    assert len(rows) == 2
    assert all("**not measured**" in row for row in rows)
    assert all("envelope_throughput failed: native failed" in row for row in rows)
    assert "## envelope_throughput\n\nFailed: native failed" in failed
    assert "## Task envelope vs the legacy entry" not in failed


def test_only_a_full_run_replaces_the_repositorys_report(tmp_path: Path) -> None:
    from bench.common import ROOT
    from bench.run_all import report_path

    root_report = ROOT / "BENCHMARKS.md"
    assert report_path(tmp_path, quick=False, only=False, output=None) == root_report
    assert report_path(tmp_path, quick=True, only=False, output=None).parent == tmp_path
    assert report_path(tmp_path, quick=False, only=True, output=None).parent == tmp_path
    assert report_path(tmp_path, quick=False, only=True, output="x.md") == Path("x.md")
