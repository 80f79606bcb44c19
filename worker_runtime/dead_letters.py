"""Dead letters: read why tasks died, requeue them to their type's stream, or purge them.

The admin API of dead letters, beside :mod:`worker_runtime.admin`: the console's Dead
view and ``byconsole dead list|show|requeue|purge`` both call it.

A dead letter is an entry of the type's dead-letter stream, written by the
runtime when a task failed its last attempt (or was delivered too often, or was not a
task at all): the original task fields plus ``error``, ``worker_id`` and ``buried_at``.

Requeue appends the original task (attempt reset) to the type's stream, then deletes the
dead letter: if the delete is lost the task is listed twice, never lost. Every requeue
and purge is written to the audit stream with the operator and a reason.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from worker_runtime.audit import add_audit, audit_fields
from worker_runtime.keys import Keys
from worker_runtime.messages import KIND_TASK
from worker_runtime.models import AdminAction
from worker_runtime.pipeline import Batch

if TYPE_CHECKING:  # the views import the model; only the backend and CLI hold a client
    from redis.asyncio import Redis
    from redis.asyncio.cluster import RedisCluster

BURIAL_FIELDS = ("error", "worker_id", "buried_at")
"""Fields the runtime adds when it buries an entry (dropped again on requeue)."""

MAX_BATCH = 10_000
"""Most dead letters one ``--all`` requeue or purge touches."""


class DeadLetter(BaseModel):
    """One dead letter, every string as stored (make it safe before showing it)."""

    model_config = ConfigDict(frozen=True)

    entry_id: str
    agent_type: str
    task_id: str = ""
    error: str = ""
    worker_id: str = ""
    buried_at: int | None = None
    attempts: int | None = None
    payload: str = ""
    """The task's payload as JSON text (or the raw ``data`` field when it is not JSON)."""
    fields: dict[str, str] = Field(default_factory=dict)
    """The entry exactly as stored."""

    def one_line_payload(self) -> str:
        """The payload with its whitespace runs folded to single spaces (not yet safe)."""
        return " ".join(self.payload.split())


def _int(value: Any) -> int | None:
    try:
        return int(str(value))
    except ValueError:
        return None


def parse_dead_letter(agent_type: str, entry_id: str, raw: Any) -> DeadLetter:
    """A dead letter from one stream entry; never raises (a malformed one shows as such)."""
    fields = {str(k): str(v) for k, v in raw.items()} if isinstance(raw, dict) else {}
    data = fields.get("data", "")
    task: dict[str, Any] = {}
    try:
        decoded = json.loads(data) if data else {}
        task = decoded if isinstance(decoded, dict) else {}
    except ValueError:
        pass
    payload_obj = task.get("payload")
    if payload_obj is not None:
        payload = json.dumps(payload_obj, ensure_ascii=False, sort_keys=True)
    else:
        payload = data
    attempts = _int(fields.get("attempt")) or _int(task.get("attempt"))
    return DeadLetter(
        entry_id=entry_id,
        agent_type=agent_type,
        task_id=str(task.get("task_id") or ""),
        error=fields.get("error", ""),
        worker_id=fields.get("worker_id", ""),
        buried_at=_int(fields.get("buried_at")),
        attempts=attempts,
        payload=payload,
        fields=fields,
    )


class DeadLetters:
    """Dead-letter operations for one Redis.

    Args:
        redis: the client (v1 or v2 keys, single or cluster).
        keys: the key factory.
        operator: ``user@host`` written to the audit stream.
    """

    def __init__(self, redis: Redis | RedisCluster, keys: Keys, operator: str) -> None:
        self.redis = redis
        self.keys = keys
        self.operator = operator

    async def count(self, agent_type: str) -> int:
        """How many dead letters the type has."""
        return int(await self.redis.xlen(self.keys.dead_letter_stream(agent_type)))

    async def newest(self, agent_type: str, limit: int = 100) -> list[DeadLetter]:
        """The newest ``limit`` dead letters of a type, newest first."""
        stream = self.keys.dead_letter_stream(agent_type)
        entries = await self.redis.xrevrange(stream, count=max(1, limit))
        return [parse_dead_letter(agent_type, str(eid), raw) for eid, raw in entries or []]

    async def get(self, agent_type: str, entry_id: str) -> DeadLetter | None:
        """One dead letter by entry id, or ``None``."""
        stream = self.keys.dead_letter_stream(agent_type)
        try:
            entries = await self.redis.xrange(stream, min=entry_id, max=entry_id, count=1)
        except Exception as exc:  # an id Redis cannot parse is "not found", not a crash
            if "Invalid stream ID" in str(exc):
                return None
            raise
        if not entries:
            return None
        eid, raw = entries[0]
        return parse_dead_letter(agent_type, str(eid), raw)

    async def _select(self, agent_type: str, entry_ids: list[str] | None) -> list[DeadLetter]:
        if entry_ids is None:
            stream = self.keys.dead_letter_stream(agent_type)
            entries = await self.redis.xrange(stream, count=MAX_BATCH)
            return [parse_dead_letter(agent_type, str(eid), raw) for eid, raw in entries or []]
        found = [await self.get(agent_type, eid) for eid in entry_ids]
        return [d for d in found if d is not None]

    async def requeue(
        self, agent_type: str, entry_ids: list[str] | None, reason: str | None
    ) -> list[str]:
        """Put dead letters back on the type's stream (``None``: all of them).

        Returns:
            The dead-letter entry ids requeued (unknown ids are skipped).
        """
        chosen = await self._select(agent_type, entry_ids)
        if not chosen:
            return []
        stream = self.keys.type_stream(agent_type)
        dead_stream = self.keys.dead_letter_stream(agent_type)
        # Append first, delete after (two pipelines: on a cluster the streams live in
        # different slots). A failure between them duplicates a dead letter, never loses it.
        pipe = self.redis.pipeline(transaction=False)
        for dead in chosen:
            fields: dict[Any, Any] = {
                k: v for k, v in dead.fields.items() if k not in BURIAL_FIELDS
            }
            fields.pop("attempt", None)  # a fresh set of attempts
            fields.setdefault("kind", KIND_TASK)
            pipe.xadd(stream, fields)
        await pipe.execute()
        pipe = self.redis.pipeline(transaction=False)
        pipe.xdel(dead_stream, *[d.entry_id for d in chosen])
        ids = [d.entry_id for d in chosen]
        details = f"type={agent_type} count={len(ids)} ids={','.join(ids[:5])}"
        add_audit(
            pipe,
            self.keys,
            audit_fields(self.operator, AdminAction.DEAD_REQUEUE, agent_type, reason, details),
        )
        await pipe.execute()
        return ids

    async def purge(self, agent_type: str, entry_ids: list[str] | None, reason: str | None) -> int:
        """Delete dead letters for good (``None``: all of the type's). Returns how many."""
        dead_stream = self.keys.dead_letter_stream(agent_type)
        batch = Batch(self.redis.pipeline(transaction=False))
        if entry_ids is None:
            removed = batch.slot(batch.pipe.xlen(dead_stream))
            batch.pipe.delete(dead_stream)
            what = "all"
        else:
            removed = batch.slot(batch.pipe.xdel(dead_stream, *entry_ids))
            what = ",".join(entry_ids[:5])
        await batch.execute()
        count = int(removed.value)
        pipe = self.redis.pipeline(transaction=False)
        add_audit(
            pipe,
            self.keys,
            audit_fields(
                self.operator,
                AdminAction.DEAD_PURGE,
                agent_type,
                reason,
                f"type={agent_type} count={count} ids={what}",
            ),
        )
        await pipe.execute()
        return count
