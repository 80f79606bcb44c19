"""Freeing large replaced objects off the event loop."""

from __future__ import annotations

import threading
from typing import Any


def release_in_thread(holder: list[Any]) -> None:
    """Drop what ``holder`` holds in a thread: freeing a replaced snapshot is not loop work.

    Freeing a 10,000-worker snapshot (its views, their lists and strings) took 15-20 ms
    of the event loop after every refresh, once the views had let go of it. In a thread
    the interpreter still hands the loop the GIL every few milliseconds, so keys and
    paints go on. ``holder`` must be the last reference: a list the caller gives away.
    """
    threading.Thread(target=holder.clear, name="release-snapshot", daemon=True).start()
