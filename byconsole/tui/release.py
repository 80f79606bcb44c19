"""Freeing large replaced objects once the screen shows their successors."""

from __future__ import annotations

from typing import Any

from textual.message_pump import MessagePump


def release_after_paint(node: MessagePump, holder: list[Any]) -> None:
    """Drop what ``holder`` holds after ``node``'s next paint.

    Freeing a 10,000-worker snapshot (its views, their lists and strings) takes 15-20 ms,
    all of it in one C call wherever it happens (a thread would hold the interpreter
    just as long). Done when the views let go of it, it delayed the paint of the new
    snapshot by that much; after the paint, it delays nothing the operator sees.
    ``holder`` must be the last reference: a list the caller gives away.
    """
    node.call_after_refresh(holder.clear)
