"""dramatiq, Redis broker: ``dramatiq bench.peers.dramatiq_app --processes 1 --threads N``."""

from __future__ import annotations

import os

import dramatiq
from dramatiq.brokers.redis import RedisBroker

from bench.peers.counter import tick

broker = RedisBroker(url=os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/0"))
dramatiq.set_broker(broker)


@dramatiq.actor
def noop() -> None:
    """The no-op task."""
    tick()


def enqueue(url: str, count: int) -> None:
    """Queue ``count`` no-op messages with ``actor.send()``."""
    for _ in range(count):
        noop.send()
