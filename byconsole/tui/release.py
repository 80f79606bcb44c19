"""Freeing large replaced objects once the screen shows their successors."""

from __future__ import annotations

from typing import Any

from textual.message_pump import MessagePump

RELEASE_DELAY_S = 0.05
"""How long after the paint the replaced objects are freed."""


def release_after_paint(node: MessagePump, holder: list[Any]) -> None:
    """Drop what ``holder`` holds a little after ``node``'s next paint.

    Freeing a 10,000-worker snapshot (its views, their lists and strings) takes 15-20 ms,
    all of it in one C call wherever it happens (a thread would hold the interpreter
    just as long). Done when the views let go of it, it delayed the paint of the new
    snapshot by that much. Right after the paint, it still came straight after it: a
    key pressed during the paint waited for both. A moment later, keys that arrived
    meanwhile have been answered, and a key meeting the free waits for it alone.
    ``holder`` must be the last reference: a list the caller gives away.
    """

    def later() -> None:
        node.set_timer(RELEASE_DELAY_S, holder.clear)

    node.call_after_refresh(later)
