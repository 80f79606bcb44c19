"""The headless layout engine: fixed-width tables, key-value blocks and lines of text.

Every headless output (``--snapshot --format table`` and the admin subcommands) is laid
out here, without Rich or Textual. In a table every column is as wide as its widest
cell, rows are padded with ``str`` methods, and nothing is wrapped or cut: when the
lines do not fit the terminal, whole low-priority columns are dropped instead (ids,
lifecycle and status never are), so a 10,000-row table costs string padding only and an
id is never split. A key-value block (``worker info``, ``find``, ``dead show``) wraps
long values to the terminal width instead. What the fleet tables show is
:mod:`byconsole.render`'s; this module only lays it out. Cells hold text already made
safe (:func:`byconsole.text.safe_text`) and are written as they are, never as markup;
colour is an SGR prefix and reset around a run, only on a terminal without ``NO_COLOR``.
"""

from __future__ import annotations

import operator
import os
import sys
import textwrap
import unicodedata
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import IO, Any, Literal

from byconsole.formatting import DASH, ZONE, timestamp
from byconsole.render import alerts as render_alerts
from byconsole.render import instances as render_instances
from byconsole.render import types as render_types
from byconsole.render import workers as render_workers
from byconsole.render.columns import ColumnSpec
from byconsole.render.types import UNREGISTERED
from byconsole.styles import PENDING_STYLE, SGR_CODES, ansi_style, lifecycle_style, status_style
from byconsole.text import safe_text
from worker_runtime.snapshot import (
    FleetSnapshot,
    InstanceView,
    TypeView,
    WorkerView,
)

Fragment = tuple[str, str]
"""A run of text and its style (words of :data:`byconsole.styles.ANSI_STYLES`; ``""``: none)."""

Cell = str | Fragment | tuple[Fragment, ...]
"""A cell: plain text, one styled run, or several runs."""

GAP = "  "


def cell_width(text: str) -> int:
    """Terminal cells ``text`` takes (wide East Asian characters count 2)."""
    if text.isascii():
        return len(text)
    return sum(
        0 if unicodedata.combining(c) else 2 if unicodedata.east_asian_width(c) in ("W", "F") else 1
        for c in text
    )


def _fragments(cell: Cell) -> tuple[Fragment, ...]:
    if isinstance(cell, str):
        return ((cell, ""),)
    if len(cell) == 2 and isinstance(cell[0], str):
        return (cell,)
    return cell


@dataclass(frozen=True, slots=True)
class PlainColumn:
    """A column: header, drop priority (0 is never dropped, higher goes first), justify."""

    header: str
    priority: int = 0
    justify: Literal["left", "right"] = "left"


@dataclass
class PlainTable:
    """A titled table of cells; :meth:`lines` lays it out for a width."""

    columns: Sequence[PlainColumn]
    rows: list[Sequence[Cell]] = field(default_factory=list)
    title: str | None = None

    def lines(self, width: int | None, paint: Painter) -> list[str]:
        """The table as lines no wider than ``width`` when dropping columns allows.

        Args:
            width: the terminal width, or ``None`` for no limit (piped output).
            paint: how styled runs are written (colour or plain).
        """
        n = len(self.columns)
        texts = [[_fragments(c) for c in row] for row in self.rows]
        widths = [cell_width(c.header) for c in self.columns]
        cells: list[list[tuple[tuple[Fragment, ...], int]]] = []
        for row in texts:
            measured = []
            for i, frags in enumerate(row[:n]):
                w = (
                    sum(cell_width(t) for t, _ in frags)
                    if len(frags) > 1
                    else cell_width(frags[0][0])
                )
                if w > widths[i]:
                    widths[i] = w
                measured.append((frags, w))
            cells.append(measured)
        shown = list(range(n))
        if width is not None:
            # Drop the least important column (rightmost on a tie) until the lines fit.
            def total() -> int:
                return sum(widths[i] for i in shown) + len(GAP) * (len(shown) - 1)

            while total() > width:
                droppable = [i for i in shown if self.columns[i].priority > 0]
                if not droppable:
                    break
                shown.remove(max(droppable, key=lambda i: (self.columns[i].priority, i)))
        out: list[str] = []
        if self.title:
            out.append(paint(self.title, "bold"))
        header = GAP.join(
            paint(
                _pad(
                    self.columns[i].header,
                    cell_width(self.columns[i].header),
                    widths[i],
                    self.columns[i].justify,
                ),
                "bold",
            )
            for i in shown
        )
        out.append(header.rstrip())
        out.append(GAP.join("─" * widths[i] for i in shown))
        last = shown[-1] if shown else -1
        for row_cells in cells:
            parts = []
            for i in shown:
                if i >= len(row_cells):
                    parts.append(" " * widths[i] if i != last else "")
                    continue
                frags, w = row_cells[i]
                justify = self.columns[i].justify
                gap = widths[i] - w
                text = "".join(paint(t, s) for t, s in frags)
                if justify == "right":
                    parts.append(" " * gap + text)
                elif i == last:
                    parts.append(text)  # no trailing spaces
                else:
                    parts.append(text + " " * gap)
            # A row whose last cells are blank (an instance's second type) ends there.
            out.append(GAP.join(parts).rstrip(" "))
        return out


def _pad(text: str, length: int, width: int, justify: str) -> str:
    gap = width - length
    return " " * gap + text if justify == "right" else text + " " * gap


class Painter:
    """Writes a styled run: SGR codes around it on a colour terminal, else plain text.

    Args:
        colour: emit colour codes.
    """

    def __init__(self, colour: bool) -> None:
        self.colour = colour
        self._codes: dict[str, tuple[str, str]] = {}

    def __call__(self, text: str, style: str) -> str:
        """``text`` in ``style``."""
        if not self.colour or not style or not text:
            return text
        codes = self._codes.get(style)
        if codes is None:
            codes = self._codes[style] = self._sgr(style)
        return f"{codes[0]}{text}{codes[1]}"

    def _sgr(self, style: str) -> tuple[str, str]:
        codes = [SGR_CODES[word] for word in style.split() if word in SGR_CODES]
        if not codes:
            return "", ""
        return f"\x1b[{';'.join(codes)}m", "\x1b[0m"


@dataclass
class KeyValues:
    """Labelled values, one a line: labels in a column, a long value wrapped to the width.

    A value wraps at spaces, and a word longer than the room starts a line and is cut
    across lines, so nothing is lost on a narrow terminal; piped output (no width) keeps
    each value on its line.
    """

    rows: list[tuple[str, Cell]] = field(default_factory=list)
    title: str | None = None

    def add(self, key: str, value: Cell) -> None:
        """One more row (``key`` and ``value`` already safe)."""
        self.rows.append((key, value))

    def lines(self, width: int | None, paint: Painter) -> list[str]:
        """Every line, values wrapped to ``width`` (``None``: not wrapped)."""
        out: list[str] = []
        if self.title:
            out.append(paint(self.title, "bold"))
        if not self.rows:
            return out
        label = max(cell_width(k) for k, _ in self.rows)
        room = None if width is None else max(MIN_VALUE_WIDTH, width - label - len(GAP))
        indent = " " * (label + len(GAP))
        for key, value in self.rows:
            head = paint(key, "bold") + " " * (label - cell_width(key)) + GAP
            pieces = _wrapped(_fragments(value), room) or [()]
            for n, piece in enumerate(pieces):
                text = "".join(paint(t, st) for t, st in piece)
                out.append(((head if n == 0 else indent) + text).rstrip())
        return out


MIN_VALUE_WIDTH = 20
"""The narrowest a wrapped value gets, however long the labels."""


def _wrapped(frags: tuple[Fragment, ...], room: int | None) -> list[tuple[Fragment, ...]]:
    """A value as lines (each a tuple of styled runs) no wider than ``room``.

    One styled run wraps at spaces; several runs are cut every ``room`` characters, each
    piece keeping its run's style.
    """
    if room is None or sum(cell_width(t) for t, _ in frags) <= room:
        return [frags]
    if len(frags) == 1:
        text, style = frags[0]
        # A word longer than the room starts its own line and is cut across lines.
        words = textwrap.wrap(text, room, break_long_words=False, break_on_hyphens=False)
        return [
            ((line[at : at + room], style),) for line in words for at in range(0, len(line), room)
        ]
    lines: list[tuple[Fragment, ...]] = []
    line: list[Fragment] = []
    left = room
    for text, style in frags:
        while text:
            piece, text = text[:left], text[left:]
            line.append((piece, style))
            left -= len(piece)
            if left == 0:
                lines.append(tuple(line))
                line, left = [], room
    if line:
        lines.append(tuple(line))
    return lines


Part = PlainTable | KeyValues | Sequence[Fragment] | str
"""A piece of a block: a table, labelled values, a line of styled runs or plain text."""


@dataclass
class PlainBlock:
    """Lines, key-value blocks and tables printed one after the other."""

    parts: list[Part] = field(default_factory=list)

    def lines(self, width: int | None, paint: Painter) -> list[str]:
        """Every line of the block."""
        out: list[str] = []
        for part in self.parts:
            if isinstance(part, PlainTable | KeyValues):
                out += part.lines(width, paint)
            elif isinstance(part, str):
                out.append(paint(part, ""))
            else:
                out.append("".join(paint(t, s) for t, s in part))
        return out


Printable = PlainBlock | Part
"""Anything :func:`emit` prints: a block, one of its parts, or a line."""


def terminal_settings(stream: IO[str]) -> tuple[bool, int | None]:
    """(colour, width) for ``stream``.

    Colour only on a terminal without ``NO_COLOR``. The width is the terminal's; piped
    output has no width limit unless ``COLUMNS`` sets one (scripts get every column).
    """
    tty = bool(getattr(stream, "isatty", lambda: False)())
    colour = tty and not os.environ.get("NO_COLOR")
    width: int | None = None
    try:
        columns = int(os.environ.get("COLUMNS", "") or 0)
    except ValueError:
        columns = 0
    if columns > 0:
        width = columns
    elif tty:
        try:
            width = os.get_terminal_size(stream.fileno()).columns
        except (OSError, ValueError, AttributeError):
            width = 80
    return colour, width


@dataclass
class Output:
    """Where a command prints, with the colour and width of that stream (read once)."""

    file: IO[str]
    colour: bool
    width: int | None

    @classmethod
    def to(cls, stream: IO[str] | None = None, *, stderr: bool = False) -> Output:
        """An output on ``stream`` (stdout, or stderr with ``stderr=True``, by default)."""
        out = stream or (sys.stderr if stderr else sys.stdout)
        colour, width = terminal_settings(out)
        return cls(out, colour, width)


def emit(out: Output, what: Printable) -> None:
    """Print ``what`` to ``out``, coloured and sized for it."""
    block = what if isinstance(what, PlainBlock) else PlainBlock([what])
    lines = block.lines(out.width, Painter(out.colour))
    out.file.write("\n".join(lines) + "\n")
    out.file.flush()


def write_block(block: PlainBlock, stream: IO[str] | None = None) -> None:
    """Print ``block`` to ``stream`` (stdout), coloured and sized for it."""
    emit(Output.to(stream), block)


# -- the fleet as plain tables -------------------------------------------------------------


def _lifecycle_cell(value: str) -> Cell:
    return (value, lifecycle_style(value))


def _status_cell(value: str) -> Cell:
    first = value.partition(" ")[0]
    return (value, status_style(first) if first == value else ansi_style("warning"))


def _command_cell(value: str) -> Cell:
    return (value, PENDING_STYLE) if value else ""


def _types_cell(value: tuple[tuple[str, bool], ...]) -> Cell:
    """``(name, denied)`` pairs; a denied type is marked ``!name`` as in the console."""
    if not value:
        return DASH
    if not any(denied for _, denied in value):
        return ", ".join(name for name, _ in value)
    out: list[Fragment] = []
    for i, (name, denied) in enumerate(value):
        if i:
            out.append((", ", ""))
        out.append((f"!{name}", ansi_style("error")) if denied else (name, ""))
    return tuple(out)


_PAINT: dict[str, Callable[[Any], Cell] | None] = {
    "text": None,
    "id": None,
    "count": None,
    "lifecycle": _lifecycle_cell,
    "status": _status_cell,
    "command": _command_cell,
    "types": _types_cell,
    "paused": lambda v: (v, ansi_style("warning")) if v != DASH else v,
    "leader": lambda v: (v, "bold") if v.strip() else v,
    "severity": lambda v: (v, ansi_style("error" if v == "critical" else "warning")),
    "code": lambda v: (v, "bold"),
}
"""Role -> how a value becomes a cell (``None``: the string as it is)."""

_FLAGGED: dict[str, str | None] = {
    "backlog": "backlog",
    "alert": "alert",
    "routable": None,
    "short": "warning",
}
"""Roles painted by the row's ``flags``: the style of a flagged cell (``None``: plain)."""


def _flag_paint(spec: ColumnSpec) -> Callable[[Any, Any], Cell]:
    """How a flag role's value becomes a cell (it reads the row)."""
    key, role = spec.key, spec.role
    if role == "name":
        return lambda v, row: (
            v if row.registered else ((v, ""), (UNREGISTERED, ansi_style("warning")))
        )
    style = _FLAGGED[role]
    if style is None:
        return lambda v, row: v
    on = ansi_style(style)
    return lambda v, row: (v, on) if key in row.flags else v


def _row_paint(spec: ColumnSpec) -> Callable[[Any, Any], Cell]:
    """How a value becomes a cell, given its row (for tables with flag roles)."""
    if spec.role in _FLAGGED or spec.role == "name":
        return _flag_paint(spec)
    one = _PAINT[spec.role]
    if one is None:
        return lambda v, row: v
    return lambda v, row: one(v)


def rendered_table(
    specs: Sequence[ColumnSpec], rows: Iterable[Any], title: str | None = None
) -> PlainTable:
    """A table of rows a :mod:`byconsole.render` module built, laid out by ``specs``."""
    columns = [PlainColumn(c.header, c.priority, c.justify) for c in specs]
    get = operator.attrgetter(*(c.key for c in specs))
    if not any(c.role in _FLAGGED or c.role == "name" for c in specs):
        paints = [_PAINT[c.role] for c in specs]
        cells: list[Sequence[Cell]] = [
            [v if p is None else p(v) for p, v in zip(paints, get(row), strict=True)]
            for row in rows
        ]
        return PlainTable(columns, cells, title)
    both = [_row_paint(c) for c in specs]
    cells = [[p(v, row) for p, v in zip(both, get(row), strict=True)] for row in rows]
    return PlainTable(columns, cells, title)


def workers_table(workers: Iterable[WorkerView], now: int, title: str | None = None) -> PlainTable:
    """The workers table (:mod:`byconsole.render.workers`)."""
    return rendered_table(
        render_workers.COLUMNS, (render_workers.fields(w, now) for w in workers), title
    )


def types_table(types: Iterable[TypeView], title: str | None = "Agent types") -> PlainTable:
    """The agent types table (:mod:`byconsole.render.types`)."""
    return rendered_table(render_types.COLUMNS, (render_types.fields(t) for t in types), title)


def instances_table(instances: Iterable[InstanceView], now: int) -> PlainTable:
    """The instances table (:mod:`byconsole.render.instances`): a row per type."""
    rows = (row for i in instances for row in render_instances.fields(i, now))
    return rendered_table(render_instances.COLUMNS, rows, "Instances")


def counts_line(workers: Iterable[WorkerView]) -> list[Fragment]:
    """``3 worker(s) · online 2 · stale 0 · offline 1 · suspended 1``."""
    workers = list(workers)
    line: list[Fragment] = [(f"{len(workers)} worker(s)", "")]
    statuses: dict[str, int] = {}
    lifecycles: dict[str, int] = {}
    for w in workers:
        statuses[w.status.value] = statuses.get(w.status.value, 0) + 1
        lifecycle = w.lifecycle or "active"
        lifecycles[lifecycle] = lifecycles.get(lifecycle, 0) + 1
    for status in ("online", "stale", "offline"):
        n = statuses.get(status, 0)
        line += [(" · ", ""), (f"{status} {n}", status_style(status) if n else "")]
    if statuses.get("starting"):
        # by-framework ids claimed before their first beat (README, "How the runtime behaves").
        line += [(" · ", ""), (f"starting {statuses['starting']}", status_style("starting"))]
    for lifecycle in ("suspended", "draining", "evicted"):
        n = lifecycles.get(lifecycle, 0)
        if n:
            line += [(" · ", ""), (f"{lifecycle} {n}", lifecycle_style(lifecycle))]
    return line


def snapshot_view(snapshot: FleetSnapshot) -> PlainBlock:
    """The whole ``--snapshot`` table output (already scoped to ``--type``)."""
    now = snapshot.generated_at
    header: list[Fragment] = [
        ("Redis ", ""),
        (safe_text(snapshot.redis.endpoint), "bold"),
        (f" · schema {snapshot.redis.schema_version} · read {timestamp(now)} {ZONE}", ""),
    ]
    leader: list[Fragment] = [("Leader: ", "")]
    if snapshot.leader.instance_id:
        leader.append((safe_text(snapshot.leader.instance_id, 80), "bold"))
        if snapshot.leader.epoch is not None:
            leader.append((f" (epoch {snapshot.leader.epoch})", ""))
    else:
        leader.append(("none", ansi_style("warning")))
    workers = snapshot.workers
    return PlainBlock(
        [
            header,
            leader,
            "",
            workers_table(workers, now, "Workers"),
            counts_line(workers),
            "",
            types_table(snapshot.types),
            "",
            instances_table(snapshot.instances, now),
            "",
            *task_health_lines(snapshot),
        ]
    )


def task_health_lines(snapshot: FleetSnapshot) -> list[Part]:
    """The window's execution figures, then every alert, worst first, as a table."""
    ex = snapshot.executions
    window = snapshot.slo.window
    lines: list[Part] = [
        [
            (f"Tasks (last {window}): ", ""),
            (f"completed {ex.completed}", ""),
            (" · ", ""),
            (f"failed {ex.failed}", ansi_style("error") if ex.failed else ""),
            (f" · cancelled {ex.cancelled} · success {ex.success_ratio:.2%}", ""),
            (f" · queue p95 {ex.queue.p95_ms} ms · run p95 {ex.run.p95_ms} ms", ""),
            (f" · total p95 {ex.total.p95_ms} ms", ""),
        ]
    ]
    if ex.failures_by_error_type:
        kinds = ", ".join(
            f"{safe_text(name, 80)} {n}" for name, n in ex.failures_by_error_type.items()
        )
        lines.append(f"Failures by error type: {kinds}")
    alerts = snapshot.alerts
    lines.append([(f"Alerts: {len(alerts)}", ansi_style("warning") if alerts else "")])
    if alerts:
        rows = (render_alerts.fields(a) for a in alerts)
        lines.append(rendered_table(render_alerts.COLUMNS, rows))
    return lines


def worker_list_view(workers: Sequence[WorkerView], now: int) -> PlainBlock:
    """``worker list``: the workers table and the counts line."""
    return PlainBlock([workers_table(workers, now), counts_line(workers)])
