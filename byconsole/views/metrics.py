"""View 4: sparklines of the metrics history next to the live snapshot figures."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, VerticalScroll
from textual.widgets import Sparkline, Static

from byconsole.text import safe_text
from worker_runtime.models import MetricsPoint
from worker_runtime.snapshot import FleetSnapshot


@dataclass(frozen=True, slots=True)
class Series:
    """One plotted metric: its id, label, history accessor and live value."""

    key: str
    label: str
    history: Callable[[MetricsPoint], float]
    live: Callable[[FleetSnapshot], float | None]
    unit: str = ""


SERIES: tuple[Series, ...] = (
    Series(
        "online",
        "workers online",
        lambda p: p.workers_online,
        lambda s: s.metrics.workers_online,
    ),
    Series(
        "active",
        "active executions",
        lambda p: p.active_executions,
        lambda s: s.metrics.active_executions,
    ),
    Series(
        "depth",
        "queue depth",
        lambda p: p.queue_depth,
        lambda s: s.metrics.queue_depth,
    ),
    Series(
        "throughput",
        "throughput",
        lambda p: p.throughput,
        lambda s: s.metrics.history[-1].throughput if s.metrics.history else None,
        "/s",
    ),
)


def _fmt(value: float | None, unit: str = "") -> str:
    if value is None:
        return "-"
    return f"{value:,.1f}{unit}" if value % 1 else f"{int(value):,}{unit}"


class MetricsView(VerticalScroll):
    """A labelled sparkline per metric, then the per-type figures of the last point."""

    def compose(self) -> ComposeResult:
        """One row per series, then the per-type summary."""
        for series in SERIES:
            with Horizontal(classes="metric"):
                yield Static(id=f"label-{series.key}", classes="metric-label")
                yield Sparkline([], id=f"spark-{series.key}")
        yield Static(id="metrics-per-type")
        yield Static(id="metrics-status", classes="view-status")

    def show_snapshot(self, snapshot: FleetSnapshot) -> None:
        """Plot the history and print the live figures."""
        history = snapshot.metrics.history
        for series in SERIES:
            values = [float(series.history(p)) for p in history]
            label = Text(series.label, style="bold", end="")
            label.append(f"\nnow {_fmt(series.live(snapshot), series.unit)}")
            if values:
                label.append(
                    f"  min {_fmt(min(values), series.unit)}  max {_fmt(max(values), series.unit)}"
                )
            self.query_one(f"#label-{series.key}", Static).update(label)
            spark = self.query_one(f"#spark-{series.key}", Sparkline)
            if list(spark.data or []) != values:
                spark.data = values
        self.query_one("#metrics-per-type", Static).update(self._per_type(history))
        if history:
            span = (history[-1].ts - history[0].ts) / 60_000
            status = f"{len(history)} points over {span:,.1f} min"
        else:
            status = "no metrics history yet: the elected leader writes a point every few seconds"
        self.query_one("#metrics-status", Static).update(Text(status))

    @staticmethod
    def _per_type(history: list[MetricsPoint]) -> Text:
        text = Text("per type (last point)", style="bold", end="")
        if not history or not history[-1].per_type:
            text.append("\n-")
            return text
        for name, figures in sorted(history[-1].per_type.items())[:12]:
            text.append(
                f"\n{safe_text(name, 24):<24} depth {figures.depth:>7,}  "
                f"pending {figures.pending:>6,}  {figures.throughput:>8,.1f}/s"
            )
        return text
