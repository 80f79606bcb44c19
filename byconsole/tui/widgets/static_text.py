"""Setting a ``Static``'s text without needless repaints."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static


def show_text(widget: Static, text: Text, *, layout: bool = False) -> None:
    """Put ``text`` in ``widget`` unless it already shows exactly that.

    Each ``Static.update`` asks for a repaint, and with Textual's default ``layout``
    for a layout pass of the whole screen, even while the widget's view is hidden: the
    views are refreshed every few seconds, their lines seldom change, and one such
    pass cost more than the rest of a refresh. ``layout`` is only needed where the
    text's height can change; elsewhere the CSS fixes it.
    """
    if _same(widget.content, text):
        return
    widget.update(text, layout=layout)


def _same(shown: object, text: Text) -> bool:
    """``Text`` equality leaves out the base style and layout options; this does not."""
    return (
        isinstance(shown, Text)
        and shown.plain == text.plain
        and shown.spans == text.spans
        and shown.style == text.style
        and (shown.justify, shown.overflow, shown.no_wrap, shown.end)
        == (text.justify, text.overflow, text.no_wrap, text.end)
    )
