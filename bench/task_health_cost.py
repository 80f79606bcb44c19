"""What the task plane's execution window costs the fleet read, interleaved A B B A.

    .venv/bin/python -m bench.task_health_cost [--workers 10000] [--executions 20]
        [--new 1] [--repeats 9]

On one private ``redis-server``: ``--workers`` workers written by the runtime's own
heartbeat (``bench.fleet_sim``), each with ``--executions`` finished executions in its
history inside the window. Two readers, each kept warm as the console keeps its one:

* ``with``: :class:`worker_runtime.fleet.FleetReader` as it is (execution window on);
* ``without``: the same reader asking for no worker's execution index (what the read
  costs without the window; its alerts still run).

Between rounds every worker gets ``--new`` new finished executions and its lease counts
them (a busy fleet), so the ``with`` reader really reads something each time; with
``--new 0`` the fleet is idle (the window holds executions, nothing new comes).
Printed: read time median and min of each side, the ratio, the round trips of each read,
and the first (cold) read of a new reader (each worker's newest executions).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from typing import Any

from bench.common import machine, redis_client, start_redis
from bench.fleet_sim import populate
from bench.interleave import ainterleave, ratio_line
from worker_runtime.fleet import FleetReader
from worker_runtime.keys import Keys
from worker_runtime.models import now_ms
from worker_runtime.task_reads import ExecutionRead

K = Keys("v1")


class _WithoutWindow(FleetReader):
    """The reader with the execution window asking for nobody's index."""

    def _execution_read(self, worker_ids: Any, bulk: bool) -> ExecutionRead:
        return ExecutionRead([], bulk)


async def _count(redis: Any, worker_ids: list[str], per_worker: int) -> None:
    """Each worker's lease counts ``per_worker`` more processed tasks, as a worker's next
    heartbeat would say (the reader reads an index only when its counts moved)."""
    for at in range(0, len(worker_ids), 1000):
        chunk = worker_ids[at : at + 1000]
        leases = await redis.mget([K.worker_online(w) for w in chunk])
        pipe = redis.pipeline(transaction=False)
        for wid, raw in zip(chunk, leases, strict=True):
            if not raw:
                continue
            lease = json.loads(raw)
            lease["processed"] = int(lease.get("processed") or 0) + per_worker
            pipe.set(K.worker_online(wid), json.dumps(lease), keepttl=True)
        await pipe.execute()


async def _add_executions(redis: Any, worker_ids: list[str], per_worker: int, tag: str) -> None:
    await _count(redis, worker_ids, per_worker)
    now = now_ms()
    pipe = redis.pipeline(transaction=False)
    for n, wid in enumerate(worker_ids):
        scores: dict[str, int] = {}
        snaps: dict[str, str] = {}
        for i in range(per_worker):
            eid = f"{tag}-{n}-{i}"
            finished = now - 1000 + i
            scores[eid] = finished
            snaps[eid] = json.dumps(
                {
                    "execution_id": eid,
                    "agent_type": "chat",
                    "state": "succeeded" if i % 10 else "failed",
                    "error": None if i % 10 else "ValueError: x",
                    "created_at": finished - 300,
                    "started_at": finished - 200,
                    "finished_at": finished,
                }
            )
        pipe.zadd(K.worker_executions(wid), scores)
        pipe.hset(K.worker_history_snapshots(wid), mapping=snaps)
        if n % 500 == 499:
            await pipe.execute()
            pipe = redis.pipeline(transaction=False)
    await pipe.execute()


async def _main(args: argparse.Namespace) -> None:
    server = start_redis()
    redis = redis_client(server.url)
    try:
        await populate(redis, args.workers)
        worker_ids = sorted(str(w) for w in await redis.smembers(K.workers))
        await _add_executions(redis, worker_ids, args.executions, "base")

        cold = FleetReader(redis, K)
        started = time.perf_counter()
        snap = await cold.read()
        cold_ms = (time.perf_counter() - started) * 1000
        print(machine())
        print(
            f"{len(worker_ids)} workers, {args.executions} executions each in the window: "
            f"first read of a new reader {cold_ms:.0f} ms, {snap.redis.round_trips} round "
            f"trips, {snap.executions.terminal} executions in its window"
        )
        readers = {"with": FleetReader(redis, K), "without": _WithoutWindow(redis, K)}
        for reader in readers.values():
            await reader.read()  # warm: the window is read, the key batches packed
        trips: dict[str, int] = {}
        rounds = [0]

        def side(name: str) -> Any:
            async def run() -> float:
                if name == "with" and args.new:
                    rounds[0] += 1
                    await _add_executions(redis, worker_ids, args.new, f"r{rounds[0]}")
                started = time.perf_counter()
                snap = await readers[name].read()
                trips[name] = snap.redis.round_trips
                return (time.perf_counter() - started) * 1000

            return run

        result = await ainterleave(
            {"with": side("with"), "without": side("without")}, repeats=args.repeats
        )
        print(ratio_line(result, "with", "without", unit="ms"))
        print(f"round trips: with {trips['with']}, without {trips['without']}")
        final = await readers["with"].read()
        print(
            f"window of the warm reader: {final.executions.terminal} executions, "
            f"{final.executions.deferred_workers} workers' new ones left for its next reads "
            f"(at most {readers['with'].index_reads} indexes a read)"
        )
    finally:
        await redis.aclose()
        server.stop()


def main() -> None:
    """Parse the arguments, measure, print."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=10_000)
    parser.add_argument("--executions", type=int, default=20)
    parser.add_argument("--new", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=9)
    asyncio.run(_main(parser.parse_args()))


if __name__ == "__main__":
    main()
