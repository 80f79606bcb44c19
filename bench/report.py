"""BENCHMARKS.md from the JSON figures the benchmarks wrote (``run_all.py`` calls it).

.venv/bin/python -m bench.report bench/results   # rewrite BENCHMARKS.md from saved figures
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import targets as issue
from bench.common import ROOT, markdown_table, ratio

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


# -- sections -------------------------------------------------------------------------------
# Each section is a heading, a paragraph and tables; a table is its header and one row per
# entry of the figures, its cells read by small functions (a missing figure raises a
# LOOKUP_ERROR, which ``render`` reports as an incomplete section).

Cells = list[tuple[str, Callable[[Any], str]]]
"""A table's columns: (header, the cell of one row's figures)."""


def _rows(columns: Cells, entries: list[Any], failed: Sequence[list[str]] = ()) -> list[str]:
    """One table: a row per entry, a cell per column (then the rows of ``failed`` runs)."""
    rows = [[cell(e) for _, cell in columns] for e in entries]
    return markdown_table([h for h, _ in columns], [*rows, *failed])


def _facts(rows: list[tuple[str, str]], header: tuple[str, str] = ("", "")) -> list[str]:
    """A two-column table of labelled figures."""
    return markdown_table(header, rows)


def _cli_time(side: dict[str, Any]) -> str:
    low = f" (min {side['min']:.3f})" if "min" in side else ""
    return f"{side['seconds']:.3f} s{low}"


def _cpu(row: dict[str, Any], a: str = "ours", b: str = "rq") -> str:
    ca, cb = row["cpu"][a], row["cpu"][b]
    return f"{ca['median'] * 1000:.0f} / {cb['median'] * 1000:.0f} ms"


def _x(a: dict[str, Any], b: dict[str, Any]) -> str:
    """Ratio of medians / ratio of mins of two interleaved sides."""
    return f"{ratio(a['median'], b['median']):.2f}x / {ratio(a['min'], b['min']):.2f}x"


def _speedup(row: dict[str, Any], side: str) -> str:
    return f"**{row['rq']['seconds'] / row[side]['seconds']:.1f}x**"


LOOPBACK: Cells = [
    ("workers", lambda e: f"{e[0]:,}"),
    ("byconsole --snapshot", lambda e: _cli_time(e[1]["ours"])),
    ("rq info", lambda e: _cli_time(e[1]["rq"])),
    ("CLI speed-up", lambda e: _speedup(e[1], "ours")),
    ("--format table (speed-up)",
     lambda e: f"{_cli_time(e[1]['table'])}, {_speedup(e[1], 'table')}" if "table" in e[1]
     else "n/a"),
    ("table / json", lambda e: _x(e[1]["table"], e[1]["ours"]) if "table" in e[1] else "n/a"),
    ("CPU (ours / rq)", lambda e: _cpu(e[1])),
    ("Redis commands (ours / rq)",
     lambda e: f"{e[1]['ours']['commands']:,} / {e[1]['rq']['commands']:,}"),
    ("FleetReader.read (round trips: time, count)",
     lambda e: f"{e[1]['reader_ms']:.1f} ms ({e[1]['round_trips_ms']:.1f} ms, "
     f"{e[1]['reader_round_trips']})"),
    ("read + build / floor", lambda e: _x(*(e[1]["read_vs_floor"][k] for k in ("read_build",
                                                                             "floor")))),
    ("rq Worker.all + fields", lambda e: f"{e[1]['rq_worker_all_ms']:.1f} ms"),
    ("listing speed-up", lambda e: f"**{e[1]['listing_speedup']:.1f}x**"),
    ("peak RSS (json / table / rq)",
     lambda e: " / ".join(f"{e[1][k]['max_rss_mb']:.0f}" for k in ("ours", "table", "rq")
                          if k in e[1]) + " MB"),
]  # fmt: skip

DELAYED: Cells = [
    ("workers", lambda e: f"{e[0]:,}"),
    ("byconsole --snapshot (round trips)",
     lambda e: f"{_cli_time(e[1]['ours'])} (~{e[1]['ours']['implied_round_trips']:,.0f})"),
    ("rq info (round trips)",
     lambda e: f"{_cli_time(e[1]['rq'])} (~{e[1]['rq']['implied_round_trips']:,.0f})"),
    ("speed-up", lambda e: _speedup(e[1], "ours")),
]  # fmt: skip


def _fleet_listing(r: dict[str, Any]) -> list[str]:
    lines = [
        "## 1. Fleet listing: `byconsole --snapshot` vs `rq info`",
        "",
        "Both fleets live in the same `redis-server`: ours written by the runtime's own "
        "heartbeat (`bench/common.py`, instances of 100 replicas over three agent "
        "types), rq's registered with `rq.Worker(...).register_birth()` on three queues. "
        "Each CLI runs as a fresh process (interpreter start-up included on both sides), "
        f"the CLIs of one size interleaved (A B C, C B A, …, {r.get('repeats', '?')} "
        "recorded rounds), median (min); a ratio is the ratio of medians / of mins; CPU "
        "is user + system, medians (on a shared machine it moves less than wall time); "
        "commands are `INFO commandstats` deltas for one run (they include the commands a "
        "read-only script runs inside Redis: they show server work, not round trips). In "
        "process, `FleetReader.read()` (read + build of the snapshot, with the time in its "
        "pipelined round trips) is interleaved with the floor: a bare pipelined read of the "
        "same keys, each lease decoded from JSON and nothing else.",
        "",
    ]
    st = r.get("startup")
    if st:
        lines += [
            f"Start-up alone (empty Redis): `byconsole --snapshot` {_cli_time(st['ours'])}, "
            f"`rq info` {_cli_time(st['rq'])}: {_x(st['ours'], st['rq'])}; CPU "
            f"{_cpu(st)} [load {st['load_before']} -> {st['load_after']}].",
            "",
        ]
    lines += ["### Loopback", "", *_rows(LOOPBACK, issue.by_size(r.get("loopback", {})))]
    delay = r.get("delay")
    if delay:
        lines += [f"### Over a slower network: {delay['path']}", ""]
        lines += [f"- {note}" for note in delay.get("notes", [])]
        lines += [
            f"- Redis PING round trip: {delay['rtt_delayed_ms']:.2f} ms through the path "
            f'({delay["rtt_loopback_ms"]:.3f} ms on loopback). "Round trips" below is the '
            "extra time over loopback divided by the extra RTT (resolution: the run-to-run "
            "noise, a few dozen round trips).",
            "",
            *_rows(DELAYED, issue.by_size(r.get("delayed", {}))),
        ]
    return lines


THROUGHPUT: Cells = [
    ("system", lambda e: NAMES.get(e[0], e[0])),
    ("tasks/s", lambda e: f"{e[1]['tasks_per_s']:,.0f}"
     + (f" (min {e[1]['tasks_per_s_min']:,.0f})" if "tasks_per_s_min" in e[1] else "")),
    ("vs fastest peer", lambda e: f"{e[1]['tasks_per_s'] / e[2]:.2f}x" if e[2] else "n/a"),
    ("drain", lambda e: f"{e[1]['drain_s']:.2f} s"),
    ("worker CPU/task", lambda e: f"{e[1]['worker_cpu_us_per_task']:.0f} us"),
    ("Redis commands/task", lambda e: f"{e[1]['redis_commands_per_task']:.2f}"),
    ("Redis CPU", lambda e: f"{e[1]['redis_cpu_s']:.2f} s"),
    ("configuration", lambda e: e[1]["config"]),
]  # fmt: skip


def _throughput(r: dict[str, Any]) -> list[str]:
    interleaved = (
        f" The systems ran interleaved (A B C … C B A …, {r['repeats']} recorded rounds "
        f"after a warm-up): medians, tasks/s with its min; load average {r['load_before']} "
        f"-> {r['load_after']}."
        if r.get("repeats", 1) > 1
        else ""
    )
    lines = [
        "## 2. Task throughput: one worker process, no-op tasks",
        "",
        f"{r['tasks']:,} tasks queued through each system's own client before its worker "
        f"starts; concurrency {r['concurrency']} everywhere; drain time from the first task "
        "to the last (each task only counts itself in-process, no Redis call). CPU and "
        "commands are measured from the worker's start to its last task." + interleaved,
        "",
    ]
    ok = {s: v for s, v in r["systems"].items() if "tasks_per_s" in v}
    best = max((v["tasks_per_s"] for s, v in ok.items() if s != "worker_runtime"), default=0)
    ranked = sorted(ok.items(), key=lambda kv: -kv[1]["tasks_per_s"])
    failed = [
        [NAMES.get(s, s), "failed", "", "", "", "", "", v["error"][:80]]
        for s, v in r["systems"].items()
        if "error" in v
    ]
    lines += _rows(THROUGHPUT, [(s, v, best) for s, v in ranked], failed)
    c = r.get("ceiling", {})
    if c:
        ours = ok.get("worker_runtime", {}).get("tasks_per_s")
        reach = f" (worker_runtime reaches {ours / c['xreadgroup_xack_per_s']:.0%})" if ours else ""
        lines += [
            "Ceiling on the same server:",
            "",
            "- pipelined XREADGROUP COUNT 200 + XACK loop, one redis-py process, no per-task "
            f"work: **{c['xreadgroup_xack_per_s']:,.0f} entries/s**{reach}",
            f"- pipelined XADD from redis-py: {c['xadd_pipelined_per_s']:,.0f}/s",
            f"- `redis-benchmark` XADD (50 clients): {c['redis_benchmark_xadd_p1_per_s']:,.0f}/s "
            f"unpipelined, {c['redis_benchmark_xadd_p16_per_s']:,.0f}/s at `-P 16`",
            "",
        ]
    return lines


RESULTS_SIDES: Cells = [
    ("runtime", lambda e: e[0]),
    ("tasks/s median (min, max)", lambda e: "{median:,.0f} (min {min:,.0f}, max {max:,.0f})"
     .format(**e[1]["tasks_per_s"])),
    ("worker CPU/task", lambda e: "{median:.0f} us (min {min:.0f} us)"
     .format(**e[1]["worker_cpu_us_per_task"])),
    ("Redis commands/task", lambda e: f"{e[1]['redis_commands_per_task']:.2f}"),
]  # fmt: skip


def _throughput_results(r: dict[str, Any]) -> list[str]:
    base = r.get("baseline_rev", "the previous tree")
    labels = (("worker_runtime", "this tree"), ("baseline", f"previous ({base})"))
    return [
        "## Task throughput with every task's output stored: this runtime vs the previous one",
        "",
        f"{r['tasks']:,} no-op tasks, each with a session id (round-robin over "
        f"{r.get('sessions')} sessions), so every output goes to the session's data stream "
        f"and registry; concurrency {r['concurrency']}; the previous runtime is `{base}` "
        "checked out beside this one, queued by the same client. Interleaved A B B A … "
        f"({r['repeats']} recorded rounds after a warm-up); load average "
        f"{r['load_before']} -> {r['load_after']}.",
        "",
        *_rows(RESULTS_SIDES, [(label, r["sides"][k]) for k, label in labels if k in r["sides"]]),
    ]


ENVELOPE_SIDES: Cells = [
    ("side", lambda e: e[0]),
    ("tasks/s median (min)",
     lambda e: "{median:,.0f} (min {min:,.0f})".format(**e[1]["tasks_per_s"])),
    ("worker CPU/task median (min)",
     lambda e: "{median:.1f} us (min {min:.1f} us)".format(**e[1]["worker_cpu_us_per_task"])),
    ("Redis commands/task", lambda e: f"{e[1]['redis_commands_per_task']:.2f}"),
    ("Redis CPU/task median (min)",
     lambda e: "{median:.1f} us (min {min:.1f} us)".format(**e[1]["redis_cpu_us_per_task"])),
]  # fmt: skip


def _envelope(r: dict[str, Any]) -> list[str]:
    labels = (("envelope", "envelope (`ASK_AGENT`)"), ("native", "legacy `{kind, data}`"))
    sides = r["sides"]
    rate = _x(sides["envelope"]["tasks_per_s"], sides["native"]["tasks_per_s"])
    cpu = _x(*(sides[k]["worker_cpu_us_per_task"] for k in ("envelope", "native")))
    redis_cpu = _x(*(sides[k]["redis_cpu_us_per_task"] for k in ("envelope", "native")))
    return [
        "## Task envelope vs the legacy entry, results delivered (issue 28)",
        "",
        "Every task is submitted in by-framework's `ASK_AGENT` envelope; "
        f"`bench.envelope_throughput` drains {r['tasks']:,} no-op tasks (each answering "
        f'`"ok"`, each with a session id, 20 in a row per session over {r["sessions"]} '
        f"sessions, concurrency {r['concurrency']}) once queued as envelopes by "
        "`Producer.submit_many` and once as the legacy `{kind, data}` entries, with the same "
        "worker; after every run the results are counted in Redis (envelope: two data "
        "messages per task, `finalAnswer` + `appStreamResponse`, and a record; legacy: one "
        "result entry and a record), and a run that delivered fewer is a failure. "
        f"Interleaved, {r['repeats']} recorded rounds after a warm-up; load average "
        f"{r['load_before']} -> {r['load_after']}.",
        "",
        *_rows(ENVELOPE_SIDES, [(label, sides[k]) for k, label in labels]),
        f"envelope/native (ratio of medians / of mins): throughput {rate}, worker CPU per "
        f"task {cpu}, Redis CPU per task {redis_cpu}.",
        "",
        "Redis commands per task count the XADDs inside the append script (commandstats), "
        "not round trips: the envelope path's extra one is the second data message "
        "(`appStreamResponse`), an entry of its own that by-framework's clients wait for "
        "(and a few hundredths are the one XTRIM per session and batch); the worker's "
        "round trips per flush are the same on both paths.",
        "",
    ]


CONTROL_LABELS = {
    "push": "push, one command at a time",
    "push_burst": "push, one command to every worker at once",
    "push_burst_after_write": "  the same, after the operator's write returned",
    "pull": "pull channel only",
}

LATENCY: Cells = [
    ("mechanism", lambda e: e[0]),
    ("workers", lambda e: str(e[1])),
    ("p50", lambda e: _ms(e[2]["p50_ms"])),
    ("p99", lambda e: _ms(e[2]["p99_ms"])),
    ("max", lambda e: _ms(e[2]["max_ms"])),
    ("n", lambda e: str(e[2]["n"])),
]


def _control(r: dict[str, Any]) -> list[str]:
    entries = [
        (label, workers, row[key])
        for workers, row in r.get("runtime", {}).items()
        for key, label in CONTROL_LABELS.items()
        if key in row
    ]
    celery = r.get("celery")
    if isinstance(celery, dict):
        entries.append(("celery `cancel_consumer`/`add_consumer`, reply=True", 1, celery))
    failed = [["celery", "1", "failed", celery, "", ""]] if isinstance(celery, str) else []
    return [
        "## 3. Control latency: operator command -> worker applied",
        "",
        "Clock from before the operator's write to the keyspace notification of the lease "
        "rewrite that confirms `admin_applied_at` (checked with a GET). Real "
        f"`worker-runtime run` processes of up to {r.get('per_process', 100)} replicas. Push: "
        "`WorkerManager.suspend_worker`/`resume_worker`, heartbeat at its 5 s default. "
        f"Pull only: the admin hash written without the stream entry, heartbeat "
        f"{r['pull_interval_s']:g} s, each command after a random pause.",
        "",
        *_rows(LATENCY, entries, failed),
        "arq, taskiq and dramatiq have no command channel to running workers; rq's "
        "(`send_shutdown_command`, `send_kill_horse_command`) sends without a reply.",
        "",
    ]


def _heartbeat(r: dict[str, Any]) -> list[str]:
    top = sorted(
        ((k, v) for k, v in r["redis_commands_by_name_per_s"].items() if v >= 1),
        key=lambda kv: -kv[1],
    )
    return [
        "## 4. Heartbeat load",
        "",
        f"{r['replicas']:,} simulated replicas in {r['instances']} instances, each instance "
        f"running the runtime's `heartbeat.beat` every {r['interval_s']:g} s (random phase) "
        f"from {r['processes']} client processes; Redis sampled over {r['window_s']:.0f} s.",
        "",
        *_facts(header=("figure", "value"), rows=[
            ("beats/s (expected)", f"{r['beats_per_s']:.1f} ({r['expected_beats_per_s']:.1f})"),
            ("Redis commands/s", f"{r['redis_commands_per_s']:,.0f}"),
            ("by command", ", ".join(f"{k} {v:,.0f}" for k, v in top)),
            ("Redis CPU (user+sys, one core)", f"{r['redis_cpu_pct']:.1f}%"),
            ("Redis memory / keys", f"{r['redis_used_memory_mb']:.0f} MB / {r['keys']:,}"),
            ("beat round trip p50 / p99", f"{_ms(r['beat_p50_ms'])} / {_ms(r['beat_p99_ms'])}"),
            ("simulating clients' CPU", f"{r['client_cpu_pct']:.0f}% of one core"),
        ]),
    ]  # fmt: skip


LIVE: list[tuple[str, Callable[[dict[str, Any]], str]]] = [
    ("first paint after the read", lambda f: _ms(f["first_paint_after_read_ms"])),
    ("every row in the table after the read", lambda f: _ms(f["all_rows_after_read_ms"])),
    ("longest stall during the first load", lambda f: _ms(f["first_load_longest_stall_ms"])),
    ("longest stall during a refresh (median / max)",
     lambda f: " / ".join(_ms(f["refresh_longest_stall_ms"][k]) for k in ("median", "max"))),
    ("keys pressed during refreshes: median / max / over 50 ms",
     lambda f: "{} / {} / {over_50ms} of {n}".format(
         _ms(f["keys_during_refresh_ms"]["median"]), _ms(f["keys_during_refresh_ms"]["max"]),
         **f["keys_during_refresh_ms"])),
    ("1% changed: applied after the read", lambda f: _ms(f["changed_1pct_applied_after_read_ms"])),
    ("1% changed: painted after the read", lambda f: _ms(f["changed_1pct_painted_after_read_ms"])),
    ("peak RSS", lambda f: _f(f["peak_rss_mb"], ".0f", " MB")),
]  # fmt: skip


def _static_rows(f: dict[str, Any]) -> list[tuple[str, str]]:
    return [
        ("first paint after the snapshot", _ms(f["first_paint_after_read_ms"])),
        ("every row in the table", _ms(f["all_rows_after_read_ms"])),
        ("longest stall during the first load", _ms(f["first_load_longest_stall_ms"])),
        *((f"{k} (until painted)", _ms(v)) for k, v in f["latency_ms"].items()),
        ("peak RSS", _f(f["peak_rss_mb"], ".0f", " MB")),
    ]


def _console_stall(r: dict[str, Any]) -> list[str]:
    rounds = (
        f" {r['repeats']} rounds of (live run, static run), each a fresh console "
        "process; the tables below show the first round, the target table every round."
        if r.get("repeats", 1) > 1
        else ""
    )
    lines = [
        "## Console responsiveness (event-loop stalls, keys, paints)",
        "",
        "A paint is the first frame the screen composes after the change, with all of it "
        "that shows (changed rows, the header's counts); a refresh repaints only that.",
        "",
        f"Load average {r.get('load_before')} -> {r.get('load_after')} (shared machine)." + rounds,
        "",
    ]
    for kind, title, rows in (
        ("live", "Live fleet of {n:,} workers (real Redis backend):",
         lambda f: [(label, cell(f)) for label, cell in LIVE]),
        ("static", "Synthetic fleet of {n:,} workers:", _static_rows),
    ):  # fmt: skip
        for n, f in r.get(kind, {}).items():
            if "error" in f:
                lines += [f"{kind.title()} {n}: failed: {f['error']}", ""]
            else:
                lines += [title.format(n=int(n)), "", *_facts(rows(f))]
    return lines


SECTIONS = {
    "fleet_listing": _fleet_listing,
    "console_stall": _console_stall,
    "throughput_results": _throughput_results,
    "throughput": _throughput,
    "control": _control,
    "heartbeat": _heartbeat,
    "envelope_throughput": _envelope,
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
    lines += _facts(list(env.items()))
    after = f", after: {run.load_after}" if run.load_after else ""
    lines += [
        f"Run started {run.started}, took {run.seconds / 60:.1f} min; load average before: "
        f"{run.load_before}{after}.",
        "",
        "## Targets (issues 14 and 28)",
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
                if name in run.commands:
                    lines += [f"Command: `{run.commands[name]}`", ""]
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
