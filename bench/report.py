"""BENCHMARKS.md from the JSON figures the benchmarks wrote (``run_all.py`` calls it).

.venv/bin/python -m bench.report bench/results   # rewrite BENCHMARKS.md from saved figures
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import targets as issue

ROOT = Path(__file__).resolve().parents[1]

NAMES = {
    "worker_runtime": "**worker_runtime**",
    "arq": "arq",
    "taskiq": "taskiq-redis (RedisStreamBroker)",
    "dramatiq": "dramatiq (RedisBroker)",
    "celery": "celery (Redis broker)",
}


@dataclass
class Run:
    """Everything one ``run_all`` produced."""

    results: dict[str, dict[str, Any]]
    """benchmark name -> its JSON figures (missing when it failed)."""
    outputs: dict[str, str] = field(default_factory=dict)
    """benchmark name -> what it printed."""
    commands: dict[str, str] = field(default_factory=dict)
    """benchmark name -> the exact command line."""
    errors: dict[str, str] = field(default_factory=dict)
    started: str = ""
    seconds: float = 0.0
    load_before: str = ""
    load_after: str = ""
    environment: dict[str, str] = field(default_factory=dict)
    durations: dict[str, float] = field(default_factory=dict)
    """benchmark name -> seconds it took."""


def _f(value: Any, fmt: str = ",.0f", unit: str = "") -> str:
    if value is None or (isinstance(value, float) and value != value):
        return "n/a"
    return f"{value:{fmt}}{unit}"


def _ms(value: Any) -> str:
    return _f(value, ",.1f", " ms")


def _table(header: str, rows: list[list[str]]) -> list[str]:
    """A Markdown table; ``header`` is its cells joined by ``" | "``."""
    cells = header.split(" | ")
    lines = ["| " + " | ".join(cells) + " |", "|" + "|".join(" --- " for _ in cells) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return [*lines, ""]


# -- sections -------------------------------------------------------------------------------


def _cli_time(side: dict[str, Any]) -> str:
    low = f" (min {side['min']:.3f})" if "min" in side else ""
    return f"{side['seconds']:.3f} s{low}"


def _fleet_listing(r: dict[str, Any]) -> list[str]:
    lines = ["## 1. Fleet listing: `byconsole --snapshot --format json` vs `rq info`", ""]
    lines += [
        "Both fleets live in the same `redis-server`: ours written by the runtime's own "
        "heartbeat (`bench/common.py`, instances of 100 replicas over three agent "
        "types), rq's registered with `rq.Worker(...).register_birth()` on three queues. "
        "Each CLI runs as a fresh process (interpreter start-up included on both sides), "
        "the CLIs of one size interleaved (A B C, C B A, …), median (min); "
        "commands are `INFO commandstats` deltas for one run (they include the commands a "
        "read-only script runs inside Redis: they show server work, not round trips).",
        "",
    ]
    st = r.get("startup")
    if st:
        lines += [
            f"Start-up alone (empty Redis): `byconsole --snapshot` {_cli_time(st['ours'])}, "
            f"`rq info` {_cli_time(st['rq'])}.",
            "",
        ]
    rows = []
    for n, row in r.get("loopback", {}).items():
        table = row.get("table")
        rows.append(
            [
                f"{int(n):,}",
                _cli_time(row["ours"]),
                _cli_time(row["rq"]),
                f"**{row['speedup']:.1f}x**",
                f"{_cli_time(table)}, **{row['table_speedup']:.1f}x**" if table else "n/a",
                f"{row['ours']['commands']:,} / {row['rq']['commands']:,}",
                f"{row['reader_ms']:.1f} ms ({row['reader_round_trips']} round trips)",
                f"{row['rq_worker_all_ms']:.1f} ms",
                f"**{row['listing_speedup']:.1f}x**",
                f"{row['ours']['max_rss_mb']:.0f} / {row['rq']['max_rss_mb']:.0f} MB",
            ]
        )
    lines += ["### Loopback", ""]
    lines += _table(
        (
            "workers | byconsole --snapshot | rq info | CLI speed-up | --format table (speed-up) | "
            "Redis commands (ours / rq) | FleetReader.read | rq Worker.all + fields | "
            "listing speed-up | peak RSS (ours / rq)"
        ),
        rows,
    )
    delay = r.get("delay")
    if delay:
        lines += [f"### Over a slower network: {delay['path']}", ""]
        for note in delay.get("notes", []):
            lines += [f"- {note}"]
        lines += [
            f"- Redis PING round trip: {delay['rtt_delayed_ms']:.2f} ms through the path "
            f'({delay["rtt_loopback_ms"]:.3f} ms on loopback). "Round trips" below is the '
            "extra time over loopback divided by the extra RTT (resolution: the run-to-run "
            "noise, a few dozen round trips).",
            "",
        ]
        rows = []
        for n, row in r.get("delayed", {}).items():
            rows.append(
                [
                    f"{int(n):,}",
                    f"{_cli_time(row['ours'])} (~{row['ours']['implied_round_trips']:,.0f})",
                    f"{_cli_time(row['rq'])} (~{row['rq']['implied_round_trips']:,.0f})",
                    f"**{row['speedup']:.1f}x**",
                ]
            )
        lines += _table(
            "workers | byconsole --snapshot (round trips) | rq info (round trips) | speed-up",
            rows,
        )
    return lines


def _throughput(r: dict[str, Any]) -> list[str]:
    lines = [
        "## 2. Task throughput: one worker process, no-op tasks",
        "",
        f"{r['tasks']:,} tasks queued through each system's own client before its worker "
        f"starts; concurrency {r['concurrency']} everywhere; drain time from the first task "
        "to the last (each task only counts itself in-process, no Redis call). CPU and "
        "commands are measured from the worker's start to its last task."
        + (
            f" The systems ran interleaved (A B C … C B A …, {r['repeats']} recorded rounds "
            "after a warm-up): medians, tasks/s with its min; load average "
            f"{r['load_before']} -> {r['load_after']}."
            if r.get("repeats", 1) > 1
            else ""
        ),
        "",
    ]
    ok = {s: v for s, v in r["systems"].items() if "tasks_per_s" in v}
    best_peer = max((v["tasks_per_s"] for s, v in ok.items() if s != "worker_runtime"), default=0)
    rows = []
    for system, v in sorted(ok.items(), key=lambda kv: -kv[1]["tasks_per_s"]):
        rows.append(
            [
                NAMES.get(system, system),
                f"{v['tasks_per_s']:,.0f}"
                + (f" (min {v['tasks_per_s_min']:,.0f})" if "tasks_per_s_min" in v else ""),
                f"{v['tasks_per_s'] / best_peer:.2f}x" if best_peer else "n/a",
                f"{v['drain_s']:.2f} s",
                f"{v['worker_cpu_us_per_task']:.0f} us",
                f"{v['redis_commands_per_task']:.2f}",
                f"{v['redis_cpu_s']:.2f} s",
                v["config"],
            ]
        )
    for system, v in r["systems"].items():
        if "error" in v:
            rows.append([NAMES.get(system, system), "failed", "", "", "", "", "", v["error"][:80]])
    lines += _table(
        (
            "system | tasks/s | vs fastest peer | drain | worker CPU/task | Redis commands/task | "
            "Redis CPU | configuration"
        ),
        rows,
    )
    c = r.get("ceiling", {})
    if c:
        ours = ok.get("worker_runtime", {}).get("tasks_per_s")
        lines += [
            "Ceiling on the same server:",
            "",
            f"- pipelined XREADGROUP COUNT 200 + XACK loop, one redis-py process, no per-task "
            f"work: **{c['xreadgroup_xack_per_s']:,.0f} entries/s**"
            + (
                f" (worker_runtime reaches {ours / c['xreadgroup_xack_per_s']:.0%})" if ours else ""
            ),
            f"- pipelined XADD from redis-py: {c['xadd_pipelined_per_s']:,.0f}/s",
            f"- `redis-benchmark` XADD (50 clients): {c['redis_benchmark_xadd_p1_per_s']:,.0f}/s "
            f"unpipelined, {c['redis_benchmark_xadd_p16_per_s']:,.0f}/s at `-P 16`",
            "",
        ]
    return lines


def _throughput_results(r: dict[str, Any]) -> list[str]:
    base = r.get("baseline_rev", "the previous tree")
    lines = [
        "## Task throughput with every task's output stored: this runtime vs the previous one",
        "",
        f"{r['tasks']:,} no-op tasks, each with a session id (round-robin over "
        f"{r.get('sessions')} sessions), so every output goes to the session's data stream "
        f"and registry; concurrency {r['concurrency']}; the previous runtime is `{base}` "
        "checked out beside this one, queued by the same client. Interleaved A B B A … "
        f"({r['repeats']} recorded rounds after a warm-up); load average "
        f"{r['load_before']} -> {r['load_after']}.",
        "",
    ]
    rows = []
    for name, label in (("worker_runtime", "this tree"), ("baseline", f"previous ({base})")):
        v = r["sides"].get(name)
        if not v:
            continue
        tp, cpu = v["tasks_per_s"], v["worker_cpu_us_per_task"]
        rows.append(
            [
                label,
                f"{tp['median']:,.0f} (min {tp['min']:,.0f}, max {tp['max']:,.0f})",
                f"{cpu['median']:.0f} us (min {cpu['min']:.0f} us)",
                f"{v['redis_commands_per_task']:.2f}",
            ]
        )
    lines += _table(
        "runtime | tasks/s median (min, max) | worker CPU/task | Redis commands/task", rows
    )
    return lines


def _control(r: dict[str, Any]) -> list[str]:
    lines = [
        "## 3. Control latency: operator command -> worker applied",
        "",
        "Clock from before the operator's write to the keyspace notification of the lease "
        "rewrite that confirms `admin_applied_at` (checked with a GET). Real "
        f"`worker-runtime run` processes of up to {r.get('per_process', 100)} replicas. Push: "
        "`WorkerManager.suspend_worker`/`resume_worker`, heartbeat at its 5 s default. "
        f"Pull only: the admin hash written without the stream entry, heartbeat "
        f"{r['pull_interval_s']:g} s, each command after a random pause.",
        "",
    ]
    rows = []
    labels = {
        "push": "push, one command at a time",
        "push_burst": "push, one command to every worker at once",
        "push_burst_after_write": "  the same, after the operator's write returned",
        "pull": "pull channel only",
    }
    for workers, row in r.get("runtime", {}).items():
        for key, label in labels.items():
            if key in row:
                v = row[key]
                rows.append(
                    [
                        label,
                        workers,
                        _ms(v["p50_ms"]),
                        _ms(v["p99_ms"]),
                        _ms(v["max_ms"]),
                        str(v["n"]),
                    ]
                )
    celery = r.get("celery")
    if isinstance(celery, dict):
        rows.append(
            [
                "celery `cancel_consumer`/`add_consumer`, reply=True",
                "1",
                _ms(celery["p50_ms"]),
                _ms(celery["p99_ms"]),
                _ms(celery["max_ms"]),
                str(celery["n"]),
            ]
        )
    elif isinstance(celery, str):
        rows.append(["celery", "1", "failed", celery, "", ""])
    lines += _table("mechanism | workers | p50 | p99 | max | n", rows)
    lines += [
        "arq, taskiq and dramatiq have no command channel to running workers; rq's "
        "(`send_shutdown_command`, `send_kill_horse_command`) sends without a reply.",
        "",
    ]
    return lines


def _time_rss(figures: dict[str, Any]) -> str:
    return f"{figures['seconds']:.2f} s / {figures['max_rss_mb']:.0f} MB"


def _console(r: dict[str, Any]) -> list[str]:
    lines = [
        "## 4. Console at scale",
        "",
        "`FleetReader.read()` in process (median), split into its pipelined round trips "
        "(redis-py encode + Redis + reply parse) and the rest (models, derivations); the "
        "`byconsole --snapshot` processes; the TUI headless at 120x36 in its own process "
        "with the real Redis backend (first load until every row is in the table; then 1% "
        "of the workers suspended in Redis and one refresh: table update with the event "
        "loop busy, then until painted). The fleet beats (the runtime's heartbeat, from the "
        "benchmark process) before each refresh so ages stay live; where that beat takes "
        "several seconds (50,000 workers) some ages cross the 10 s label step between "
        "refreshes, and the 'unchanged' refresh rewrites those rows too.",
        "",
    ]
    rows = []
    for n, row in r.get("sizes", {}).items():
        tui = row.get("tui", {})
        rows.append(
            [
                f"{int(n):,}",
                f"{row['read_ms']:.0f} ms",
                f"{row['round_trips_ms']:.0f} ms x{row['round_trips']}",
                f"{row['build_ms']:.0f} ms",
                _time_rss(row["snapshot_json"]),
                _time_rss(row["snapshot_table"]),
                _f(tui.get("first_load_s"), ".2f", " s") if tui else "n/a",
                (
                    f"{_ms(tui['changed_1pct_apply_ms'])} / {_ms(tui['changed_1pct_paint_ms'])}"
                    if "changed_1pct_apply_ms" in tui
                    else tui.get("error", "n/a")[:60]
                ),
                _ms(tui.get("unchanged_apply_ms")) if tui else "n/a",
                _f(tui.get("max_rss_mb"), ".0f", " MB") if tui else "n/a",
            ]
        )
    lines += _table(
        (
            "workers | read + build | round trips | build | --snapshot json (time / RSS) | "
            "--snapshot table (time / RSS) | TUI first load | TUI 1% changed (update / painted) | "
            "TUI unchanged refresh | TUI peak RSS"
        ),
        rows,
    )
    return lines


def _heartbeat(r: dict[str, Any]) -> list[str]:
    lines = [
        "## 5. Heartbeat load",
        "",
        f"{r['replicas']:,} simulated replicas in {r['instances']} instances, each instance "
        f"running the runtime's `heartbeat.beat` every {r['interval_s']:g} s (random phase) "
        f"from {r['processes']} client processes; Redis sampled over {r['window_s']:.0f} s.",
        "",
    ]
    top = sorted(
        ((k, v) for k, v in r["redis_commands_by_name_per_s"].items() if v >= 1),
        key=lambda kv: -kv[1],
    )
    lines += _table(
        "figure | value",
        [
            ["beats/s (expected)", f"{r['beats_per_s']:.1f} ({r['expected_beats_per_s']:.1f})"],
            ["Redis commands/s", f"{r['redis_commands_per_s']:,.0f}"],
            ["by command", ", ".join(f"{k} {v:,.0f}" for k, v in top)],
            ["Redis CPU (user+sys, one core)", f"{r['redis_cpu_pct']:.1f}%"],
            ["Redis memory / keys", f"{r['redis_used_memory_mb']:.0f} MB / {r['keys']:,}"],
            ["beat round trip p50 / p99", f"{_ms(r['beat_p50_ms'])} / {_ms(r['beat_p99_ms'])}"],
            ["simulating clients' CPU", f"{r['client_cpu_pct']:.0f}% of one core"],
        ],
    )
    return lines


def _side(r: dict[str, Any], unit: str = "s", scale: float = 1.0) -> str:
    return f"{r['median'] * scale:.3f} {unit} (min {r['min'] * scale:.3f})"


def _ratio(r: dict[str, Any], a: str, b: str) -> str:
    med = r[a]["median"] / r[b]["median"] if r[b]["median"] else float("inf")
    low = r[a]["min"] / r[b]["min"] if r[b]["min"] else float("inf")
    return f"{med:.2f}x / {low:.2f}x"


JSON, RQ = "byconsole --snapshot --format json", "rq info"
BASELINE = "the same, --baseline checkout"


def _pair(
    label: str,
    r: dict[str, Any],
    a: str,
    a_name: str,
    b: str,
    b_name: str,
    load: str = "",
    unit: str = "s",
    scale: float = 1.0,
) -> list[str]:
    """One interleaved comparison: A median (min), B median (min), A/B, load."""
    return [label, a_name, _side(r[a], unit, scale), b_name, _side(r[b], unit, scale),
            _ratio(r, a, b), load or f"{r['load_before']} -> {r['load_after']}"]  # fmt: skip


def _cli_rows(label: str, r: dict[str, Any]) -> list[list[str]]:
    """``byconsole`` against ``rq info``, its CPU time and the baseline checkout (when timed)."""
    rows = [_pair(label, r, "byconsole_json", JSON, "rq_info", RQ)]
    cpu = r.get("cpu")
    if cpu:
        rows.append(_pair(f"{label}, CPU", cpu, "byconsole_json", JSON, "rq_info", RQ,
                          "(same runs)", "ms", 1000))  # fmt: skip
    if "baseline_json" in r:
        rows.append(_pair(f"{label}, vs baseline", r, "byconsole_json", JSON, "baseline_json",
                          BASELINE, "(same runs)"))  # fmt: skip
        rows.append(_pair(f"{label}, vs baseline, CPU", r["cpu"], "byconsole_json", JSON,
                          "baseline_json", BASELINE, "(same runs)", "ms", 1000))  # fmt: skip
    return rows


def _headless(r: dict[str, Any]) -> list[str]:
    lines = [
        "## Headless paths, interleaved",
        "",
        f"A B A B … ({r.get('repeats', '?')} recorded rounds after one warm-up), median "
        "(min) per side, ratio of medians / ratio of mins; load average before -> after "
        "each comparison (a shared machine: the ratios, not the times, are the figures).",
        "",
    ]
    rows = _cli_rows("cold start, empty Redis", r["cold_start"]) if r.get("cold_start") else []
    for n, row in r.get("sizes", {}).items():
        label = f"{int(n):,} workers"
        rows.append(_pair(label, row["table_vs_json"], "table", "--snapshot --format table",
                          "json", "--format json"))  # fmt: skip
        rows.append(_pair(label, row["read_vs_floor"], "read_build",
                          "FleetReader.read (read + build)", "floor",
                          "bare pipelined read (floor)", unit="ms"))  # fmt: skip
        if row.get("e2e_vs_rq"):
            e2e = _cli_rows(label, row["e2e_vs_rq"])
            e2e[0][0] = f"{label} (and {int(n):,} rq workers)"
            rows += e2e
    lines += _table(" | A | A median (min) | B | B median (min) | A/B | load", rows)
    return lines


def _console_stall(r: dict[str, Any]) -> list[str]:
    lines = [
        "## Console responsiveness (event-loop stalls, keys, paints)",
        "",
        "A paint is the first frame the screen composes after the change, with all of it "
        "that shows (changed rows, the header's counts); a refresh repaints only that.",
        "",
        f"Load average {r.get('load_before')} -> {r.get('load_after')} (shared machine)."
        + (
            f" {r['repeats']} rounds of (live run, static run), each a fresh console "
            "process; the tables below show the first round, the target table every round."
            if r.get("repeats", 1) > 1
            else ""
        ),
        "",
    ]
    for n, f in r.get("live", {}).items():
        if "error" in f:
            lines += [f"Live {n}: failed: {f['error']}", ""]
            continue
        keys = f["keys_during_refresh_ms"]
        rows = [
            ["first paint after the read", _ms(f["first_paint_after_read_ms"])],
            ["every row in the table after the read", _ms(f["all_rows_after_read_ms"])],
            ["longest stall during the first load", _ms(f["first_load_longest_stall_ms"])],
            [
                "longest stall during a refresh (median / max)",
                f"{_ms(f['refresh_longest_stall_ms']['median'])} / "
                f"{_ms(f['refresh_longest_stall_ms']['max'])}",
            ],
            [
                "keys pressed during refreshes: median / max / over 50 ms",
                f"{_ms(keys['median'])} / {_ms(keys['max'])} / {keys['over_50ms']} of {keys['n']}",
            ],
            ["1% changed: applied after the read", _ms(f["changed_1pct_applied_after_read_ms"])],
            ["1% changed: painted after the read", _ms(f["changed_1pct_painted_after_read_ms"])],
            ["peak RSS", _f(f["peak_rss_mb"], ".0f", " MB")],
        ]
        lines += [f"Live fleet of {int(n):,} workers (real Redis backend):", ""]
        lines += _table(" | ", rows)
    for n, f in r.get("static", {}).items():
        if "error" in f:
            lines += [f"Static {n}: failed: {f['error']}", ""]
            continue
        rows = [
            ["first paint after the snapshot", _ms(f["first_paint_after_read_ms"])],
            ["every row in the table", _ms(f["all_rows_after_read_ms"])],
            ["longest stall during the first load", _ms(f["first_load_longest_stall_ms"])],
        ]
        rows += [[f"{k} (until painted)", _ms(v)] for k, v in f["latency_ms"].items()]
        rows.append(["peak RSS", _f(f["peak_rss_mb"], ".0f", " MB")])
        lines += [f"Synthetic fleet of {int(n):,} workers:", ""]
        lines += _table(" | ", rows)
    return lines


SECTIONS = {
    "fleet_listing": _fleet_listing,
    "headless": _headless,
    "console_stall": _console_stall,
    "throughput_results": _throughput_results,
    "throughput": _throughput,
    "control": _control,
    "console": _console,
    "heartbeat": _heartbeat,
}


def render(run: Run, notes: list[str] | None = None) -> str:
    """The whole of BENCHMARKS.md."""
    env = run.environment
    lines = [
        "# Benchmarks",
        "",
        "Generated by `make bench` (`bench/run_all.py`); every figure below comes from one "
        "run, every peer measured in that run on the same private `redis-server`. "
        "Rerun to refresh; `python -m bench.report bench/results` rebuilds this file from "
        "the saved figures.",
        "",
        "## Machine",
        "",
    ]
    lines += _table(" | ", [[k, v] for k, v in env.items()])
    after = f", after: {run.load_after}" if run.load_after else ""
    lines += [
        f"Run started {run.started}, took {run.seconds / 60:.1f} min; load average before: "
        f"{run.load_before}{after}.",
        "",
        "## Targets of issue 14",
        "",
        "Each figure is the median and min over the runs of this very run (for a ratio: "
        "the ratio of the two sides' medians, and of their mins; the sides ran "
        "interleaved). A target is judged on the median, except where it names the worst "
        "case (no stall, every key answered): there on the max. A figure the run did not "
        "produce reads 'not measured'.",
        "",
    ]
    lines += issue.render(issue.evaluate(run.results, run.errors))
    for note in notes or []:
        lines += [note, ""]
    for name, section in SECTIONS.items():
        if name in run.results:
            try:
                lines += section(run.results[name])
            except issue.LOOKUP_ERRORS as exc:
                # A benchmark's figures without a field this section shows (an older
                # result file, a run cut short): say so, keep the rest of the report.
                lines += [
                    f"## {name}",
                    "",
                    f"Figures incomplete ({type(exc).__name__}: {exc}); see the raw output.",
                    "",
                ]
        elif name in run.errors:
            lines += [f"## {name}", "", f"Failed: {run.errors[name]}", ""]
    lines += ["## Exact commands", "", "```"]
    for name, cmd in run.commands.items():
        took = run.durations.get(name)
        lines.append(f"{cmd}  # {took / 60:.1f} min" if took is not None else cmd)
    lines += ["```", "", "## Raw output", ""]
    for name, text in run.outputs.items():
        lines += [
            f"<details><summary>{name}</summary>",
            "",
            "```",
            text.rstrip(),
            "```",
            "",
            "</details>",
            "",
        ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Rebuild BENCHMARKS.md from ``DIR/*.json`` (and ``DIR/run.json``)."""
    parser = argparse.ArgumentParser(
        prog="python -m bench.report", description="Rebuild a report from saved figures."
    )
    parser.add_argument(
        "directory",
        nargs="?",
        type=Path,
        default=ROOT / "bench" / "results",
        help="the figures of one run (default: bench/results)",
    )
    parser.add_argument(
        "--output", type=Path, default=ROOT / "BENCHMARKS.md", help="where to write the report"
    )
    args = parser.parse_args(argv)
    try:
        meta = json.loads((args.directory / "run.json").read_text())
        results = {
            p.stem: json.loads(p.read_text())
            for p in args.directory.glob("*.json")
            if p.stem != "run"
        }
    except (OSError, ValueError) as exc:
        print(f"bench.report: cannot read the figures in {args.directory}: {exc}", file=sys.stderr)
        return 2
    run = Run(results=results, **meta)
    args.output.write_text(render(run))
    print(f"wrote {args.output} ({platform.node()})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
