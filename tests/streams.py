"""Typed reads of Redis streams and hashes for assertions.

redis-py types its replies for every ``decode_responses`` setting at once (``bytes | str``,
optional entries); the test clients always decode, so these helpers give the str shape the
assertions read, and fail loudly if a reply is not that shape.
"""

from __future__ import annotations

from worker_runtime.connection import AnyRedis

Entry = tuple[str, dict[str, str]]


def _entry(raw: object) -> Entry:
    assert isinstance(raw, list | tuple) and len(raw) == 2, raw
    entry_id, fields = raw
    assert isinstance(fields, dict), raw
    return str(entry_id), {str(k): str(v) for k, v in fields.items()}


async def stream_entries(redis: AnyRedis, key: str) -> list[Entry]:
    """Every entry of stream ``key``, oldest first, as ``(id, fields)`` with str fields."""
    return [_entry(raw) for raw in await redis.xrange(key) or []]


async def hash_fields(redis: AnyRedis, key: str) -> dict[str, str]:
    """Every field of hash ``key`` as str (empty when the key is missing)."""
    return {str(k): str(v) for k, v in (await redis.hgetall(key)).items()}
