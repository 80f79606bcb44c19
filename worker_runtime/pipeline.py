"""Pipeline replies by name: one :class:`Slot` per queued command instead of positions.

A round trip that queues a variable number of commands and then reads ``res[4]``,
``res[6:]`` or ``res[offset + 2 * n + 1]`` breaks silently when someone queues one more
command above. Here each command's reply is read from the slot returned when it was
queued::

    batch = Batch(redis.pipeline(transaction=False))
    admin = batch.slot(batch.pipe.hgetall(keys.worker_admin(wid)))
    online = {wid: batch.slot(batch.pipe.exists(keys.worker_online(wid))) for wid in ids}
    await batch.execute()
    admin.value, {wid: s.value for wid, s in online.items()}

Commands queued without a slot (``add_audit(batch.pipe, ...)``) run too; their replies
are simply not read, or read together through :meth:`Batch.slots_since` when only a
refusal matters. Works for single-Redis and cluster pipelines alike (both return
replies in queue order).
"""

from __future__ import annotations

from typing import Any


class NotExecutedError(RuntimeError):
    """A slot was read before its pipeline ran."""


class Slot:
    """The reply of one queued command, available once :meth:`Batch.execute` has run."""

    __slots__ = ("_batch", "index")

    def __init__(self, batch: Batch, index: int) -> None:
        self._batch = batch
        self.index = index
        """The command's position in the pipeline (for messages; read replies by slot)."""

    @property
    def reply(self) -> Any:
        """The raw reply: the value, or the exception Redis answered with.

        Raises:
            NotExecutedError: the pipeline has not run yet.
        """
        replies = self._batch.replies
        if replies is None:
            raise NotExecutedError(f"pipeline command #{self.index} read before execute()")
        return replies[self.index]

    @property
    def ok(self) -> bool:
        """False when this command failed (only seen with ``raise_on_error=False``)."""
        return not isinstance(self.reply, Exception)

    @property
    def value(self) -> Any:
        """The reply; a per-command error (``WRONGTYPE`` …) is raised here."""
        reply = self.reply
        if isinstance(reply, Exception):
            raise reply
        return reply

    def get(self, default: Any = None) -> Any:
        """The reply, or ``default`` when the command failed."""
        reply = self.reply
        return default if isinstance(reply, Exception) else reply


class Batch:
    """A redis-py pipeline (single Redis or cluster) whose replies are read by slot.

    Args:
        pipe: a fresh pipeline (``redis.pipeline(transaction=False)``), queued through
            :attr:`pipe` as usual.
    """

    def __init__(self, pipe: Any) -> None:
        self.pipe = pipe
        self.replies: list[Any] | None = None
        """Every reply in queue order once executed (``None`` before)."""

    def slot(self, queued: Any) -> Slot:
        """The slot of the command just queued: ``batch.slot(batch.pipe.get(key))``.

        Raises:
            TypeError: ``queued`` is not this batch's pipeline (what a queueing call
                returns), so the slot would name some other command.
        """
        if queued is not self.pipe:
            raise TypeError("Batch.slot takes the result of queueing on batch.pipe")
        if self.replies is not None:
            raise RuntimeError("the pipeline already ran; queue on a new Batch")
        return Slot(self, len(self.pipe) - 1)

    def slots_since(self, start: int) -> list[Slot]:
        """A slot per command queued since the batch held ``start`` commands.

        For a helper that queues a varying number of commands on :attr:`pipe`
        (``queue_presence(batch.pipe, replica)``) whose replies are only checked for
        refusals: take ``start = len(batch)`` before calling it.

        Raises:
            ValueError: ``start`` is not a length this batch has had.
        """
        end = len(self.pipe)
        if not 0 <= start <= end:
            raise ValueError(f"start {start} is outside the {end} queued commands")
        if self.replies is not None:
            raise RuntimeError("the pipeline already ran; queue on a new Batch")
        return [Slot(self, index) for index in range(start, end)]

    def __len__(self) -> int:
        return len(self.pipe)

    async def execute(self, *, raise_on_error: bool = True) -> list[Any]:
        """Run every queued command in one round trip; fills the slots.

        Args:
            raise_on_error: as redis-py: raise the first per-command error, or (False)
                keep errors as replies for :attr:`Slot.ok` / :meth:`Slot.get`.
        """
        queued = len(self.pipe)  # redis-py empties the pipeline when it runs
        replies: list[Any] = list(await self.pipe.execute(raise_on_error=raise_on_error))
        if len(replies) != queued:
            raise RuntimeError(f"pipeline returned {len(replies)} replies for {queued} commands")
        self.replies = replies
        return replies
