"""What ``byconsole find`` costs at fleet scale: time and round trips per kind of id.

    .venv/bin/python -m bench.lookup_bench [--workers 1000] [--types 100] [--entries 2000]
        [--snapshots 200] [--repeats 5] [--json PATH]

A private redis-server gets ``--workers`` workers with ``--snapshots`` finished executions
each (the runtime's default history cap is 200) and ``--types`` type streams with
``--entries`` tasks each. Then, interleaved (A B C … then reversed, ``--repeats`` rounds
after one warm-up), :meth:`Lookup.find` for:

* ``entry``: a stream entry id (exact ``XRANGE id id`` on every stream);
* ``task``: a task id (searched in the newest entries of each stream and every snapshot);
* ``execution``: an execution id (``HGET`` on every worker, then the search);
* ``unknown``: an id nothing has (the whole search, nothing found).

Printed per kind: median and min seconds, round trips, and the load average before and
after. Figures, never asserts.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
import uuid
from typing import Any

from bench.common import machine, redis_client, start_redis, write_results
from bench.interleave import ainterleave
from worker_runtime.keys import Keys
from worker_runtime.lookup import Lookup
from worker_runtime.pipeline import Batch

K = Keys()


async def _populate(redis: Any, args: argparse.Namespace) -> dict[str, str]:
    """Write the fleet; returns one id of each kind."""
    ids: dict[str, str] = {}
    pipe = redis.pipeline(transaction=False)
    for t in range(args.types):
        pipe.sadd(K.agent_types, f"type-{t}")
        for i in range(args.entries):
            task_id = uuid.uuid4().hex
            task = {"task_id": task_id, "agent_type": f"type-{t}", "payload": {"i": i}}
            pipe.xadd(K.type_stream(f"type-{t}"), {"kind": "task", "data": json.dumps(task)})
            if t == args.types // 2 and i == args.entries - 10:
                ids["task"] = task_id
        if len(pipe) > 5000:
            await pipe.execute()
    await pipe.execute()
    for w in range(args.workers):
        wid = f"worker-{w}"
        pipe.sadd(K.workers, wid)
        snaps = {}
        for i in range(args.snapshots):
            eid = uuid.uuid4().hex[:16]
            snaps[eid] = json.dumps(
                {
                    "execution_id": eid,
                    "task_id": uuid.uuid4().hex,
                    "worker_id": wid,
                    "state": "succeeded",
                    "started_at": 1,
                    "finished_at": 2,
                }
            )
            if w == args.workers // 2 and i == 0:
                ids["execution"] = eid
        pipe.hset(K.worker_history_snapshots(wid), mapping=snaps)
        if len(pipe) > 500:
            await pipe.execute()
    await pipe.execute()
    entries = await redis.xrevrange(K.type_stream(f"type-{args.types // 2}"), count=1)
    ids["entry"] = str(entries[0][0])
    ids["unknown"] = "no-such-id-" + uuid.uuid4().hex
    return ids


async def _main(args: argparse.Namespace) -> dict[str, Any]:
    server = start_redis()
    try:
        redis = redis_client(server.url)
        started = time.perf_counter()
        ids = await _populate(redis, args)
        print(
            f"fleet: {args.workers} workers x {args.snapshots} snapshots, {args.types} types "
            f"x {args.entries} entries, written in {time.perf_counter() - started:.1f}s"
        )
        lookup = Lookup(redis, K)
        trips = {"n": 0}
        original = Batch.execute

        async def counted(batch: Batch, *, raise_on_error: bool = True) -> list[Any]:
            trips["n"] += 1
            return await original(batch, raise_on_error=raise_on_error)

        Batch.execute = counted  # type: ignore[method-assign,assignment]
        round_trips: dict[str, int] = {}

        def side(kind: str) -> Any:
            async def run() -> float:
                trips["n"] = 0
                t0 = time.perf_counter()
                result = await lookup.find(ids[kind])
                elapsed = time.perf_counter() - t0
                round_trips[kind] = trips["n"]
                assert result.found is (kind != "unknown"), kind
                return elapsed

            return run

        result = await ainterleave(
            {kind: side(kind) for kind in ("entry", "task", "execution", "unknown")},
            repeats=args.repeats,
        )
        Batch.execute = original  # type: ignore[method-assign]
        await redis.aclose()
    finally:
        server.cleanup()
    print(machine())
    for kind in ("entry", "task", "execution", "unknown"):
        r = result[kind]
        print(
            f"find {kind:9s} median {r['median'] * 1000:8.1f} ms  min {r['min'] * 1000:8.1f} ms"
            f"  round trips {round_trips[kind]}"
        )
    print(f"load {result['load_before']} -> {result['load_after']}")
    return {"args": vars(args), "result": result, "round_trips": round_trips}


def main() -> None:
    """Parse the sizes, run, print (and optionally write) the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=1000)
    parser.add_argument("--types", type=int, default=100)
    parser.add_argument("--entries", type=int, default=2000)
    parser.add_argument("--snapshots", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", metavar="PATH")
    args = parser.parse_args()
    write_results(args.json, asyncio.run(_main(args)))


if __name__ == "__main__":
    main()
