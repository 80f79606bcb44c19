"""View 4: sparklines of the metrics history next to the live snapshot figures.

Every sparkline is anchored at zero (a constant 2 is a flat bar at 2/max, never an empty
line) and labelled with its current and maximum values and the time span it covers.

The series are ours only (depth = undelivered + pending, the definition "now" uses), over
the range the operator picks with ``[`` / ``]`` (15m … 7d, read from the tier that covers
it); per type, a one-line sparkline of its depth. Points another runtime's collector
wrote to the shared history (by-framework's depth is XLEN) are plotted apart, labelled
with their writer and definition, never in our series.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, VerticalScroll
from textual.message import Message
from textual.reactive import reactive
from textual.widget import Widget
from textual.widgets import Static

from byconsole.text import safe_text
from byconsole.tui.widgets.static_text import show_text
from worker_runtime.history import DEFAULT_RANGE, RANGES, depth_definition
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
    """A duration as ``45s``, ``12m``, ``3.5h`` or ``7.0d``."""
    s = max(0, ms) / 1000
    if s < 120:
        return f"{s:.0f}s"
    if s < 7200:
        return f"{s / 60:.0f}m"
    if s < 172_800:
        return f"{s / 3600:.1f}h"
    return f"{s / 86_400:.1f}d"


def _fmt(value: float | None, unit: str = "") -> str:
    if value is None:
        return "-"
    return f"{value:,.1f}{unit}" if value % 1 else f"{int(value):,}{unit}"


PER_TYPE_SPARKS = 8
"""Types given a sparkline (the deepest over the range); the others are counted."""


def next_range(current: str, step: int) -> str:
    """The range ``step`` places after ``current`` in :data:`RANGES` (clamped at the ends)."""
    names = [name for name, _ in RANGES]
    index = names.index(current) if current in names else 0
    return names[max(0, min(len(names) - 1, index + step))]


def spark_line(values: Sequence[float], width: int) -> str:
    """A one-line zero-anchored sparkline (:func:`bars` one cell high)."""
    return bars(values, width, 1)[0]


class MetricsView(VerticalScroll):
    """A labelled sparkline per metric, per-type sparklines, then other collectors' points."""

    class RangeChanged(Message):
        """The operator picked another range: the next refresh must carry it."""

        def __init__(self, history_range: str) -> None:
            super().__init__()
            self.history_range = history_range

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.history_range = DEFAULT_RANGE
        """The range asked for (a refresh then brings its points)."""
        self._snapshot: FleetSnapshot | None = None

    def compose(self) -> ComposeResult:
        """The range line, one row per series, the per-type and other-collector blocks."""
        yield Static(id="metrics-range")
        for series in SERIES:
            with Horizontal(classes="metric"):
                yield Static(id=f"label-{series.key}", classes="metric-label")
                yield ZeroSparkline(id=f"spark-{series.key}")
        yield Static(id="metrics-per-type")
        yield Static(id="metrics-foreign")
        yield Static(id="metrics-status", classes="view-status")

    def on_resize(self) -> None:
        """The one-line sparklines follow the width."""
        if self._snapshot is not None:
            self.show_snapshot(self._snapshot)

    def cycle_range(self, step: int) -> None:
        """Pick the next (``step`` 1) or previous (-1) range and ask for its points."""
        chosen = next_range(self.history_range, step)
        if chosen == self.history_range:
            return
        self.history_range = chosen
        if self._snapshot is not None:
            self.show_snapshot(self._snapshot)  # says "loading" until the refresh
        self.post_message(self.RangeChanged(chosen))

    def show_snapshot(self, snapshot: FleetSnapshot) -> None:
        """Plot the history and print the live figures."""
        self._snapshot = snapshot
        metrics = snapshot.metrics
        history = metrics.history
        span = span_label(history[-1].ts - history[0].ts) if len(history) > 1 else "-"
        show_text(self.query_one("#metrics-range", Static), self._range_line(snapshot))
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
        width = max(16, min(60, self.size.width - 56)) if self.size.width else 40
        per_type = self.query_one("#metrics-per-type", Static)
        show_text(per_type, self._per_type(snapshot, width), layout=True)  # its height varies
        foreign = self.query_one("#metrics-foreign", Static)
        show_text(foreign, self._foreign(metrics.foreign, width), layout=True)
        if history:
            status = f"{len(history)} points over the last {span}, oldest left"
        else:
            status = "no metrics history yet: the elected leader writes a point every few seconds"
        show_text(self.query_one("#metrics-status", Static), Text(status))

    def _range_line(self, snapshot: FleetSnapshot) -> Text:
        metrics = snapshot.metrics
        text = Text("range ", style="bold", end="")
        for name, _ in RANGES:
            style = "reverse bold" if name == self.history_range else "dim"
            text.append(f" {name} ", style=style)
        text.append("  [ ] change", style="dim")
        if metrics.history_range != self.history_range:
            text.append(f"   loading {self.history_range} …", style="bold")
        elif metrics.tier:
            text.append(f"   {metrics.history_range} from our {metrics.tier} tier")
        else:
            text.append("   from the shared history (no tier of ours written yet)")
        text.append('\nour series: depth = undelivered + pending, as "now"', style="dim")
        return text

    @staticmethod
    def _per_type(snapshot: FleetSnapshot, width: int) -> Text:
        history = snapshot.metrics.history
        text = Text("per type: depth over the range (undelivered + pending)", style="bold", end="")
        depths: dict[str, list[float]] = {}
        for i, point in enumerate(history):
            for name, figures in point.per_type.items():
                depths.setdefault(name, [0.0] * len(history))[i] = float(figures.depth)
        live = {t.name: t for t in snapshot.types}
        names = sorted(depths, key=lambda n: (-max(depths[n]), n))
        names += sorted(n for n in live if n not in depths and live[n].depth)
        if not names:
            text.append("\n-")
            return text
        last = history[-1].per_type if history else {}
        for name in names[:PER_TYPE_SPARKS]:
            values = depths.get(name, [])
            now = live[name].depth if name in live else None
            rate = last[name].throughput if name in last else 0.0
            text.append(f"\n{safe_text(name, 20):<20} ")
            text.append(spark_line(values, width) if values else " " * width, style="cyan")
            text.append(
                f" now {_fmt(now)}  max {_fmt(max(values) if values else None)}  {rate:,.1f}/s"
            )
        if len(names) > PER_TYPE_SPARKS:
            text.append(f"\n+{len(names) - PER_TYPE_SPARKS} more types", style="dim")
        return text

    @staticmethod
    def _foreign(points: list[MetricsPoint], width: int) -> Text:
        text = Text(end="")
        sources = sorted({p.source or "unknown" for p in points})
        if not sources:
            return text
        text.append("written by other collectors (another definition: never mixed with ours)")
        text.stylize("bold")
        for source in sources:
            theirs = [p for p in points if (p.source or "unknown") == source]
            values = [float(p.queue_depth) for p in theirs]
            span = span_label(theirs[-1].ts - theirs[0].ts) if len(theirs) > 1 else "-"
            text.append(
                f"\n{safe_text(source, 40)}: depth = {depth_definition(source)}"
                f" ({len(theirs)} points over {span})\n{'':<20} ",
                style="default",
            )
            text.append(spark_line(values, width), style="magenta")
            text.append(f" last {_fmt(values[-1])}  max {_fmt(max(values))}", style="default")
        return text
