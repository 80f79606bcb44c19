"""celery, Redis broker: ``celery -A bench.peers.celery_app worker -P threads -c N``."""

from __future__ import annotations

import os

from celery import Celery

from bench.peers.counter import tick

URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/0")
RESULTS = bool(os.environ.get("BENCH_RESULTS"))
"""Store every task's result in Redis (the result backend); ignored otherwise."""

app = Celery("bench", broker=URL, backend=URL if RESULTS else None)
app.conf.broker_connection_retry_on_startup = True
app.conf.worker_hijack_root_logger = False


@app.task(ignore_result=not RESULTS)
def noop() -> None:
    """The no-op task."""
    tick()


def enqueue(url: str, count: int) -> None:
    """Queue ``count`` no-op tasks with ``task.apply_async()``."""
    for _ in range(count):
        noop.apply_async()
