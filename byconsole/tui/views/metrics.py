"""View 4: sparklines of the metrics history next to the live snapshot figures.

Every sparkline is anchored at zero (a constant 2 is a flat bar at 2/max, never an empty
line) and labelled with its current and maximum values and the time span it covers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, VerticalScroll
from textual.reactive import reactive
from textual.widget import Widget
from textual.widgets import Static

from byconsole.text import safe_text
from byconsole.tui.widgets.static_text import show_text
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


BLOCKS = " ▁▂▃▄▅▆▇█"
"""Eighths of a cell, from empty to full."""


def bars(values: Sequence[float], width: int, height: int) -> list[str]:
    """A zero-anchored bar chart of ``values`` squeezed into ``width`` x ``height`` cells.

    Values are bucketed into ``width`` columns (the maximum of each bucket, so a spike is
    never averaged away; fewer values than columns are stretched) and scaled against
    ``0 .. max``: zero is an empty column, any positive value shows at least one eighth.
    Returns ``height`` lines, top first.
    """
    width, height = max(1, width), max(1, height)
    if not values:
        return [" " * width for _ in range(height)]
    if len(values) > width:
        step = len(values) / width
        columns = [
            max(values[int(i * step) : max(int(i * step) + 1, int((i + 1) * step))])
            for i in range(width)
        ]
    else:
        # Fewer points than columns: each point gets an equal run of columns.
        n = len(values)
        columns = [values[i * n // width] for i in range(width)]
    top = max(max(columns), 0.0)
    levels = height * 8
    heights = [0 if v <= 0 or top <= 0 else max(1, round(v / top * levels)) for v in columns]
    lines = []
    for row in range(height - 1, -1, -1):
        base = row * 8
        lines.append("".join(BLOCKS[min(8, max(0, h - base))] for h in heights))
    return lines


class ZeroSparkline(Widget):
    """A sparkline whose baseline is zero (Textual's scales min..max)."""

    DEFAULT_CSS = """
    ZeroSparkline {
        height: 3;
        width: 1fr;
        color: $accent;
    }
    """

    data: reactive[tuple[float, ...]] = reactive(())
    """The points, oldest first."""

    def render(self) -> Text:
        """The bars, sized to the widget."""
        lines = bars(self.data, self.size.width, self.size.height)
        return Text("\n".join(lines), no_wrap=True, end="")


def span_label(ms: int) -> str:
    """A duration as ``45s``, ``12m`` or ``3.5h``."""
    s = max(0, ms) / 1000
    if s < 120:
        return f"{s:.0f}s"
    if s < 7200:
        return f"{s / 60:.0f}m"
    return f"{s / 3600:.1f}h"


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
                yield ZeroSparkline(id=f"spark-{series.key}")
        yield Static(id="metrics-per-type")
        yield Static(id="metrics-status", classes="view-status")

    def show_snapshot(self, snapshot: FleetSnapshot) -> None:
        """Plot the history and print the live figures."""
        history = snapshot.metrics.history
        span = span_label(history[-1].ts - history[0].ts) if len(history) > 1 else "-"
        for series in SERIES:
            values = tuple(float(series.history(p)) for p in history)
            label = Text(series.label, style="bold", end="")
            label.append(f"\nnow {_fmt(series.live(snapshot), series.unit)}")
            if values:
                label.append(f"  max {_fmt(max(values), series.unit)}")
            label.append(f"\nscale 0..max · last {span}", style="dim")
            show_text(self.query_one(f"#label-{series.key}", Static), label)
            spark = self.query_one(f"#spark-{series.key}", ZeroSparkline)
            if spark.data != values:
                spark.data = values
        per_type = self.query_one("#metrics-per-type", Static)
        show_text(per_type, self._per_type(history), layout=True)  # its height varies
        if history:
            status = f"{len(history)} points over the last {span}, oldest left"
        else:
            status = "no metrics history yet: the elected leader writes a point every few seconds"
        show_text(self.query_one("#metrics-status", Static), Text(status))

    @staticmethod
    def _per_type(history: list[MetricsPoint]) -> Text:
        text = Text("per type (last point; depth = undelivered + pending)", style="bold", end="")
        if not history or not history[-1].per_type:
            text.append("\n-")
            return text
        for name, figures in sorted(history[-1].per_type.items())[:12]:
            text.append(
                f"\n{safe_text(name, 24):<24} depth {figures.depth:>7,}  "
                f"pending {figures.pending:>6,}  {figures.throughput:>8,.1f}/s"
            )
        return text
