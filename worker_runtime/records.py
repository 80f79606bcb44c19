"""Reading by-framework clients' execution records for the tasks a replica starts.

A task sent by a by-framework client has a record in its session's registry (its
execution id, its ``created_at``, and whether it already finished: a replay must not
run again). Reading it with one awaited command per task cost a round trip before
every handler and capped the envelope path at a fifth of the native one: the tasks a
read delivers start in the same loop turn, so their reads are queued here and sent
together, one script per session, in one pipeline (README, "How the runtime
behaves").
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from typing import Any

from worker_runtime.connection import LOOP_ERRORS
from worker_runtime.envelope import LOAD_RECORDS, parse_records
from worker_runtime.keys import Keys


class RecordReader:
    """Coalesces the record reads of one loop turn into one pipeline.

    Args:
        redis: the client.
        keys: the key factory.
    """

    def __init__(self, redis: Any, keys: Keys) -> None:
        self.redis = redis
        self.keys = keys
        self._queued: dict[str, list[tuple[str, asyncio.Future[dict[str, Any]]]]] = defaultdict(
            list
        )
        self._flusher: asyncio.Task[None] | None = None

    def load(self, session_id: str, message_id: str) -> asyncio.Future[dict[str, Any]]:
        """The record of ``message_id`` in ``session_id``'s registry ({} when none).

        The future fails with the connection error when Redis could not be read.
        """
        loop = asyncio.get_running_loop()
        future: asyncio.Future[dict[str, Any]] = loop.create_future()
        self._queued[session_id].append((message_id, future))
        if self._flusher is None:
            # Runs after every task started in this turn has queued its read.
            self._flusher = loop.create_task(self._flush(), name="record-reads")
        return future

    async def _flush(self) -> None:
        queued, self._queued = self._queued, defaultdict(list)
        self._flusher = None
        pipe = self.redis.pipeline(transaction=False)
        for session_id, items in queued.items():
            pipe.eval(
                LOAD_RECORDS,
                1,
                self.keys.session_registry(session_id),
                *(message_id for message_id, _ in items),
            )
        try:
            replies = await pipe.execute(raise_on_error=False)
        except LOOP_ERRORS as exc:
            replies = [exc] * len(queued)
        except asyncio.CancelledError:
            for items in queued.values():
                for _, future in items:
                    future.cancel()
            raise
        for items, reply in zip(queued.values(), replies, strict=True):
            if isinstance(reply, BaseException):
                for _, future in items:
                    if not future.done():
                        future.set_exception(reply)
                continue
            for (_, future), record in zip(items, parse_records(reply, len(items)), strict=True):
                if not future.done():
                    future.set_result(record)
