"""dramatiq, Redis broker: ``dramatiq bench.peers.dramatiq_app --processes 1 --threads N``."""

from __future__ import annotations

import os

import dramatiq
from dramatiq.brokers.redis import RedisBroker
from dramatiq.results import Results
from dramatiq.results.backends import RedisBackend

from bench.peers.counter import tick

URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/0")
RESULTS = bool(os.environ.get("BENCH_RESULTS"))
"""Store every task's result (dramatiq's Results middleware, Redis backend, its defaults)."""

broker = RedisBroker(url=URL)
if RESULTS:
    broker.add_middleware(Results(backend=RedisBackend(url=URL)))
dramatiq.set_broker(broker)


# ``store_results`` only with the Results middleware: dramatiq refuses an actor option
# no middleware declares, even ``store_results=False``.
@dramatiq.actor(**({"store_results": True} if RESULTS else {}))
def noop() -> None:
    """The no-op task."""
    tick()


def enqueue(url: str, count: int) -> None:
    """Queue ``count`` no-op messages with ``actor.send()``."""
    for _ in range(count):
        noop.send()
