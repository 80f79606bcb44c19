"""Small formatting helpers shared by the views: untrusted cells (ages and times live in
:mod:`byconsole.formatting`, re-exported here for the views that import them from here)."""

from __future__ import annotations

from rich.style import Style
from rich.text import Text

from byconsole.formatting import DASH as DASH
from byconsole.formatting import age_step as age
from byconsole.formatting import clock as clock
from byconsole.formatting import exact_age as exact_age
from byconsole.render.columns import clean as clean
from byconsole.text import safe_text

__all__ = ["DASH", "age", "cell", "clean", "clock", "exact_age", "number"]


def cell(value: object, style: Style | str = "", limit: int = 40) -> Text:
    """An untrusted value as a cell: control characters escaped, never markup."""
    shown = DASH if value is None else safe_text(value, limit=limit)
    return Text(shown, style=style, no_wrap=True, end="")


def number(value: int | float | None, style: Style | str = "") -> Text:
    """A right-aligned count."""
    if value is None:
        return Text(DASH, justify="right", end="")
    shown = f"{value:,.1f}" if isinstance(value, float) else f"{value:,}"
    return Text(shown, style=style, justify="right", end="")
