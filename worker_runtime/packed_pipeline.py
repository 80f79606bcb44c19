"""Large pipelines on a single Redis without holding the event loop.

redis-py's ``Pipeline.execute`` turns every queued command into the Redis protocol on the
event loop, writes it all in one call and reads every reply back to back. The fleet
read's second round trip grows with the fleet (four arguments per worker): packing it
on the loop holds the loop (``git show baccccc:bench/read_stall.py``, a one-off script
since removed), so a key pressed meanwhile waits.

Here the same round trip is one :func:`execute`:

* commands are packed in a thread when there are many (:data:`THREAD_MIN_ARGS`), and a
  :class:`PackedBatch` keeps its packed bytes: a caller that sends the same keys every time
  (the fleet's worker keys, while the registry is unchanged) packs them once;
* the bytes go out in slices of :data:`SEND_SLICE`, each write a short loop step;
* replies are read and parsed by the client itself (``Redis.parse_response``: the same
  response callbacks, the same decoding), giving the loop a turn every
  :data:`YIELD_AFTER` seconds.

The result is ``pipe.execute(raise_on_error=False)``'s: one reply per command, in order,
a command's own error as its :class:`~redis.exceptions.ResponseError` object in its place.
Connection errors raise, retried as the client's ``Retry`` says. A connection whose
exchange did not finish (an error, a cancellation between two replies) is disconnected
before it goes back to the pool: a later command never reads this one's replies.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

from hiredis import pack_command
from redis.asyncio import Redis
from redis.asyncio.connection import Connection, ConnectionPool
from redis.exceptions import ResponseError

Command: TypeAlias = tuple[str, tuple[Any, ...], dict[str, Any]]
"""A queued command: the client's method name, its arguments, its keyword arguments."""

THREAD_MIN_ARGS = 2_000
"""Commands with at least this many arguments in all are packed in a thread."""

SEND_SLICE = 256 * 1024
"""Bytes handed to the socket per loop step."""

YIELD_AFTER = 0.003
"""Seconds of reply parsing after which the loop gets a turn."""


@dataclass(frozen=True)
class _Packed:
    pool: ConnectionPool  # packed with this pool's encoder
    data: list[bytes]
    replies: list[tuple[str, Mapping[str, Any]]]  # per command: its name and parse options


class PackedBatch:
    """Commands sent together, packed at most once per connection pool.

    Args:
        commands: what to send, in order (one reply each).
    """

    __slots__ = ("_packed", "commands")

    def __init__(self, commands: Sequence[Command]) -> None:
        self.commands = list(commands)
        self._packed: _Packed | None = None

    def __len__(self) -> int:
        return len(self.commands)

    def packed_for(self, pool: ConnectionPool) -> _Packed | None:
        """The bytes packed for ``pool``'s connections, if packed yet."""
        packed = self._packed
        return packed if packed is not None and packed.pool is pool else None

    def pack(self, redis: Redis, connection: Connection) -> _Packed:
        """Pack (CPU only: safe in a thread). Keeps the result for later sends."""
        # A private pipeline object turns each method call into the protocol arguments
        # and parse options exactly as ``pipe.<command>(...)`` would; nothing is sent.
        pipe = redis.pipeline(transaction=False)
        for name, args, kwargs in self.commands:
            getattr(pipe, name)(*args, **kwargs)
        stack = pipe.command_stack
        data = _pack(connection, [args for args, _ in stack])
        replies = [(str(args[0]), options) for args, options in stack]
        packed = _Packed(redis.connection_pool, data, replies)
        self._packed = packed
        return packed


def _pack(connection: Connection, commands: list[Any]) -> list[bytes]:
    """The protocol bytes of ``commands``, one piece per command.

    hiredis's packer (C) is faster than redis-py's and writes the same bytes. It
    refuses what redis-py would encode or reject differently (a bool; text that is not
    valid UTF-8, which the client encodes with ``errors="replace"``): then redis-py
    packs it all.
    """
    try:
        return [pack_command(_split_name(args)) for args in commands]
    except (TypeError, ValueError):
        return connection.pack_commands(commands)


def _split_name(args: tuple[Any, ...]) -> tuple[Any, ...]:
    """A command whose name has words (``XINFO GROUPS``) sends each as an argument.

    redis-py does this in its own packer; hiredis's takes the arguments as they are.
    """
    name = args[0]
    if isinstance(name, str) and " " in name:
        return (*name.split(), *args[1:])
    return args


def command_count(parts: Sequence[Command | PackedBatch]) -> int:
    """How many replies ``parts`` get (a batch counts each of its commands)."""
    return sum(len(p) if isinstance(p, PackedBatch) else 1 for p in parts)


def expand(parts: Sequence[Command | PackedBatch]) -> list[Command]:
    """Every command of ``parts``, in order (batches opened)."""
    out: list[Command] = []
    for part in parts:
        if isinstance(part, PackedBatch):
            out += part.commands
        else:
            out.append(part)
    return out


def _arguments(commands: Sequence[Command]) -> int:
    """About how many protocol arguments ``commands`` pack to (lists count their items)."""
    total = 0
    for _, args, _ in commands:
        for arg in args:
            total += len(arg) if isinstance(arg, list | tuple) else 1
    return total


def _batches(parts: Sequence[Command | PackedBatch]) -> list[PackedBatch]:
    """``parts`` as batches: loose commands between two batches become one batch."""
    out: list[PackedBatch] = []
    loose: list[Command] = []
    for part in parts:
        if isinstance(part, PackedBatch):
            if loose:
                out.append(PackedBatch(loose))
                loose = []
            out.append(part)
        else:
            loose.append(part)
    if loose:
        out.append(PackedBatch(loose))
    return out


def _slices(data: Sequence[bytes], size: int) -> Iterator[list[bytes]]:
    """``data``'s pieces grouped into writes of about ``size`` bytes."""
    group: list[bytes] = []
    length = 0
    for piece in data:
        group.append(piece)
        length += len(piece)
        if length >= size:
            yield group
            group, length = [], 0
    if group:
        yield group


async def execute(redis: Redis, parts: Sequence[Command | PackedBatch]) -> list[Any]:
    """Send ``parts`` as one pipelined round trip on a connection of ``redis``'s pool.

    Returns:
        One reply per command, a per-command error as its exception object.

    Raises:
        redis.exceptions.RedisError: the connection failed (after the client's retries).
    """
    batches = _batches(parts)
    if not batches:
        return []
    pool = redis.connection_pool
    connection: Connection = await pool.get_connection()  # type: ignore[no-untyped-call]
    try:
        todo = [b for b in batches if b.packed_for(pool) is None]
        if todo:
            if _arguments([c for b in todo for c in b.commands]) >= THREAD_MIN_ARGS:
                await asyncio.to_thread(_pack_all, redis, connection, todo)
            else:
                _pack_all(redis, connection, todo)
        # Taken now: a batch packed later for another pool must not change what is sent.
        packed = [b.packed_for(pool) or b.pack(redis, connection) for b in batches]

        async def exchange() -> list[Any]:
            return await _exchange(redis, connection, packed)

        async def failed(error: Exception) -> None:
            await connection.disconnect()

        replies: list[Any] = await connection.retry.call_with_retry(exchange, failed)
        return replies
    finally:
        # Shielded, as redis-py releases: a second cancellation must not leave the pool's
        # in-use bookkeeping half updated.
        await asyncio.shield(pool.release(connection))


def _pack_all(redis: Redis, connection: Connection, batches: Sequence[PackedBatch]) -> None:
    for batch in batches:
        batch.pack(redis, connection)


async def _exchange(redis: Redis, connection: Connection, packed: Sequence[_Packed]) -> list[Any]:
    """Write every batch, then read one reply per command (the pipeline's own loop)."""
    try:
        first = True
        for batch in packed:
            for group in _slices(batch.data, SEND_SLICE):
                await connection.send_packed_command(group, check_health=first)
                first = False
        replies: list[Any] = []
        turn = time.perf_counter()
        for batch in packed:
            for name, options in batch.replies:
                try:
                    replies.append(await redis.parse_response(connection, name, **options))
                except ResponseError as error:
                    replies.append(error)
                if time.perf_counter() - turn > YIELD_AFTER:
                    # Buffered replies parse without ever suspending: give keys a turn.
                    await asyncio.sleep(0)
                    turn = time.perf_counter()
    except BaseException:
        # Replies may be left unread on the socket (cancelled between two of them, a
        # callback failed): never hand that connection to the next caller as it is.
        await connection.disconnect(nowait=True)
        raise
    return replies
