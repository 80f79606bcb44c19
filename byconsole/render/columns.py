"""The column spec every fleet table uses, and the one text-cleaning function."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from byconsole.text import safe_text

Role = Literal[
    "text",
    "id",
    "lifecycle",
    "status",
    "command",
    "types",
    "count",
    "name",
    "backlog",
    "alert",
    "paused",
    "routable",
    "leader",
    "short",
    "severity",
    "code",
]
"""How a cell is painted; each front end maps a role to its own styles.

``text``: plain. ``id``: the row's key (the console styles it when the row is marked).
``lifecycle``/``status``: styled by the value's first word. ``command``: a command
state marker (pending, sent, unconfirmable, ...). ``types``: ``(name, denied)`` pairs,
a denied one shown ``!name``. ``count``: a number, right-aligned.

The rest read the row's ``flags`` (the keys of its cells to highlight): ``backlog``: work
waiting; ``alert``: something to look at (dead letters, a denylist, two consumer groups);
``routable``: served when flagged, nobody serves it otherwise. ``paused``: a pause note.
``name``: a type's name, marked when only its streams name it (the row's ``registered``).
``leader``: the leader mark. ``short``: replicas against a quota, flagged when short.
``severity``: an alert's grade, styled by it. ``code``: an alert's code (bold).
"""


@dataclass(frozen=True, slots=True)
class ColumnSpec:
    """One column of a fleet table.

    Attributes:
        key: the name of the row field the column shows.
        header: the header label (both front ends).
        priority: drop priority on a narrow terminal (0 is never dropped, higher first).
        justify: alignment of the cells.
        sort: the row field the column sorts by (``None``: not sortable).
        role: how the cells are painted (see :data:`Role`).
        width: a fixed width in the console (``None``: as wide as the widest cell).
        cut: the console shows at most this many characters of a cell, the last an
            ellipsis (the rest is on the detail screen); the CLI prints it whole, since
            what it prints (an id) is copied into the next command.
    """

    key: str
    header: str
    priority: int = 0
    justify: Literal["left", "right"] = "left"
    sort: str | None = None
    role: Role = "text"
    width: int | None = None
    cut: int | None = None


def clean(value: object, limit: int) -> str:
    """:func:`~byconsole.text.safe_text`, with a fast path for the common plain-ASCII value.

    A printable ASCII string holds no control, bidi or surrogate character, so it only
    needs the length check; a 10,000-worker refresh makes ~100,000 of these calls.
    """
    if type(value) is str and len(value) <= limit and value.isascii() and value.isprintable():
        return value
    return safe_text(value, limit)
