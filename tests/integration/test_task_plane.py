"""The task plane of the fleet read: types found from their streams, and each queue's health.

Real ``redis-server`` (and a real cluster through ``backend``): entries are written with
explicit ids so their ages are known, pending entries are made by a consumer that reads
and never acknowledges, and ``XCLAIM`` redelivers (``IDLE`` sets how long ago).
"""

from __future__ import annotations

from typing import Any

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster

from tests.backends import Backend
from tests.reliability.acl import PASSWORDS, setuser_args
from worker_runtime.connection import create_redis
from worker_runtime.fleet import FleetReader
from worker_runtime.keys import CONSUMER_GROUP, Keys
from worker_runtime.producer import Producer
from worker_runtime.settings import RedisSettings
from worker_runtime.snapshot import FleetSnapshot, TypeView

K = Keys()


async def _read_one(redis: Redis | RedisCluster, stream: str, consumer: str) -> str:
    """One entry read by ``consumer`` of :data:`CONSUMER_GROUP` (left pending): its id."""
    got: Any = await redis.xreadgroup(CONSUMER_GROUP, consumer, {stream: ">"}, count=1)
    return str(got[0][1][0][0])


def _type(snap: FleetSnapshot, name: str) -> TypeView:
    found = [t for t in snap.types if t.name == name]
    assert found, f"{name} not in {[t.name for t in snap.types]}"
    return found[0]


async def _backlog(redis: Redis | RedisCluster, key: str, n: int, age_ms: int) -> None:
    """``n`` entries, the first ``age_ms`` old by its id (Redis's clock)."""
    sec, usec = await redis.time()
    start = sec * 1000 + usec // 1000 - age_ms
    pipe = redis.pipeline(transaction=False)
    for i in range(n):
        pipe.xadd(key, {"n": str(i)}, id=f"{start + i}-0")
    await pipe.execute()


async def test_an_orphan_backlog_is_a_type(backend: Backend) -> None:
    redis, k = backend.redis, backend.keys
    # Nobody registered it: no index, no worker, no group; only its stream.
    await _backlog(redis, k.type_stream("orphan"), 50, age_ms=120_000)
    await redis.sadd(k.agent_types, "chat")
    snap = await FleetReader(redis, k).read()
    orphan = _type(snap, "orphan")
    assert (orphan.registered, orphan.undelivered, orphan.depth, orphan.pending) == (
        False,
        50,
        50,
        0,
    )
    assert orphan.groups == [] and orphan.workers == []
    assert orphan.oldest_undelivered_ms is not None
    assert 120_000 <= orphan.oldest_undelivered_ms < 180_000
    assert orphan.oldest_pending_ms is None and orphan.max_deliveries is None
    assert _type(snap, "chat").registered is True
    assert snap.metrics.queue_depth == 50


async def test_a_stuck_pending_entry_shows_its_idle_time_and_deliveries(backend: Backend) -> None:
    redis, k = backend.redis, backend.keys
    stream = k.type_stream("chat")
    await redis.sadd(k.agent_types, "chat")
    await _backlog(redis, stream, 3, age_ms=60_000)
    await redis.xgroup_create(stream, CONSUMER_GROUP, id="0")
    entry_id = await _read_one(redis, stream, "c1")
    # Redelivered to c2 (delivery 2), as if it had been idle for 90 s; never acked.
    await redis.xclaim(stream, CONSUMER_GROUP, "c2", 0, [entry_id], idle=90_000)
    snap = await FleetReader(redis, k).read()
    chat = _type(snap, "chat")
    assert (chat.pending, chat.undelivered, chat.max_deliveries) == (1, 2, 2)
    assert chat.oldest_pending_ms is not None and 90_000 <= chat.oldest_pending_ms < 150_000
    assert chat.consumers == {"c2": 1}
    assert chat.groups == [CONSUMER_GROUP]
    # The oldest undelivered entry is the second one written (~60 s old).
    assert chat.oldest_undelivered_ms is not None
    assert 59_000 <= chat.oldest_undelivered_ms < 120_000


async def test_two_groups_on_one_stream_show_both(backend: Backend) -> None:
    redis, k = backend.redis, backend.keys
    stream = k.type_stream("chat")
    await redis.sadd(k.agent_types, "chat")
    await _backlog(redis, stream, 4, age_ms=30_000)
    await redis.xgroup_create(stream, CONSUMER_GROUP, id="0")
    await redis.xgroup_create(stream, "by_framework_other", id="0")
    # Our group read (and acked) everything: only the other group still has work.
    await redis.xreadgroup(CONSUMER_GROUP, "c1", {stream: ">"}, count=10)
    pending = await redis.xpending_range(stream, CONSUMER_GROUP, "-", "+", 10)
    await redis.xack(stream, CONSUMER_GROUP, *[p["message_id"] for p in pending])
    await redis.xreadgroup("by_framework_other", "c9", {stream: ">"}, count=1)
    chat = _type(await FleetReader(redis, k).read(), "chat")
    assert chat.groups == sorted([CONSUMER_GROUP, "by_framework_other"])
    assert (chat.undelivered, chat.pending) == (3, 1)
    assert chat.consumers == {"c9": 1}
    assert chat.oldest_undelivered_ms is not None and chat.oldest_undelivered_ms >= 29_000


async def test_everything_delivered_means_nothing_undelivered(backend: Backend) -> None:
    redis, k = backend.redis, backend.keys
    stream = k.type_stream("chat")
    await redis.sadd(k.agent_types, "chat")
    await _backlog(redis, stream, 2, age_ms=10_000)
    await redis.xgroup_create(stream, CONSUMER_GROUP, id="0")
    await redis.xreadgroup(CONSUMER_GROUP, "c1", {stream: ">"}, count=10)
    chat = _type(await FleetReader(redis, k).read(), "chat")
    assert (chat.undelivered, chat.pending, chat.oldest_undelivered_ms) == (0, 2, None)
    assert chat.max_deliveries == 1


async def test_discovery_finds_a_dead_letter_only_type_and_drops_it_when_gone(
    backend: Backend,
) -> None:
    redis, k = backend.redis, backend.keys
    await redis.xadd(k.dead_letter_stream("ghost"), {"reason": "poison"})
    reader = FleetReader(redis, k)
    ghost = _type(await reader.read(), "ghost")
    assert (ghost.registered, ghost.dead, ghost.depth) == (False, 1, 0)
    await redis.delete(k.dead_letter_stream("ghost"))
    snap = await reader.read()  # no discovery ran since: the read itself drops it
    assert "ghost" not in [t.name for t in snap.types]
    assert reader.discoveries == 1


async def test_discovery_does_not_run_every_refresh(redis: Redis) -> None:
    await _backlog(redis, K.type_stream("orphan"), 5, age_ms=1_000)
    await redis.config_resetstat()
    reader = FleetReader(redis, K, discover_every=3600)
    for _ in range(5):
        snap = await reader.read()
        assert _type(snap, "orphan").undelivered == 5
        assert snap.redis.round_trips <= 3
    stats = await redis.info("commandstats")
    # Three patterns (type streams, dead letters, admin hashes: an admin that keeps no
    # index is found by its hashes), one SCAN each on this small keyspace, once: for the
    # first read only.
    assert stats["cmdstat_scan"]["calls"] == 3
    assert reader.discoveries == 1 and reader.discovery_round_trips == 3


async def test_discovery_runs_again_in_the_background(redis: Redis) -> None:
    reader = FleetReader(redis, K, discover_every=0)
    assert [t.name for t in (await reader.read()).types] == []
    await _backlog(redis, K.type_stream("late"), 1, age_ms=0)
    await reader.read()  # starts a discovery in the background; this read does not wait
    assert reader._discovery is not None
    await reader._discovery
    assert "late" in [t.name for t in (await reader.read()).types]
    assert reader.discoveries >= 2


async def test_discovery_off_reads_indexed_types_only(redis: Redis) -> None:
    await _backlog(redis, K.type_stream("orphan"), 5, age_ms=1_000)
    snap = await FleetReader(redis, K, discover_every=None).read()
    assert snap.types == []


async def test_plain_commands_where_scripts_are_refused(redis: Redis) -> None:
    stream = K.type_stream("chat")
    await redis.sadd(K.agent_types, "chat")
    await _backlog(redis, K.type_stream("orphan"), 3, age_ms=50_000)
    await _backlog(redis, stream, 3, age_ms=10_000)
    await redis.xgroup_create(stream, CONSUMER_GROUP, id="0")
    entry_id = await _read_one(redis, stream, "c1")
    await redis.xclaim(stream, CONSUMER_GROUP, "c1", 0, [entry_id], idle=20_000)
    reader = FleetReader(redis, K)
    reader._bulk_script = False  # as the first read's probe finds under an ACL without @scripting
    snap = await reader.read()
    chat, orphan = _type(snap, "chat"), _type(snap, "orphan")
    assert (chat.undelivered, chat.pending, chat.max_deliveries) == (2, 1, 2)
    assert chat.oldest_pending_ms is not None and chat.oldest_pending_ms >= 20_000
    assert chat.consumers == {"c1": 1} and chat.groups == [CONSUMER_GROUP]
    assert chat.oldest_undelivered_ms is None  # unknown without the script
    assert orphan.oldest_undelivered_ms is not None and orphan.oldest_undelivered_ms >= 50_000
    assert snap.redis.round_trips <= 3


async def test_an_index_named_type_without_streams_stays(redis: Redis) -> None:
    await redis.sadd(K.agent_types, "idle")
    snap = await FleetReader(redis, K).read()
    idle = _type(snap, "idle")
    assert (idle.registered, idle.depth, idle.groups, idle.oldest_undelivered_ms) == (
        True,
        0,
        [],
        None,
    )


async def test_a_producer_names_its_type_in_the_index(backend: Backend) -> None:
    redis, k = backend.redis, backend.keys
    producer = Producer(redis, k)
    await producer.submit("nobody-serves", {"n": 1})
    await producer.submit_many("batch", [{"n": 1}, {"n": 2}])
    assert await redis.smembers(k.agent_types) == {"nobody-serves", "batch"}
    snap = await FleetReader(redis, k, discover_every=None).read()
    assert _type(snap, "nobody-serves").registered and _type(snap, "nobody-serves").depth == 1
    assert _type(snap, "batch").depth == 2


async def test_a_viewer_acl_reads_the_queue_health_and_asks_for_time_once(
    redis: Redis, redis_url: str
) -> None:
    # The README's viewer (no +time, no SCRIPT LOAD): scripts run, ages need a clock.
    await _backlog(redis, K.type_stream("orphan"), 4, age_ms=30_000)
    stream = K.type_stream("chat")
    await redis.sadd(K.agent_types, "chat")
    await _backlog(redis, stream, 2, age_ms=30_000)
    await redis.xgroup_create(stream, CONSUMER_GROUP, id="0")
    await redis.xclaim(stream, CONSUMER_GROUP, "c1", 0, [await _read_one(redis, stream, "c1")])
    admin: Any = redis  # ACL commands are untyped in redis-py
    await admin.execute_command("ACL", "SETUSER", *setuser_args("viewer"))
    host_port = redis_url.split("//", 1)[1].split("/", 1)[0]
    settings = RedisSettings(url=f"redis://viewer:{PASSWORDS['viewer']}@{host_port}/0")
    viewer = create_redis(settings)
    try:
        await admin.execute_command("ACL", "LOG", "RESET")
        reader = FleetReader(viewer, K)
        for _ in range(3):
            snap = await reader.read()
        orphan, chat = _type(snap, "orphan"), _type(snap, "chat")
        assert (orphan.undelivered, orphan.registered, orphan.oldest_undelivered_ms) == (
            4,
            False,
            None,
        )
        assert (chat.pending, chat.max_deliveries, chat.consumers) == (1, 2, {"c1": 1})
        assert chat.oldest_pending_ms is not None  # XPENDING's idle time needs no clock
        denied = await admin.execute_command("ACL", "LOG")
        assert len(denied) == 1  # TIME, refused once: the reader stops asking
        await admin.execute_command("ACL", "SETUSER", "viewer", "+time")
        aged = _type(await FleetReader(viewer, K).read(), "orphan")
        assert aged.oldest_undelivered_ms is not None and aged.oldest_undelivered_ms >= 30_000
    finally:
        await viewer.aclose()
        await admin.execute_command("ACL", "DELUSER", "viewer")


async def test_discovery_scans_every_primary(backend: Backend) -> None:
    redis, k = backend.redis, backend.keys
    names = [f"orphan-{i:02d}" for i in range(24)]  # spread over the cluster's slots
    for name in names:
        await redis.xadd(k.type_stream(name), {"n": "1"})
    await redis.xadd(k.dead_letter_stream("buried"), {"n": "1"})
    reader = FleetReader(redis, k)
    assert await reader.discover() == {*names, "buried"}
    snap = await reader.read()
    assert {t.name for t in snap.types if not t.registered} == {*names, "buried"}


async def test_a_wrong_lag_does_not_make_delivered_entries_undelivered(backend: Backend) -> None:
    # What Redis 7.0 can report after an AOF restore: a group that has read everything
    # with a lag (entries-read behind). Here entries-read is set back by hand.
    redis, k = backend.redis, backend.keys
    stream = k.type_stream("chat")
    await redis.sadd(k.agent_types, "chat")
    await _backlog(redis, stream, 6, age_ms=5_000)
    await redis.xgroup_create(stream, CONSUMER_GROUP, id="$")
    await redis.xgroup_setid(stream, CONSUMER_GROUP, "$", entries_read=1)
    groups: Any = await redis.xinfo_groups(stream)
    assert groups[0]["lag"] == 5  # what Redis says
    chat = _type(await FleetReader(redis, k).read(), "chat")
    assert (chat.undelivered, chat.depth, chat.oldest_undelivered_ms) == (0, 0, None)
