"""What reading a type's pending entries and listing every type's dead letters cost.

    .venv/bin/python -m bench.pending_bench [--pel 100000] [--page 500] [--types 1000]
        [--repeats 9]

On a private ``redis-server``: one type stream whose group holds ``--pel`` pending
entries (half by consumers without a lease), then ``--repeats`` reads of the first
page (``PendingEntries.page``: three round trips whatever the PEL's size) and of a page
deep inside it (a cursor), and ``--types`` types with dead letters listed by
the fleet snapshot + ``DeadLetters.newest_of`` (``byconsole dead list`` without a type). Prints
median and min wall time and the round trips counted on the client. Figures, never
asserts.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

from bench.common import machine, redis_client, start_redis
from worker_runtime.dead_letters import DeadLetters
from worker_runtime.fleet import FleetReader
from worker_runtime.keys import CONSUMER_GROUP, Keys
from worker_runtime.messages import encode_task
from worker_runtime.models import Task
from worker_runtime.pending import PendingEntries

K = Keys()


async def _fill_pel(redis: Any, size: int) -> None:
    stream = K.type_stream("chat")
    await redis.xgroup_create(stream, CONSUMER_GROUP, id="0", mkstream=True)
    fields = encode_task(Task(task_id="t", agent_type="chat", payload={"text": "x" * 200}))
    for start in range(0, size, 5_000):
        pipe = redis.pipeline(transaction=False)
        for _ in range(min(5_000, size - start)):
            pipe.xadd(stream, fields)
        await pipe.execute()
    for i, consumer in enumerate(("gone-1", "live-1")):
        await redis.xreadgroup(CONSUMER_GROUP, consumer, {stream: ">"}, count=size // 2 + i)
    await redis.set(K.worker_online("live-1"), "{}")


async def _fill_dead(redis: Any, types: int) -> None:
    pipe = redis.pipeline(transaction=False)
    for i in range(types):
        agent_type = f"type-{i:04d}"
        pipe.sadd(K.agent_types, agent_type)
        for _ in range(3):
            pipe.xadd(K.dead_letter_stream(agent_type), {"data": "{}", "error": "E"})
    await pipe.execute()


class Counting:
    """Counts the round trips a client makes (commands sent alone, pipelines)."""

    def __init__(self, redis: Any) -> None:
        self.trips = 0
        self._redis = redis
        original_pipeline = redis.pipeline
        original_execute = redis.execute_command

        def pipeline(*args: Any, **kwargs: Any) -> Any:
            pipe = original_pipeline(*args, **kwargs)
            run = pipe.execute

            async def execute(*a: Any, **kw: Any) -> Any:
                if len(pipe):
                    self.trips += 1
                return await run(*a, **kw)

            pipe.execute = execute
            return pipe

        async def execute_command(*args: Any, **kwargs: Any) -> Any:
            self.trips += 1
            return await original_execute(*args, **kwargs)

        redis.pipeline = pipeline
        redis.execute_command = execute_command


async def _timed(
    label: str,
    call: Callable[[], Awaitable[Any]],
    repeats: int,
    counter: Counting,
    note: str = "",
) -> None:
    await call()  # warm-up, unrecorded
    times: list[float] = []
    trips = 0
    for _ in range(repeats):
        counter.trips = 0
        started = time.perf_counter()
        await call()
        times.append((time.perf_counter() - started) * 1000)
        trips = counter.trips
    print(
        f"{label:<46} median {statistics.median(times):7.2f} ms  "
        f"min {min(times):7.2f} ms  round trips {trips}{note}"
    )


async def _main(args: argparse.Namespace) -> None:
    server = start_redis()
    try:
        redis = redis_client(server.url)
        counter = Counting(redis)
        print(f"# {machine()}")
        print(f"# PEL {args.pel:,} entries, page {args.page}, {args.types:,} dead-letter types")
        await _fill_pel(redis, args.pel)
        await _fill_dead(redis, args.types)
        pending = PendingEntries(redis, K, "bench@host")
        first = await pending.page("chat", args.page)
        assert first.total == args.pel and len(first.entries) == args.page
        deep = None
        cursor = first.next_cursor
        for _ in range(args.pel // args.page // 2):  # walk half-way in for a deep cursor
            deep = cursor
            cursor = (await pending.page("chat", args.page, cursor)).next_cursor
        await _timed(
            f"type pending: first page of {args.page}",
            lambda: pending.page("chat", args.page),
            args.repeats,
            counter,
        )
        await _timed(
            f"type pending: a page {args.pel // 2:,} entries in",
            lambda: pending.page("chat", args.page, deep),
            args.repeats,
            counter,
        )
        dead = DeadLetters(redis, K, "bench@host")

        async def list_all() -> None:  # as byconsole dead list does it
            snapshot = await FleetReader(redis, K).read()
            await dead.newest_of([t.name for t in snapshot.types if t.dead], 20)
            await dead.control_plane(20)

        # The fleet reader sends its pipelines packed itself: not seen by the counter.
        label = f"dead list: {args.types:,} types x newest 20"
        await _timed(label, list_all, args.repeats, counter, " + the fleet read's")
        await redis.aclose()
    finally:
        server.cleanup()


def main() -> None:
    """Parse the sizes and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pel", type=int, default=100_000)
    parser.add_argument("--page", type=int, default=500)
    parser.add_argument("--types", type=int, default=1_000)
    parser.add_argument("--repeats", type=int, default=9)
    asyncio.run(_main(parser.parse_args()))


if __name__ == "__main__":
    main()
