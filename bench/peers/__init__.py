"""The peers measured side by side with worker_runtime: one small app module each.

Every app defines a no-op task that only calls :func:`bench.peers.counter.tick` (no
Redis call of its own), and an ``enqueue(url, count)`` that queues ``count`` of them
through the peer's own client API. ``python -m bench.peers.enqueue NAME URL COUNT``
runs the latter in a fresh process.
"""
