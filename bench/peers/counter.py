"""Counts completed no-op tasks inside a worker process, without touching Redis.

The worker's task calls :func:`tick`. The first call notes the time; the call that
reaches ``BENCH_TASKS`` writes ``{"first", "last", "count"}`` (``time.monotonic()``
seconds, comparable across processes on Linux) to ``BENCH_OUT``. Drain time is
``last - first``: the worker's start-up and first fetch are not part of it, for every
system alike.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

_lock = threading.Lock()
_count = 0
_first = 0.0
_target = int(os.environ.get("BENCH_TASKS", "0") or 0)
_out = os.environ.get("BENCH_OUT", "")


def tick() -> None:
    """One task completed (thread-safe: thread pools call it concurrently)."""
    global _count, _first
    with _lock:
        _count += 1
        if _count == 1:
            _first = time.monotonic()
        if _count == _target and _out:
            last = time.monotonic()
            tmp = Path(f"{_out}.tmp")
            tmp.write_text(json.dumps({"first": _first, "last": last, "count": _count}))
            tmp.replace(_out)
