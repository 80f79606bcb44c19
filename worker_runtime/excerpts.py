"""Stream entries read as excerpts: every field value cut to a prefix inside Redis.

A listing (``byconsole dead list``, the console's Dead and Pending views) shows a
60-character excerpt of each payload; reading whole entries for it made a listing of
six 50 MB dead letters cost 800 MiB of the console's memory and seconds of transfer.
Here a read-only script reads one entry at a time and returns its fields cut to
:data:`EXCERPT_BYTES` (at a UTF-8 character boundary) with the stored length of every
field it cut, so a listing moves a few kilobytes per entry whatever the entries hold.
Only ``dead show`` (and the moves that rewrite an entry) read an entry whole.

One key per script call, so it runs on Redis Cluster as on a single Redis. A Redis
older than 7 (no ``EVAL_RO``) gets it through ``EVAL``; where scripts are refused
(an ACL user without ``EVAL_RO``/``EVAL``), entries are read one per command
(``XRANGE ... COUNT 1``) and cut here: the memory then holds one entry at a time,
never a whole page.

A cut ``data`` field is no longer valid JSON: :func:`partial_object` decodes the
members that lie wholly inside the prefix and hands back the raw text of the member
the cut falls in, which is what an excerpt shows.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from worker_runtime.pipeline import Batch

if TYPE_CHECKING:
    from redis.asyncio import Redis
    from redis.asyncio.cluster import RedisCluster

EXCERPT_BYTES = 4096
"""Bytes of each field a listing reads: room for the 600 characters the console's Dead
pane shows after the task's id and type, in any script."""

LUA_CUT = """
local function cut(fields, limit)
  local out, cuts = {}, {}
  for i = 1, #fields, 2 do
    local v = fields[i + 1]
    out[i] = fields[i]
    if #v > limit then
      local n = limit
      -- never split a UTF-8 character: back off over continuation bytes (0x80-0xBF)
      while n > 0 do
        local b = string.byte(v, n + 1)
        if b < 128 or b >= 192 then break end
        n = n - 1
      end
      out[i + 1] = string.sub(v, 1, n)
      table.insert(cuts, fields[i])
      table.insert(cuts, #v)
    else
      out[i + 1] = v
    end
  end
  return out, cuts
end
"""

"""Lua: ``cut(fields, limit)`` -> the fields with each value cut to ``limit`` bytes (at
a character boundary), and ``{name, stored length, ...}`` of the values it cut."""

RANGE_SCRIPT = (
    LUA_CUT
    + """
if redis.call('TYPE', KEYS[1])['ok'] ~= 'stream' then return {} end
local rev = ARGV[1] == 'rev'
local moving, other = ARGV[2], ARGV[3]
local count, limit = tonumber(ARGV[4]), tonumber(ARGV[5])
local out = {}
while #out < count do
  local e
  if rev then
    e = redis.call('XREVRANGE', KEYS[1], moving, other, 'COUNT', 1)
  else
    e = redis.call('XRANGE', KEYS[1], moving, other, 'COUNT', 1)
  end
  if #e == 0 then break end
  local f, c = cut(e[1][2], limit)
  table.insert(out, {e[1][1], f, c})
  moving = '(' .. e[1][1]
  e = nil
end
return out
"""
)
"""KEYS: a stream. ARGV: ``rev``/``fwd``, the first bound (the end for ``rev``), the
other bound, how many entries, the byte limit. Returns ``{{id, fields, cuts}, ...}``
where ``cuts`` is ``{name, stored length, ...}``. One entry per ``XRANGE`` so the
script never holds more than one whole entry."""


@dataclass(frozen=True)
class Excerpt:
    """One stream entry with its field values cut to a prefix."""

    entry_id: str
    fields: dict[str, str]
    cut: dict[str, int] = field(default_factory=dict)
    """Fields whose stored value is longer than shown: name -> stored length (bytes)."""


@dataclass(frozen=True)
class RangeRead:
    """One range of one stream to read as excerpts."""

    stream: str
    start: str = "+"
    """The first bound: ``+`` for the newest (reverse), an id, or ``(id`` (exclusive)."""
    end: str = "-"
    count: int = 100
    reverse: bool = True


def _str(value: Any) -> str:
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode("utf-8", "replace")
    return value if isinstance(value, str) else str(value)


def _pairs(flat: Any) -> dict[str, str]:
    if isinstance(flat, dict):
        return {_str(k): _str(v) for k, v in flat.items()}
    if not isinstance(flat, list | tuple):
        return {}
    return {_str(flat[i]): _str(flat[i + 1]) for i in range(0, len(flat) - 1, 2)}


def _cuts(flat: Any) -> dict[str, int]:
    out: dict[str, int] = {}
    for name, length in _pairs(flat).items():
        try:
            out[name] = int(length)
        except ValueError:
            continue
    return out


def parse_reply(reply: Any) -> list[Excerpt]:
    """The script's reply as excerpts; anything else (an error, WRONGTYPE) as none."""
    if not isinstance(reply, list):
        return []
    out: list[Excerpt] = []
    for item in reply:
        if isinstance(item, list | tuple) and len(item) == 3:
            out.append(Excerpt(_str(item[0]), _pairs(item[1]), _cuts(item[2])))
    return out


def cut_fields(raw: Any, limit: int = EXCERPT_BYTES) -> tuple[dict[str, str], dict[str, int]]:
    """What the script does, for an entry already read: the fields cut, and the cuts."""
    fields: dict[str, str] = {}
    cuts: dict[str, int] = {}
    for name, value in _pairs(raw).items():
        data = value.encode("utf-8", "surrogatepass")
        if len(data) > limit:
            fields[name] = data[:limit].decode("utf-8", "ignore")
            cuts[name] = len(data)
        else:
            fields[name] = value
    return fields, cuts


def _unknown_command(reply: Any) -> bool:
    return isinstance(reply, Exception) and "unknown command" in str(reply).lower()


def _refused(reply: Any) -> bool:
    """Scripts refused to this user (ACL) or by the server (no scripting)."""
    if not isinstance(reply, Exception):
        return False
    text = str(reply).lower()
    return "no permissions" in text or "noperm" in text or "unknown command" in text


async def read_excerpts(
    redis: Redis | RedisCluster, reads: list[RangeRead], limit: int = EXCERPT_BYTES
) -> list[list[Excerpt]]:
    """Each range's entries as excerpts, in one round trip (two or more on fallback).

    Args:
        redis: the client (single or cluster).
        reads: the ranges, each of one stream.
        limit: bytes kept of each field.

    Returns:
        Per read, its entries in the order read (newest first for a reverse read).
        A missing key, or one that is not a stream, reads as no entries.

    Raises:
        redis errors of the connection (an unreachable Redis), as any read.
    """
    if not reads:
        return []
    replies = await _run_scripts(redis, reads, limit, "eval_ro")
    if any(_unknown_command(r) for r in replies):  # Redis < 7: no EVAL_RO
        replies = await _run_scripts(redis, reads, limit, "eval")
    out: list[list[Excerpt]] = []
    for read, reply in zip(reads, replies, strict=True):
        if _refused(reply):
            out.append(await _one_by_one(redis, read, limit))
        elif isinstance(reply, Exception) and not _is_reply_error(reply):
            raise reply
        else:
            out.append(parse_reply(reply))
    return out


def _is_reply_error(reply: Exception) -> bool:
    from redis.exceptions import ResponseError

    return isinstance(reply, ResponseError)


async def _run_scripts(
    redis: Redis | RedisCluster, reads: list[RangeRead], limit: int, command: str
) -> list[Any]:
    batch = Batch(redis.pipeline(transaction=False))
    for read in reads:
        direction = "rev" if read.reverse else "fwd"
        args = (direction, read.start, read.end, max(1, read.count), limit)
        getattr(batch.pipe, command)(RANGE_SCRIPT, 1, read.stream, *args)
    return list(await batch.execute(raise_on_error=False))


async def _one_by_one(redis: Redis | RedisCluster, read: RangeRead, limit: int) -> list[Excerpt]:
    """The script's loop from here: one entry per command, cut as soon as it arrives."""
    from redis.exceptions import ResponseError

    out: list[Excerpt] = []
    moving = read.start
    while len(out) < max(1, read.count):
        try:
            if read.reverse:
                entries = await redis.xrevrange(read.stream, moving, read.end, count=1)
            else:
                entries = await redis.xrange(read.stream, moving, read.end, count=1)
        except ResponseError:  # WRONGTYPE, an id Redis cannot parse: nothing to list
            return out
        if not entries:
            break
        entry_id, raw = entries[0]
        del entries
        fields, cuts = cut_fields(raw, limit)
        out.append(Excerpt(_str(entry_id), fields, cuts))
        moving = f"({_str(entry_id)}"
    return out


async def read_entry_excerpts(
    redis: Redis | RedisCluster, stream: str, entry_ids: list[str], limit: int = EXCERPT_BYTES
) -> dict[str, Excerpt]:
    """The named entries of one stream as excerpts, by id (missing ids left out)."""
    reads = [RangeRead(stream, eid, eid, 1, reverse=False) for eid in entry_ids]
    found = await read_excerpts(redis, reads, limit)
    return {e.entry_id: e for entries in found for e in entries}


# -- decoding a cut JSON object -------------------------------------------------------------

_DECODER = json.JSONDecoder()
_WS = " \t\n\r"


def partial_object(text: str) -> tuple[dict[str, Any], str | None, str]:
    """The members of a JSON object that lie wholly in ``text``, a prefix of it.

    Returns:
        ``(members, cut_key, cut_raw)``: the decoded members in order; the key whose
        value the prefix ends in (``None`` when none), and that value's raw text up to
        the cut. Never raises: text that is not an object's prefix gives ``({}, None, "")``.
    """
    members: dict[str, Any] = {}
    n = len(text)

    def skip(i: int) -> int:
        while i < n and text[i] in _WS:
            i += 1
        return i

    i = skip(0)
    if i >= n or text[i] != "{":
        return {}, None, ""
    i += 1
    try:
        while True:
            i = skip(i)
            if i >= n or text[i] == "}":
                return members, None, ""
            if text[i] != '"':
                return members, None, ""
            try:
                key, i = _DECODER.raw_decode(text, i)
            except (ValueError, RecursionError):
                return members, None, ""  # the cut falls in a key
            i = skip(i)
            if i >= n or text[i] != ":":
                return members, None, ""
            i = skip(i + 1)
            try:
                value, end = _DECODER.raw_decode(text, i)
            except (ValueError, RecursionError):
                return members, str(key), text[i:]
            if end >= n and isinstance(value, int | float) and not isinstance(value, bool):
                return members, str(key), text[i:]  # a number the cut may have shortened
            members[str(key)] = value
            i = end
            i = skip(i)
            if i < n and text[i] == ",":
                i += 1
            else:
                return members, None, ""
    except IndexError:  # pragma: no cover - every index above is checked
        return members, None, ""


def partial_string(raw: str) -> str:
    """The text of a cut JSON string (``"abc\\u00e9...``): decoded up to the cut."""
    if not raw.startswith('"'):
        return raw
    body = raw[1:]
    # An escape may be cut in its middle (``\\u00``): drop up to 6 characters until valid.
    for drop in range(7):
        candidate = body[: len(body) - drop] if drop else body
        try:
            value = json.loads(f'"{candidate}"')
        except ValueError:
            continue
        return value if isinstance(value, str) else raw
    return body


def prefix_value(text: str) -> Any:
    """What a cut JSON object's prefix holds, as JSON values: the members before the
    cut whole, the member the cut falls in as far as it goes (an object as its own
    prefix, a string as its text up to the cut, anything else as its raw text)."""
    members, key, raw = partial_object(text)
    if key is not None:
        rest = raw.lstrip(_WS)
        if rest.startswith("{"):
            members[key] = prefix_value(rest)
        elif rest.startswith('"'):
            members[key] = partial_string(rest)
        else:
            members[key] = rest
    return members


def excerpt_data(text: str) -> str:
    """A cut ``data`` field made valid JSON again (:func:`prefix_value`), so the readers
    of whole entries read an excerpt the same way; text that is no JSON object's prefix
    is returned as it is."""
    if not text.lstrip(_WS).startswith("{"):
        return text
    return json.dumps(prefix_value(text), ensure_ascii=False)
