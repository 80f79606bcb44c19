"""Property-based: arbitrary data in every key the fleet reader reads, in a real Redis.

Other runtimes, older versions or something hostile may have written anything: JSON of
any shape, bytes that are not UTF-8, a key of the wrong Redis type, huge values. Reading
the fleet, reading one worker's detail, rendering the table and dumping the JSON must
never raise, and every worker in the registry set must still be listed.

``tests/unit/test_models.py`` fuzzes the parsers on Python values; this goes through
Redis and the reader's own reply handling.
"""

from __future__ import annotations

import asyncio
import io
import json
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from redis.asyncio import Redis

from byconsole.headless.plain_table import emit, snapshot_view
from byconsole.headless.render_table import make_console, worker_detail_view
from worker_runtime.connection import create_redis
from worker_runtime.fleet import FleetReader
from worker_runtime.keys import Keys
from worker_runtime.models import now_ms
from worker_runtime.settings import RedisSettings

K = Keys()

HOSTILE = [
    "[bold red]x[/]",
    "[@click=app.quit]q[/]",
    "\x1b]52;c;cHduZWQ=\x07",
    "\x1b[2J",
    "\u202egnp.exe",
    "zero\u200bwidth",
    "\x9b31m",
    "\ud800",
]

scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=30)
    | st.sampled_from(HOSTILE)
)
json_values = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4)
    ),
    max_leaves=8,
)
FIELDS = [
    "worker_id", "workerId", "instance_id", "instanceId", "hostname", "ip_address", "ipAddress",
    "pid", "role", "agent_types", "agentTypes", "queues", "lifecycle", "status", "denied_types",
    "concurrency", "active_jobs", "activeJobCount", "processed", "failed", "started_at",
    "startedAt", "last_seen", "lastSeen", "app_version", "appVersion", "heartbeat_interval",
    "lease_ttl", "admin_applied_at", "reason", "updated_at", "updated_by", "replicas",
    "is_leader", "epoch", "modules", "ts", "operator", "action", "target", "token",
]  # fmt: skip
objects = st.dictionaries(st.sampled_from(FIELDS) | st.text(max_size=8), json_values, max_size=10)
# Sometimes a plausible lease, so values validate and the views have data to render.
plausible = st.fixed_dictionaries(
    {"last_seen": st.integers(now_ms() - 60_000, now_ms() + 1_000) | json_values},
    optional={f: json_values | st.sampled_from(HOSTILE) for f in FIELDS if f != "last_seen"},
)
# Huge values are drawn as short markers and expanded when written, so a failing
# example stays readable (and Hypothesis does not warn about its size).
HUGE = "<huge>"
LONG_ID = b"<long-id>"


def expand(value: bytes) -> bytes:
    """The bytes really written for a drawn value: markers become 100 kB / 10 kB."""
    if HUGE.encode() in value:
        return value.replace(HUGE.encode(), b"h" * 100_000)
    if value.startswith(LONG_ID):
        return value.replace(LONG_ID, b"w" * 10_000)
    return value


blobs = (
    objects.map(json.dumps)
    | plausible.map(lambda d: json.dumps(d, allow_nan=True))
    | json_values.map(lambda v: json.dumps(v, allow_nan=True))
    | st.text(max_size=40)
    | st.binary(max_size=40)
    | st.just(json.dumps({"hostname": HUGE, "agent_types": [HUGE, "t"], "last_seen": 1}))
    | st.just(HUGE)
)
SHAPES = ["string", "hash", "list", "set", "zset", "stream", "missing"]


@dataclass(frozen=True)
class Value:
    """What to write at one key: its Redis type and content."""

    shape: str
    items: tuple[bytes, ...]


def _bytes(value: str | bytes) -> bytes:
    return value if isinstance(value, bytes) else value.encode("utf-8", "surrogatepass")


values = st.builds(
    Value,
    st.sampled_from(SHAPES),
    st.lists(blobs.map(_bytes), min_size=1, max_size=4).map(tuple),
)
# Mostly the expected type, so deeper parsing is reached as often as type confusion.
string_values = st.one_of(
    blobs.map(lambda b: Value("string", (_bytes(b),))), values, st.just(Value("missing", ()))
)
hash_values = st.one_of(
    objects.map(
        lambda d: Value(
            "hash", tuple(_bytes(str(x)) for kv in d.items() for x in kv) or (b"a", b"b")
        )
    ),
    values,
)
set_values = st.one_of(
    st.lists(st.text(max_size=10) | st.sampled_from(HOSTILE), min_size=1, max_size=5).map(
        lambda m: Value("set", tuple(_bytes(x) for x in m))
    ),
    values,
)
ids = (
    st.text(min_size=1, max_size=20)
    | st.sampled_from(HOSTILE)
    | st.binary(min_size=1, max_size=12)
    | st.integers(0, 99).map(lambda n: LONG_ID + str(n).encode())
)


@dataclass(frozen=True)
class Fleet:
    """A registry set of worker ids and whatever lies in every other key."""

    workers: tuple[bytes, ...]
    per_worker: tuple[tuple[Value, Value, Value, Value], ...]
    types: tuple[str, ...]
    per_type: tuple[tuple[Value, Value, Value, Value, Value], ...]
    globals_: tuple[Value, ...]
    instances: tuple[tuple[bytes, Value], ...]


@st.composite
def fleets(draw: st.DrawFn) -> Fleet:
    workers = tuple(dict.fromkeys(_bytes(w) for w in draw(st.lists(ids, max_size=5))))
    per_worker = tuple(
        (draw(string_values), draw(hash_values), draw(set_values), draw(values)) for _ in workers
    )
    types = tuple(draw(st.lists(st.text(min_size=1, max_size=10), max_size=3, unique=True)))
    per_type = tuple(
        (draw(set_values), draw(set_values), draw(values), draw(values), draw(hash_values))
        for _ in types
    )
    globals_ = tuple(
        draw(v)
        for v in (set_values, values, string_values, string_values, hash_values, values, values)
    )
    # One lease per instance id: a second value of another Redis type under the same key
    # would fail the test's own write (WRONGTYPE), not the reader.
    instance_ids = dict.fromkeys(_bytes(draw(ids)) for _ in range(draw(st.integers(0, 3))))
    instances = tuple((iid, draw(string_values)) for iid in instance_ids)
    return Fleet(workers, per_worker, types, per_type, globals_, instances)


async def _write(raw: Redis, key: str | bytes, value: Value) -> None:
    items = tuple(expand(i) for i in value.items)
    if value.shape == "missing" or not items:
        return
    if value.shape == "string":
        await raw.set(key, items[0])
    elif value.shape == "hash":
        pairs = list(items) + ([b""] if len(items) % 2 else [])
        await raw.hset(key, mapping=dict(zip(pairs[::2], pairs[1::2], strict=True)))
    elif value.shape == "list":
        await raw.rpush(key, *items)
    elif value.shape == "set":
        await raw.sadd(key, *items)
    elif value.shape == "zset":
        await raw.zadd(key, {m: float(i) * 1e12 for i, m in enumerate(items)})
    else:
        for item in items:
            await raw.xadd(key, {b"data": item, item[:20] or b"k": b"kind"})


async def _populate(raw: Redis, fleet: Fleet) -> None:
    await raw.flushdb()
    if fleet.workers:
        await raw.sadd(K.workers, *map(expand, fleet.workers))
    for wid, (lease, admin, declared, stream) in zip(fleet.workers, fleet.per_worker, strict=True):
        name = expand(wid).decode("utf-8", "surrogateescape")
        # Keys are bytes in Redis: spell them from the raw id so bytes ids get their keys.
        await _write(raw, _raw_key(K.worker_online, name), lease)
        await _write(raw, _raw_key(K.worker_admin, name), admin)
        await _write(raw, _raw_key(K.worker_agent_types, name), declared)
        await _write(raw, _raw_key(K.worker_history_snapshots, name), stream)
        # The execution index the task plane reads, holding anything (a zset of ids too).
        await _write(raw, _raw_key(K.worker_executions, name), stream)
    if fleet.types:
        await raw.sadd(K.agent_types, *fleet.types)
    for t, (routable, denied, stream, dead, overrides) in zip(
        fleet.types, fleet.per_type, strict=True
    ):
        await _write(raw, K.type_workers(t), routable)
        await _write(raw, K.type_denied(t), denied)
        await _write(raw, K.type_stream(t), stream)
        await _write(raw, K.dead_letter_stream(t), dead)
        await _write(raw, K.scale_overrides(t), overrides)
    targets = (
        K.agent_types if not fleet.types else K.offline_since,
        K.instances,
        K.leader_lock,
        K.leader_epoch,
        K.scale_targets,
        K.metrics_history,
        K.audit_stream,
    )
    for key, value in zip(targets, fleet.globals_, strict=True):
        if not await raw.exists(key):
            await _write(raw, key, value)
    for iid, lease in fleet.instances:
        if await raw.type(K.instances) in (b"zset", b"none"):
            await raw.zadd(K.instances, {expand(iid): now_ms()})
        name = expand(iid).decode("utf-8", "surrogateescape")
        await _write(raw, _raw_key(K.instance_online, name), lease)


def _utf8(value: bytes) -> bool:
    try:
        value.decode()
    except UnicodeDecodeError:
        return False
    return True


def _raw_key(make: Any, name: str) -> bytes:
    return _bytes(make(name).encode("utf-8", "surrogateescape"))


@pytest.mark.slow
@settings(
    max_examples=60,
    deadline=None,
    database=None,
    # Each example is a whole fleet across many keys: large by design.
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
)
@given(fleet=fleets())
def test_any_data_reads_renders_and_lists_every_worker(redis_url: str, fleet: Fleet) -> None:
    asyncio.run(_check(redis_url, fleet))


async def _check(url: str, fleet: Fleet) -> None:
    raw = Redis.from_url(url)
    settings_ = RedisSettings(url=url)
    client = create_redis(settings_, retries=0)
    try:
        await _populate(raw, fleet)
        reader = FleetReader(client, K, endpoint=settings_.endpoint)
        snapshot = await reader.read()
        listed = {w.worker_id for w in snapshot.workers}
        # The reader's client decodes invalid UTF-8 with replacement characters.
        expected = {expand(w).decode("utf-8", "replace") for w in fleet.workers}
        assert listed == expected
        out = io.StringIO()
        console = make_console(out)
        emit(console, snapshot_view(snapshot))
        document = json.loads(json.dumps(snapshot.model_dump(mode="json")))
        assert {w["worker_id"] for w in document["workers"]} == expected
        # An id that is not valid UTF-8 is listed (with replacement characters) but
        # cannot be addressed by that text; every other id must be.
        addressable = [w.decode() for w in map(expand, fleet.workers) if _utf8(w)]
        for worker_id in sorted(addressable)[:3]:
            detail = await reader.read_worker_detail(worker_id)
            assert detail.known
            emit(console, worker_detail_view(detail, now_ms()))
        rendered = out.getvalue()
        assert "\x1b" not in rendered and "\x07" not in rendered and "\u202e" not in rendered
    finally:
        await raw.aclose()
        await client.aclose()
