"""``FleetReader``: one immutable :class:`FleetSnapshot` per refresh, in at most 3 round trips.

The console, ``byconsole --snapshot``, the admin CLI and any script read the fleet the
same way, so they agree on what "online", "pending" or a type's depth mean.

Round trips, whatever the fleet size (each one a non-transactional pipeline):

1. the indexes: workers set, agent types index, instances ZSet, leader lock and epoch,
   scale targets, the pause hash, the metrics history tail and the audit tail (on a single
   Redis also ``TIME`` and one run of the queue-health script, which caches it for round
   trip 2);
2. every lease (one MGET on a single Redis), per worker its admin hash and declared
   types; per type its routable set, denylist, queue health (one read-only script on
   the type stream: groups, lag, pending, oldest ages, deliveries, consumers), the
   dead-letter length and scale overrides; per instance its lease;
3. only when round trip 2 revealed types no index listed (declared by a worker or only
   in a lease): the per-type reads for those.

Types that only their streams name (tasks written by another producer, nobody serving)
come from :meth:`FleetReader.discover`, a ``SCAN`` that is not part of a refresh: the
first read of a reader waits for it, later ones use its cached result while the next
runs in the background at most every ``discover_every`` seconds.

The task plane rides in these: round trip 1 reads by-framework's control-plane streams,
round trip 2 the execution index (from the window's cursor, with the new snapshots, one
script per 1,000 workers) of each worker whose counts moved, round trip 3 the status-hash
counters of workers whose lease lacks them and, on a cluster or without ``EVAL_RO``, the
new snapshots (:mod:`worker_runtime.task_reads`; figures in :mod:`worker_runtime.health`).

This module makes the round trips and nothing else: replies are coerced by
:mod:`worker_runtime.replies` and turned into views by :mod:`worker_runtime.views`.
Connection problems raise :class:`redis.exceptions.RedisError` (the caller decides what
to show). Bad data never raises: every reply is checked for its shape, per-command
errors (``WRONGTYPE`` …) count as empty, payloads go through the lenient models.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import hashlib
import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster
from redis.exceptions import RedisError, ResponseError

from worker_runtime import task_reads
from worker_runtime.audit import parse_audit
from worker_runtime.byframework import RUNTIME_STATUS_FIELD
from worker_runtime.health import (
    ExecutionWindow,
    HealthPolicy,
    build_alerts,
    slo_view,
)
from worker_runtime.history import DEFAULT_RANGE, Tier, configured_tiers, range_ms, tier_for
from worker_runtime.keys import CONSUMER_GROUP, Keys, admin_worker_id, stream_agent_type
from worker_runtime.models import (
    SOURCE_OURS,
    AdminState,
    Alert,
    InstanceLease,
    Lease,
    Lifecycle,
    MetricsPoint,
    TierPoint,
    now_ms,
    parse_pauses,
)
from worker_runtime.packed_pipeline import PackedBatch, command_count, expand
from worker_runtime.packed_pipeline import execute as execute_packed
from worker_runtime.quota import parse_count_any
from worker_runtime.replies import (
    MAX_NAME,
    TypeReplies,
    count,
    counts,
    group_info,
    instance_scores,
    lease_value,
    mapping,
    pairs_to_dict,
    parse_workers,
    queue_health,
    queue_health_plain,
    sections,
    strs,
    text,
    time_ms,
)
from worker_runtime.snapshot import (
    MAX_WORKER_ID,
    ExecutionsView,
    FleetSnapshot,
    InstanceView,
    MetricsHistory,
    MetricsView,
    RedisInfo,
    SloView,
    TypeView,
    WorkerDetail,
    WorkerView,
)
from worker_runtime.views import (
    build_instances,
    build_worker_view,
    build_workers,
    denied_by_worker,
    execution_order,
    executions,
    fleet_metrics,
    leader_view,
    owned_by_worker,
    type_view,
    with_pauses,
)

# -- the reader ----------------------------------------------------------------------

_paused_reads = 0
_freeze_on_resume = False


@dataclass
class _Pause:
    freeze: bool = False  # set by a read whose result should be frozen (see freeze_from)


@contextlib.contextmanager
def _collector_paused() -> Iterator[_Pause]:
    """No cyclic garbage collection while a read builds its snapshot.

    A read allocates tens of objects per worker and frees none of them: on a large
    fleet the collector would run full passes over the whole heap mid-read, a large
    share of the read's CPU. It runs again once the last overlapping read is done; the
    reader itself creates no reference cycles. When a read asked for it
    (``pause.freeze``), everything alive then is frozen first (``gc.freeze``).
    """
    global _paused_reads, _freeze_on_resume
    pause = _Pause()
    if _paused_reads == 0 and not gc.isenabled():
        yield pause  # disabled by the application: leave it that way
        return
    _paused_reads += 1
    gc.disable()
    try:
        yield pause
    finally:
        _paused_reads -= 1
        _freeze_on_resume = _freeze_on_resume or pause.freeze
        if _paused_reads == 0:
            if _freeze_on_resume:
                gc.freeze()
                _freeze_on_resume = False
            gc.enable()


_TYPE_COMMANDS = {"sha": 5, "eval": 5, "plain": 10}
"""Commands per type in each way of reading its queue (see ``FleetReader._type_queue``)."""

# Every admin hash (first half of KEYS) and declared-type set (second half) in one
# reply; a key of the wrong type reads as empty instead of failing the whole script.
_ADMIN_AND_TYPES = """
local n = #KEYS / 2
local out = {}
for i = 1, n do
  local ok1, admin = pcall(redis.call, 'HGETALL', KEYS[i])
  local ok2, types = pcall(redis.call, 'SMEMBERS', KEYS[n + i])
  out[i] = {ok1 and admin or {}, ok2 and types or {}}
end
return out
"""


_SCRIPT_CHUNK = 1_000

# The remaining TTL of every lease in KEYS (one reply per chunk of workers).
_PTTLS = """
local out = {}
for i, key in ipairs(KEYS) do out[i] = redis.call('PTTL', key) end
return out
"""


# One type stream's task plane in one reply (parsed by ``replies.queue_health``): its
# length, per group (at most ARGV[2]) the name, pending, lag, the first entry after the
# group's last-delivered id, the longest idle time and highest delivery count over its
# ARGV[1] oldest pending entries, and its consumers' pending counts. With ARGV[3] = 1
# also the node's own clock (TIME; false when an ACL refuses it), for a cluster, whose
# pipelines cannot send TIME; a single Redis's read sends TIME once instead. Read-only,
# one key: it runs on a cluster node like any single-key command.
_QUEUE_HEALTH = """
local key = KEYS[1]
local now = false
if ARGV[3] == '1' then
  local ok, t = pcall(redis.call, 'TIME')
  if ok then now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) end
end
if redis.call('TYPE', key)['ok'] ~= 'stream' then return {0, now} end
local length = redis.call('XLEN', key)
local out = {1, now, length, false}
local groups = redis.call('XINFO', 'GROUPS', key)
if #groups == 0 and length > 0 then
  local head = redis.call('XRANGE', key, '-', '+', 'COUNT', 1)
  if #head > 0 then out[4] = head[1][1] end
end
for i, g in ipairs(groups) do
  if i > tonumber(ARGV[2]) then break end
  local f = {}
  for j = 1, #g, 2 do f[g[j]] = g[j + 1] end
  local name, pending, lag = f['name'], f['pending'], f['lag']
  if type(lag) ~= 'number' then lag = -1 end
  local after = redis.call('XRANGE', key, '(' .. f['last-delivered-id'], '+', 'COUNT', 1)
  local next_id = false
  if #after > 0 then next_id = after[1][1] end
  local idle, deliveries, consumers = -1, -1, {}
  if pending > 0 then
    consumers = redis.call('XPENDING', key, name)[4]
    for _, e in ipairs(redis.call('XPENDING', key, name, '-', '+', ARGV[1])) do
      if e[3] > idle then idle = e[3] end
      if e[4] > deliveries then deliveries = e[4] end
    end
  end
  local parked = 0
  -- keys.PARKED_ID: a group this runtime retired, which delivers nothing
  if f['last-delivered-id'] == '18446744073709551615-0' then parked = 1 end
  out[#out + 1] = {name, pending, lag, next_id, idle, deliveries, consumers, parked}
end
return out
"""
_QUEUE_HEALTH_SHA = hashlib.sha1(_QUEUE_HEALTH.encode()).hexdigest()

PENDING_SAMPLE = 100
"""Pending entries examined per group for the oldest idle time and the most deliveries.

The oldest ones by id: the entries redelivered again and again are those that stay
pending longest. Bounds the script's work whatever the pending list's length."""

GROUPS_EXAMINED = 16
"""Consumer groups of one stream examined (more than one is already an anomaly)."""

DISCOVERY_INTERVAL = 60.0
"""Seconds between two scans for streams no index lists (see :meth:`FleetReader.discover`)."""

INDEX_READS_PER_READ = 2_000
"""Execution indexes one refresh reads at most, besides those of workers it never read:
the execution window's share of a refresh stays bounded on a busy fleet (every worker
finishing tasks between two refreshes), where the rest wait for the next reads."""

DISCOVERY_SCAN_COUNT = 5_000
"""``SCAN … COUNT``: keys Redis looks at per discovery round trip (a few ms of its time)."""

MAX_DISCOVERED = 10_000
"""Types kept from one discovery (a keyspace of stray streams must not flood every view)."""

log = logging.getLogger(__name__)


_Cmd = tuple[str, tuple[Any, ...], dict[str, Any]]
_T = TypeVar("_T")
_ParsedWorkers = tuple[dict[str, Any], dict[str, AdminState], dict[str, set[str]], set[str]]


def _c(name: str, *args: Any, **kwargs: Any) -> _Cmd:
    """One queued pipeline command: method name, arguments, keyword arguments."""
    return (name, args, kwargs)


BUILD_OFF_LOOP_FROM = 200
"""Fleets at least this large are parsed and built in a thread (see :func:`_off_loop`).
The console's own thresholds, and how they relate to this one, are in
``byconsole.memory``."""


async def _off_loop(n: int, fn: Callable[..., _T], *args: Any) -> _T:
    """Run a CPU-bound build step of ``n`` workers in a thread when ``n`` is large.

    At 10,000 workers parsing the leases and building the views is hundreds of
    milliseconds of Python: on the event loop that is how long the console's keys would
    wait. In a thread the interpreter switches back to the loop every few milliseconds
    (``sys.getswitchinterval``), so keys and paints go on during a read. Small fleets
    skip the thread hand-off.
    """
    if n < BUILD_OFF_LOOP_FROM:
        return fn(*args)
    return await asyncio.to_thread(fn, *args)


@dataclass(frozen=True, slots=True)
class _Window:
    """Our tier's points a reader holds for its range (a refresh reads only what is new)."""

    tier: str
    points: list[MetricsPoint]


@dataclass(frozen=True, slots=True)
class _TierPlan:
    """What one read asks of our history: the range, its tier, the command."""

    history_range: str
    length: int
    tier: Tier
    command: _Cmd


def _members(reply: Any) -> list[str]:
    """The string members of a ZSet range reply (anything else: none)."""
    return [m for m in reply if isinstance(m, str)] if isinstance(reply, list) else []


def _build_after_dropping(replies: list[Any], *args: Any) -> list[WorkerView]:
    """:func:`build_workers` once ``replies`` (parsed, the last reference) is emptied."""
    replies.clear()
    return build_workers(*args)


def _newest_id(reply: Any) -> str | None:
    """The id ``XREVRANGE + - COUNT 1`` returned; "0-0" for an empty stream, None if unknown."""
    if not isinstance(reply, list):
        return None  # the read failed: nothing is known
    if not reply:
        return "0-0"
    head = reply[0]
    entry_id = head[0] if isinstance(head, list | tuple) and head else None
    return entry_id if isinstance(entry_id, str) else None


class FleetReader:
    """Reads the whole fleet into one :class:`FleetSnapshot` per call.

    Args:
        redis: a client from :func:`worker_runtime.connection.create_redis` (it decodes
            with ``errors="replace"``; a strict client would fail on invalid UTF-8).
        keys: the key factory of the deployment.
        endpoint: the endpoint as it may be shown (password masked).
        history_limit: how many shared metrics history points (the most recent) to read.
        history_range: the range of our own history each read carries
            (:data:`worker_runtime.history.RANGES`; :meth:`set_history_range` changes it);
            None: no tier is read (callers that show no history), the snapshot's history
            is our points of the shared tail.
        tiers: our history's tiers (default: :func:`~worker_runtime.history.configured_tiers`).
        events_limit: how many audit events (the most recent) to read.
        freeze_from: after a read of at least this many workers, every object alive
            (the new snapshot first of all) is moved out of the cyclic collector's way
            (``gc.freeze``) before it runs again. The first collections after a
            large read otherwise walk the whole snapshot, twice (the young
            generation, then the next), each holding the event loop
            (``git show baccccc:bench/read_stall.py``). Frozen objects are still freed by reference
            counting; only cyclic garbage alive at that moment stays until someone
            thaws (``gc.unfreeze``): for callers that do so now and then, like the
            console. ``None`` (the default) freezes nothing.
        discover_every: seconds between two discoveries of types that only have
            streams (:meth:`discover`); ``None`` turns discovery off.
        policy: alert thresholds and the execution window (by-framework's defaults).

    Attributes:
        round_trips: pipelined round trips of the last :meth:`read` (for benchmarks);
            a discovery's are not among them.
        discovery_round_trips: ``SCAN`` round trips of the last discovery.
        discoveries: discoveries run by this reader.
    """

    def __init__(
        self,
        redis: Redis | RedisCluster,
        keys: Keys,
        *,
        endpoint: str = "",
        history_limit: int = 120,
        events_limit: int = 100,
        freeze_from: int | None = None,
        history_range: str | None = DEFAULT_RANGE,
        tiers: Sequence[Tier] | None = None,
        discover_every: float | None = DISCOVERY_INTERVAL,
        policy: HealthPolicy | None = None,
        index_reads: int | None = INDEX_READS_PER_READ,
    ) -> None:
        self.redis = redis
        self.keys = keys
        self.endpoint = endpoint
        self.history_limit = max(1, history_limit)
        self.events_limit = max(1, events_limit)
        self.freeze_from = freeze_from
        self.round_trips = 0
        self.tiers = tuple(tiers) if tiers else configured_tiers()
        self.history_range: str | None = None
        self._window: _Window | None = None
        self.set_history_range(history_range)
        self._bulk_script: bool | None = None
        # The worker keys' commands of the last read, packed once, reused while the
        # registry (worker ids) and the read's shape (bulk or not) are unchanged.
        self._bulk_keys: tuple[list[str], bool, PackedBatch, PackedBatch] | None = None
        self.discover_every = discover_every
        self.discovery_round_trips = 0
        self.discoveries = 0
        # Types found from their streams by the last discovery (None: none ran yet),
        # when it finished (monotonic) and the one running in the background.
        self._stream_types: set[str] | None = None
        self._discovered_at = 0.0
        self._discovery: asyncio.Task[None] | None = None
        # On a cluster: may this client run scripts (probed by the first read), and may
        # they read the node's clock (False once an ACL refused TIME)?
        self._cluster_script: bool | None = None
        self._script_clock = True
        # On a single Redis: False once an ACL refused TIME (not asked again).
        self._time_allowed = True
        self.policy = policy or HealthPolicy()
        # The task plane's execution window, kept between reads (read incrementally).
        self.executions = ExecutionWindow(self.policy.window_ms)
        self._lease_holders: set[str] = set()
        # Per worker its (processed, failed) in the last snapshot, and when its execution
        # index was last read: an index is read again only when they moved.
        self._counters: dict[str, tuple[int | None, int | None]] = {}
        self._counted: dict[str, tuple[int | None, int | None] | None] = {}
        self._admin_ids: set[str] = set()
        """Workers with an admin hash the last discovery found (indexed or not)."""
        self._beats: dict[str, tuple[int | None, float, int]] = {}
        """Per by-framework lease: its ``last_seen``, when this reader first saw that
        beat (monotonic), and the most TTL ever seen left on it (see
        :meth:`_foreign_beats`)."""
        self._read_again: set[str] = set()
        self.index_reads = index_reads
        # When each worker's execution index was last read (a read counter), so a read
        # that must leave some for the next takes those waiting longest first.
        self._index_read_at: dict[str, int] = {}
        self._reads = 0
        self.deferred = 0
        """Workers whose new executions the last read left for the next (bounded work)."""

    async def _execute(self, queue: Sequence[_Cmd | PackedBatch]) -> list[Any]:
        """One pipelined round trip; per-command errors come back as exception objects.

        On a single Redis the commands are packed off the loop when many, and sent and
        read in short loop steps (:mod:`worker_runtime.packed_pipeline`); a cluster
        pipeline splits them per node itself.
        """
        self.round_trips += 1
        if isinstance(self.redis, RedisCluster):
            pipe = self.redis.pipeline(transaction=False)
            for name, args, kwargs in expand(queue):
                getattr(pipe, name)(*args, **kwargs)
            replies: list[Any] = await pipe.execute(raise_on_error=False)
            return replies
        return await execute_packed(self.redis, queue)

    async def _run(self, queue: Sequence[_Cmd | PackedBatch]) -> list[Any]:
        """One pipelined round trip; a failed command's reply is ``None``."""
        if not queue:
            return []
        return [None if isinstance(r, Exception) else r for r in await self._execute(queue)]

    async def _run_named(
        self, commands: Mapping[str, _Cmd]
    ) -> tuple[dict[str, Any], dict[str, Exception]]:
        """One round trip of named commands: replies by name, and the errors by name.

        A failed command's reply is ``None``, as with :meth:`_run`.
        """
        replies = await self._execute(list(commands.values()))
        named = dict(zip(commands, replies, strict=True))
        failed = {name: reply for name, reply in named.items() if isinstance(reply, Exception)}
        return {n: None if n in failed else r for n, r in named.items()}, failed

    def _worker_batches(
        self, worker_ids: Sequence[str], bulk: bool
    ) -> tuple[PackedBatch, PackedBatch]:
        """The worker keys' reads and their TTLs on a single Redis, cached per registry.

        The registry rarely changes between refreshes: the same worker ids give the same
        commands, so last read's batches (key names and packed bytes: 40,000 arguments at
        10,000 workers) are sent again as they are.
        """
        cached = self._bulk_keys
        if cached is not None and cached[1] == bulk and cached[0] == worker_ids:
            return cached[2], cached[3]
        workers = PackedBatch(self._worker_queue(worker_ids, False, bulk))
        ttls = PackedBatch(self._ttl_queue(worker_ids, bulk))
        self._bulk_keys = (list(worker_ids), bulk, workers, ttls)
        return workers, ttls

    def _worker_queue(self, worker_ids: Sequence[str], cluster: bool, bulk: bool) -> list[_Cmd]:
        k = self.keys
        if not worker_ids:
            return []
        queue: list[_Cmd] = []
        if bulk:
            queue.append(_c("mget", [k.worker_online(w) for w in worker_ids]))
            # Chunks keep each script short (its time grows with its workers) so Redis serves
            # the fleet's own commands in between instead of stalling for the read.
            for at in range(0, len(worker_ids), _SCRIPT_CHUNK):
                chunk = worker_ids[at : at + _SCRIPT_CHUNK]
                keys = [k.worker_admin(w) for w in chunk] + [k.worker_agent_types(w) for w in chunk]
                queue.append(_c("eval_ro", _ADMIN_AND_TYPES, len(keys), *keys))
            return queue
        if not cluster:
            queue.append(_c("mget", [k.worker_online(w) for w in worker_ids]))
        for wid in worker_ids:
            if cluster:
                queue.append(_c("get", k.worker_online(wid)))
            queue += [
                _c("hgetall", k.worker_admin(wid)),
                _c("smembers", k.worker_agent_types(wid)),
            ]
        return queue

    @staticmethod
    def _split_workers(
        replies: Sequence[Any], worker_ids: Sequence[str], cluster: bool, bulk: bool
    ) -> tuple[list[Any], list[Any], list[Any]]:
        """(raw leases, raw admin hashes, raw declared-type sets), one per worker."""
        n = len(worker_ids)
        if not n:
            return [], [], []
        if bulk:
            mget = replies[0]
            pairs: list[Any] = []
            for at, script in zip(range(0, n, _SCRIPT_CHUNK), replies[1:], strict=False):
                size = min(_SCRIPT_CHUNK, n - at)
                ok = isinstance(script, list) and len(script) == size
                pairs += script if ok else [None] * size
            admins = [pairs_to_dict(p[0]) if isinstance(p, list) and p else None for p in pairs]
            types = [p[1] if isinstance(p, list) and len(p) > 1 else None for p in pairs]
        elif cluster:
            mget = [replies[3 * i] for i in range(n)]
            admins = [replies[3 * i + 1] for i in range(n)]
            types = [replies[3 * i + 2] for i in range(n)]
        else:
            mget = replies[0]
            admins = [replies[1 + 2 * i] for i in range(n)]
            types = [replies[2 + 2 * i] for i in range(n)]
        leases = list(mget) if isinstance(mget, list) and len(mget) == n else [None] * n
        return leases, admins, types

    def _ttl_queue(self, worker_ids: Sequence[str], bulk: bool) -> list[_Cmd]:
        """The leases' remaining TTLs (status comes from them, not from clocks)."""
        k = self.keys
        if not bulk:
            return [_c("pttl", k.worker_online(w)) for w in worker_ids]
        return [
            _c("eval_ro", _PTTLS, len(chunk), *(k.worker_online(w) for w in chunk))
            for at in range(0, len(worker_ids), _SCRIPT_CHUNK)
            if (chunk := worker_ids[at : at + _SCRIPT_CHUNK])
        ]

    @staticmethod
    def _split_ttls(replies: Sequence[Any], n: int, bulk: bool) -> list[int | None]:
        flat: list[Any] = []
        if bulk:
            for at, reply in zip(range(0, n, _SCRIPT_CHUNK), replies, strict=False):
                size = min(_SCRIPT_CHUNK, n - at)
                flat += reply if isinstance(reply, list) and len(reply) == size else [None] * size
        else:
            flat = list(replies)
        flat += [None] * (n - len(flat))
        return [v if isinstance(v, int) and not isinstance(v, bool) else None for v in flat[:n]]

    def _type_queue(self, types: Iterable[str], mode: str) -> list[_Cmd]:
        """Per type: routing, denylist, its queue, dead letters and scale overrides.

        ``mode`` says how the type stream is read: ``"sha"`` (single Redis) and
        ``"eval"`` (cluster: redis-py's cluster pipeline refuses EVALSHA) run the
        queue-health script, one command on one key; ``"plain"`` (scripts refused)
        reads the groups, the length, and :data:`CONSUMER_GROUP`'s pending entries
        (every other group's follow, :meth:`_pending_of_every_group`).
        """
        k = self.keys
        queue: list[_Cmd] = []
        for t in types:
            stream = k.type_stream(t)
            queue += [_c("smembers", k.type_workers(t)), _c("smembers", k.type_denied(t))]
            if mode == "sha":
                queue.append(
                    _c("evalsha_ro", _QUEUE_HEALTH_SHA, 1, stream, *self._health_args(False))
                )
            elif mode == "eval":
                queue.append(_c("eval", _QUEUE_HEALTH, 1, stream, *self._health_args(True)))
            queue += [_c("xlen", k.dead_letter_stream(t)), _c("hgetall", k.scale_overrides(t))]
            if mode == "plain":
                queue += [
                    _c("xinfo_groups", stream),
                    _c("xlen", stream),
                    _c("xpending", stream, CONSUMER_GROUP),
                    _c("xpending_range", stream, CONSUMER_GROUP, "-", "+", PENDING_SAMPLE),
                    _c("xrange", stream, "-", "+", 1),
                    # The newest entry: a group that read it has nothing undelivered,
                    # whatever its lag says (see replies.group_info).
                    _c("xrevrange", stream, "+", "-", 1),
                ]
        return queue

    async def _pending_of_every_group(
        self,
        types: Sequence[str],
        replies: Sequence[Any],
        type_data: dict[str, TypeReplies],
        now: int | None,
    ) -> None:
        """Plain mode: the pending entries of every group, not only :data:`CONSUMER_GROUP`.

        The pipeline of :meth:`_type_queue` cannot name groups it has not read yet, so
        a stream whose ``XINFO GROUPS`` lists other groups (a by-framework runner's, one
        this runtime followed; README "How the runtime behaves", consumer groups) gets
        one more round trip: each group's ``XPENDING`` summary and sample, merged.
        Parked groups are read too: their pending entries still run.
        """
        size = _TYPE_COMMANDS["plain"]
        todo: list[tuple[str, Sequence[Any], list[str]]] = []
        for i, t in enumerate(types):
            r = replies[i * size : (i + 1) * size]
            groups = r[4] if isinstance(r[4], list) else []
            names = sorted(
                str(g["name"])
                for g in groups
                if isinstance(g, dict) and isinstance(g.get("name"), str)
            )[:GROUPS_EXAMINED]
            if names and names != [CONSUMER_GROUP]:
                todo.append((t, r, names))
        if not todo:
            return
        queue: list[_Cmd] = []
        for t, _, names in todo:
            stream = self.keys.type_stream(t)
            for name in names:
                queue += [
                    _c("xpending", stream, name),
                    _c("xpending_range", stream, name, "-", "+", PENDING_SAMPLE),
                ]
        found = iter(await self._run(queue))
        for t, r, names in todo:
            consumers: list[Any] = []
            entries: list[Any] = []
            for _ in names:
                summary, sample = next(found), next(found)
                if isinstance(summary, dict):
                    consumers += list(summary.get("consumers") or ())
                if isinstance(sample, list):
                    entries += sample
            type_data[t].queue = queue_health_plain(
                r[4], {"consumers": consumers}, entries, r[8], now
            )

    def _health_args(self, cluster: bool) -> tuple[int, int, int]:
        return (PENDING_SAMPLE, GROUPS_EXAMINED, int(cluster and self._script_clock))

    @staticmethod
    def _type_replies(
        types: Sequence[str], replies: Sequence[Any], mode: str, now: int | None = None
    ) -> dict[str, TypeReplies]:
        out: dict[str, TypeReplies] = {}
        size = _TYPE_COMMANDS[mode]
        for i, t in enumerate(types):
            r = replies[i * size : (i + 1) * size]
            if mode == "plain":
                length = count(r[5])
                group = group_info(r[4], length, _newest_id(r[9]))
                health = queue_health_plain(r[4], r[6], r[7], r[8], now)
                dead, overrides = r[2], r[3]
            else:
                group, length, health = queue_health(r[2], now)
                dead, overrides = r[3], r[4]
            out[t] = TypeReplies(
                routable=strs(r[0], MAX_WORKER_ID),
                denied=strs(r[1], MAX_WORKER_ID),
                group=group,
                length=length,
                dead=count(dead),
                overrides=counts(overrides),
                queue=health,
            )
        return out

    # -- discovery of types that only have streams -------------------------------------

    async def discover(self) -> set[str]:
        """Scan for type streams and dead-letter streams; cache and return their types.

        A type whose tasks are written by another producer (by-framework's) and served
        by no worker is in no index: only its stream says it exists. Scanning the
        keyspace costs one pass over every key (``SCAN … MATCH … TYPE stream``, every
        primary of a cluster, :data:`DISCOVERY_SCAN_COUNT` keys per round trip), so it
        is not part of a refresh: :meth:`read` runs it before its first snapshot, then
        in the background at most every ``discover_every`` seconds, and reads the
        types found with the indexed ones. A stream deleted since drops its type at
        the next read (nothing left to show) and from the next discovery.

        The result stays in this reader rather than being written to the types index
        (by a leader or janitor): the index means "declared by a worker or producer"
        (``registered``), and a name written there never goes away when its stream
        does; and a console must find the orphan backlog of a fleet that runs none of
        this project's runtimes at all.

        Returns:
            The types found (also what later reads use).
        Raises:
            redis.exceptions.RedisError: Redis is unreachable (a refused ``SCAN``, e.g.
                by an ACL, finds nothing instead).
        """
        found: set[str] = set()
        administered: set[str] = set()
        trips = 0
        try:
            for pattern, kind, into in (
                (self.keys.type_stream_pattern, "stream", found),
                (self.keys.dead_letter_stream_pattern, "stream", found),
                # Admin hashes by-framework's TypeScript and Java admins wrote: they keep
                # no admin-state index, and their evicted workers leave the registry.
                (self.keys.worker_admin_pattern, "hash", administered),
            ):
                if isinstance(self.redis, RedisCluster):
                    scan = self.redis.scan_iter(
                        match=pattern, count=DISCOVERY_SCAN_COUNT, _type=kind
                    )
                    trips += 1
                    async for key in scan:
                        into.add(str(key))
                    continue
                cursor: int = 0
                while True:
                    cursor, keys = await self.redis.scan(
                        cursor, match=pattern, count=DISCOVERY_SCAN_COUNT, _type=kind
                    )
                    trips += 1
                    into.update(str(key) for key in keys)
                    if not cursor or len(into) > 4 * MAX_DISCOVERED:
                        break
        except ResponseError as exc:
            log.debug("type discovery refused: %s", exc)
        ids = {w for key in administered if (w := admin_worker_id(self.keys, key)) is not None}
        self._admin_ids = set(sorted(w for w in ids if len(w) <= MAX_WORKER_ID)[:MAX_DISCOVERED])
        types = {t for key in found if (t := stream_agent_type(self.keys, key)) is not None}
        kept = set(sorted(t for t in types if len(t) <= MAX_NAME)[:MAX_DISCOVERED])
        self._stream_types = kept
        self._discovered_at = time.monotonic()
        self.discovery_round_trips = trips
        self.discoveries += 1
        return set(kept)

    async def _discover_quietly(self) -> None:
        try:
            await self.discover()
        except (RedisError, OSError) as exc:
            # The next refresh shows the outage; this retries at the next interval.
            self._discovered_at = time.monotonic()
            log.debug("type discovery failed: %s", exc)

    async def _stream_only_types(self) -> set[str]:
        """The discovered types for this read: waits only for the very first discovery."""
        if self.discover_every is None:
            return set()
        if self._stream_types is None:
            await self.discover()
        elif time.monotonic() - self._discovered_at >= self.discover_every and (
            self._discovery is None or self._discovery.done()
        ):
            self._discovery = asyncio.create_task(self._discover_quietly())
        return set(self._stream_types or ())

    async def read(self) -> FleetSnapshot:
        """Read the fleet.

        Raises:
            redis.exceptions.RedisError: Redis is unreachable or refused the connection.
        """
        with _collector_paused() as pause:
            snapshot = await self._read()
            pause.freeze = (
                self.freeze_from is not None and len(snapshot.workers) >= self.freeze_from
            )
            return snapshot

    async def _read(self) -> FleetSnapshot:
        started = time.perf_counter()
        self.round_trips = 0
        now = now_ms()
        k = self.keys

        # Types only their streams name, as the last discovery found them (the first
        # read of this reader waits for one; later ones run in the background).
        stream_types = await self._stream_only_types()

        # -- round trip 1: the indexes ---------------------------------------------
        cluster = isinstance(self.redis, RedisCluster)
        # Fixed now: the range may change (set_history_range) while this read runs.
        plan = self._tier_plan(now)
        probe = not cluster and self._bulk_script is None
        # Every read runs the queue-health script once on a key that never exists: that
        # caches it (EVAL_RO, which a viewer ACL allows where SCRIPT LOAD is not), so a
        # restarted or flushed Redis has it again at once and round trip 2 sends its
        # hash only.
        load = not cluster and self._bulk_script is not False
        clock = not cluster and self._time_allowed
        r1, failed1 = await self._run_named(
            {
                "workers": _c("smembers", k.workers),
                "types": _c("smembers", k.agent_types),
                "instances": _c("zrange", k.instances, 0, -1, withscores=True),
                "leader_lock": _c("get", k.leader_lock),
                "leader_epoch": _c("get", k.leader_epoch),
                "targets": _c("hgetall", k.scale_targets),
                "history": _c("zrange", k.metrics_history, -self.history_limit, -1),
                **({"tier": plan.command} if plan else {}),
                "events": _c("xrevrange", k.audit_stream, "+", "-", self.events_limit),
                # by-framework's admin-state index: a suspended or evicted worker that
                # left the registry (by-framework's do on exit) is still listed.
                "administered": _c("smembers", k.admin_workers),
                # Paused types (``type pause``): one HGETALL of one hash.
                "pauses": _c("hgetall", k.type_pauses),
                # Once per reader: may this client run read-only scripts (EVAL_RO is
                # Redis 7+, and an ACL viewer may lack @scripting)?
                **({"script_probe": _c("eval_ro", "return 1", 0)} if probe else {}),
                **(
                    {"health_script": _c("eval_ro", _QUEUE_HEALTH, 1, k.type_stream(""), 0, 0, 0)}
                    if load
                    else {}
                ),
                **(
                    {"cluster_probe": _c("eval", "return 1", 0)}
                    if cluster and self._cluster_script is None
                    else {}
                ),
                # Redis's clock: the ages of entries are measured against it.
                **({"redis_time": _c("time")} if clock else {}),
                **task_reads.control_plane_queue(k),
            }
        )
        if probe:
            self._bulk_script = "script_probe" not in failed1
        if cluster:
            if self._cluster_script is None:
                self._cluster_script = "cluster_probe" not in failed1
            mode = "eval" if self._cluster_script else "plain"
        else:
            scripted = load and self._bulk_script and "health_script" not in failed1
            mode = "sha" if scripted else "plain"
        if clock and "redis_time" in failed1:
            self._time_allowed = False  # an ACL without +time: ages stay unknown
        redis_now = time_ms(r1.get("redis_time")) if clock else None
        # An index key of another Redis type reads as empty, like any bad reply; it is
        # named so a front end can say the fleet it shows may be missing (a "0 workers"
        # that is really an unreadable registry).
        index_keys = {
            "workers": k.workers,
            "types": k.agent_types,
            "instances": k.instances,
            "leader_lock": k.leader_lock,
            "leader_epoch": k.leader_epoch,
            "targets": k.scale_targets,
            "history": k.metrics_history,
            "events": k.audit_stream,
            "administered": k.admin_workers,
            "pauses": k.type_pauses,
        }
        wrong_type = sorted(
            key
            for name, key in index_keys.items()
            if name in failed1 and str(failed1[name]).startswith("WRONGTYPE")
        )

        def indexes() -> tuple[list[str], list[MetricsPoint], list[Any]]:
            # Worker ids get a larger bound than other names: a worker in the registry
            # is listed, whatever its id (the 1 KiB bound would hide a 10 kB id).
            ids = strs(r1["workers"], MAX_WORKER_ID) | strs(r1["administered"], MAX_WORKER_ID)
            ids |= self._admin_ids  # admin hashes no index lists (see discover)
            history = r1["history"] or []
            points = [MetricsPoint.parse(m) for m in history if isinstance(m, str)]
            return sorted(ids), points, parse_audit(r1["events"])

        # Sorting 10,000 ids and parsing the history and audit tails: off the loop.
        registry = r1["workers"] if isinstance(r1["workers"], set | list) else ()
        worker_ids, history, events = await _off_loop(len(registry), indexes)
        indexed_types = strs(r1["types"])
        scores = instance_scores(r1["instances"])
        leader = leader_view(r1["leader_lock"], r1["leader_epoch"])
        targets = counts(r1["targets"])

        # -- round trip 2: per worker, per known type, per instance --------------------
        known_types = sorted(indexed_types | set(targets) | stream_types)
        # On a single Redis every lease comes back in one MGET and every admin hash and
        # declared-type set in one read-only script reply: per-command overhead in the
        # client, not Redis, is what dominates a 10,000-worker read. A cluster (keys in
        # many slots) or a server refusing EVAL_RO gets one command per key instead.
        bulk = bool(worker_ids) and not cluster and bool(self._bulk_script)
        queue: list[_Cmd | PackedBatch] = []
        ttl_queue: list[_Cmd | PackedBatch] = []
        if cluster:
            queue += self._worker_queue(worker_ids, cluster, bulk)
            ttl_queue += self._ttl_queue(worker_ids, bulk)
        elif worker_ids:
            workers_batch, ttl_batch = self._worker_batches(worker_ids, bulk)
            queue.append(workers_batch)
            ttl_queue.append(ttl_batch)
        type_queue = self._type_queue(known_types, mode)
        instance_ids = sorted(scores)
        instance_queue = [_c("get", k.instance_online(i)) for i in instance_ids]
        exec_read = self._execution_read(worker_ids, bulk)
        exec_queue: list[_Cmd | PackedBatch] = []
        exec_queue += task_reads.execution_queue(self.executions, k, exec_read, now)
        parts = {
            "workers": command_count(queue),
            "types": len(type_queue),
            "instances": len(instance_queue),
            "ttls": command_count(ttl_queue),
            "executions": len(exec_queue),
        }
        r2 = await self._run(queue + type_queue + instance_queue + ttl_queue + exec_queue)

        def parse(
            r2: list[Any],
        ) -> tuple[
            list[int | None],
            _ParsedWorkers,
            dict[str, TypeReplies],
            dict[str, InstanceLease | None],
            list[str],
        ]:
            task_reads.take_executions(self.executions, exec_read, part_exec(r2), now)
            # Every pass over the workers (splitting the replies, parsing them, finding
            # those round trip 3 must count) and every pydantic parse: in the thread.
            part = sections(r2, parts)
            ttls = self._split_ttls(part["ttls"], len(worker_ids), bulk)
            parsed = parse_workers(
                worker_ids, *self._split_workers(part["workers"], worker_ids, cluster, bulk)
            )
            type_data = self._type_replies(known_types, part["types"], mode, redis_now)
            instance_leases: dict[str, InstanceLease | None] = {}
            for iid, reply in zip(instance_ids, part["instances"], strict=True):
                raw = text(reply)
                instance_leases[iid] = None if raw is None else InstanceLease.parse(raw)
            leases = parsed[0]
            counted = [
                wid
                for wid in worker_ids
                if isinstance(leases[wid], Lease) and leases[wid].active_jobs is None
            ]
            return ttls, parsed, type_data, instance_leases, counted

        def part_exec(r2: list[Any]) -> Sequence[Any]:
            return sections(r2, parts)["executions"]

        ttls, parsed, type_data, instance_leases, counted = await _off_loop(
            len(worker_ids), parse, r2
        )
        if mode == "plain":
            await self._pending_of_every_group(
                known_types, sections(r2, parts)["types"], type_data, redis_now
            )
        leases, admins, declared, discovered = parsed
        # A worker listed only because discovery found its admin hash, whose hash is
        # gone since (cleared, forgotten) and which holds no lease: nothing to show.
        vanished: set[str] = set()
        if self._admin_ids:
            indexed = strs(r1["workers"], MAX_WORKER_ID) | strs(r1["administered"], MAX_WORKER_ID)
            for wid in self._admin_ids - indexed:
                admin = admins.get(wid)
                empty = admin is not None and not admin.lifecycle and not admin.updated_at
                if empty and leases.get(wid) is None:
                    vanished.add(wid)
            self._admin_ids -= vanished

        # -- round trip 3: types only a worker knew about, and the active jobs of
        # workers whose lease does not report them (by-framework keeps them in its
        # status hash) -----------------------------------------------------------------
        extra_types = sorted(t for t in discovered - set(type_data) if len(t) <= MAX_NAME)
        snap_queue = task_reads.snapshot_queue(k, exec_read)
        if extra_types or counted or snap_queue:
            extra_queue = self._type_queue(extra_types, mode)
            count_queue = [
                _c("hmget", k.worker_status(w), list(task_reads.STATUS_COUNTERS)) for w in counted
            ]
            r3 = sections(
                await self._run(extra_queue + count_queue + snap_queue),
                {"types": len(extra_queue), "counts": len(count_queue), "snaps": len(snap_queue)},
            )
            type_data.update(self._type_replies(extra_types, r3["types"], mode, redis_now))
            if mode == "plain":
                await self._pending_of_every_group(extra_types, r3["types"], type_data, redis_now)
            for wid, raw in zip(counted, r3["counts"], strict=True):
                leases[wid] = _with_status_counters(leases[wid], raw)
            task_reads.take_snapshots(self.executions, exec_read, r3["snaps"], now)
        for wid in counted:
            if leases[wid].active_jobs is None:
                # No status hash either (the TypeScript and Java SDKs write none): its
                # running tasks are the entries pending under its name, as every SDK
                # reads with the worker id as its consumer name.
                leases[wid] = _with_pending_jobs(leases[wid], wid, declared[wid], type_data)
        hints = self._foreign_beats(worker_ids, leases, ttls)

        # -- views -----------------------------------------------------------------------
        # Every reply is parsed: the build's thread drops them (~1.3 KB a worker) before
        # it builds the views, so the two never take memory at once.
        replies: list[Any] = [r2]
        del r2
        workers = await _off_loop(
            len(worker_ids),
            _build_after_dropping,
            replies,
            worker_ids,
            leases,
            admins,
            declared,
            denied_by_worker(type_data),
            now,
            ttls,
            hints,
            owned_by_worker(type_data),
        )
        # The parsed leases are about ten objects per worker: freeing them when this
        # method returns would hold the loop. The thread below drops the last
        # references instead.
        if vanished:
            workers = [w for w in workers if w.worker_id not in vanished]
        scrap: list[Any] = [parsed, leases, admins, declared, ttls]
        del parsed, leases, admins, declared, ttls
        registered = indexed_types | set(targets) | discovered
        if mode == "eval" and self._script_clock:
            # The scripts could not read the node's clock: stop asking (ACL noise).
            self._script_clock = not any(
                td.queue.exists and not td.queue.clock for td in type_data.values()
            )
        for t in stream_types - registered:
            td = type_data.get(t)
            if td is not None and not td.queue.exists and not td.dead and not td.routable:
                # Its streams are gone: so is the type (now, not at the next discovery).
                del type_data[t]
                if self._stream_types is not None:
                    self._stream_types.discard(t)
        types = [
            type_view(t, td, targets.get(t), registered=t in registered)
            for t, td in sorted(type_data.items())
        ]
        types = with_pauses(types, parse_pauses(r1["pauses"]), workers)

        # A range's first read parses up to ~1,000 tier points: off the loop then.
        tier_reply = r1.get("tier")
        series, foreign, from_tier = await _off_loop(
            len(tier_reply) if isinstance(tier_reply, list) else 0,
            self._series,
            plan,
            tier_reply,
            history,
            now,
        )

        def grouped() -> tuple[list[InstanceView], MetricsView]:
            scrap.clear()
            instances = build_instances(scores, instance_leases, workers, types, leader)
            metrics = fleet_metrics(workers, types, series).model_copy(
                update={
                    "history_range": plan.history_range if plan else DEFAULT_RANGE,
                    "tier": plan.tier.name if plan and from_tier else None,
                    "foreign": foreign,
                }
            )
            return instances, metrics

        # Grouping 10,000 workers by instance is tens of ms of Python: off the loop too,
        # with the metrics (another pass over the workers).
        instances, metrics = await _off_loop(len(workers), grouped)
        executions, slo, alerts = self._task_health(r1, workers, types, now)
        redis_info = RedisInfo(
            endpoint=self.endpoint,
            connected=True,
            schema_version=k.schema,
            cluster=isinstance(self.redis, RedisCluster),
            read_ms=round((time.perf_counter() - started) * 1000, 2),
            round_trips=self.round_trips,
            wrong_type=wrong_type,
        )
        return FleetSnapshot(
            generated_at=now,
            redis=redis_info,
            workers=workers,
            instances=instances,
            types=types,
            metrics=metrics,
            leader=leader,
            events=events,
            alerts=alerts,
            executions=executions,
            slo=slo,
        )

    def _foreign_beats(
        self, worker_ids: Sequence[str], leases: Mapping[str, Any], ttls: Sequence[int | None]
    ) -> dict[str, tuple[int | None, int | None]]:
        """What this reader saw of each by-framework lease over its reads, clock-free.

        A by-framework lease does not state its TTL (:func:`verdicts.foreign_lease_ttl`
        infers it from what is left) and its ``last_seen`` is its host's clock, so the
        reader keeps, by its own monotonic clock, since when it has seen the same beat,
        and the most TTL it ever saw left (a Python lease renewed to 30 s is told from a
        TypeScript or Java one renewed to 15 s even after it stopped beating).

        Returns:
            worker id -> (most TTL seen left in ms, ms since this beat was first seen
            when seen before), for by-framework leases past their first beat.
        """
        mono = time.monotonic()
        beats = self._beats
        out: dict[str, tuple[int | None, int | None]] = {}
        for i, wid in enumerate(worker_ids):
            lease = leases[wid]
            foreign = isinstance(lease, Lease) and lease.presence_version is not None
            if not foreign or lease.lease_ttl or not lease.last_seen:
                beats.pop(wid, None)  # ours, gone, or a new claim (a new worker)
                continue
            raw_ttl = ttls[i]
            ttl = raw_ttl if raw_ttl is not None and raw_ttl > 0 else 0
            seen = beats.get(wid)
            if seen is None or seen[0] != lease.last_seen:
                most = max(ttl, seen[2] if seen else 0)
                beats[wid] = (lease.last_seen, mono, most)
                out[wid] = (most or None, None)
            else:
                most = max(ttl, seen[2])
                beats[wid] = (seen[0], seen[1], most)
                out[wid] = (most or None, int((mono - seen[1]) * 1000))
        if len(beats) > len(out):
            for gone in [w for w in beats if w not in out]:
                del beats[gone]
        return out

    def _execution_read(self, worker_ids: Sequence[str], bulk: bool) -> task_reads.ExecutionRead:
        """Whose execution index this read asks for.

        A worker the window has not read yet; one whose processed / failed counts (its
        lease, or a by-framework worker's status hash) moved since its index was last
        read, and once more after that (a count can be published a moment before the
        execution it counts is indexed); one that holds a lease without counts. An idle
        worker costs nothing; a cancelled execution, which moves no count, is read with
        the worker's next count change.
        """
        window = self.executions
        again = self._read_again
        self._reads += 1
        due: list[str] = []  # read now whatever the bound: the window never read them
        moved: list[str] = []
        fresh: set[str] = set()  # counts moved since the last read of the index
        for w in worker_ids:
            now_counts = self._counters.get(w)
            if not window.known(w):
                self._counted[w] = now_counts
                again.add(w)
                due.append(w)
            elif now_counts != self._counted.get(w):
                self._counted[w] = now_counts
                again.add(w)
                fresh.add(w)
                moved.append(w)
            elif (now_counts is None and w in self._lease_holders) or w in again:
                # A lease without counts (nothing tells when it ran something), or a
                # worker to read once more after its counts moved.
                moved.append(w)
        if self.index_reads is not None and len(moved) > self.index_reads:
            # A busy fleet: the ones waiting longest now, the rest at the next reads. A
            # worker's cursor keeps its place, so a later read takes every execution
            # since: the figures trail by a read or a few, nothing is lost or counted
            # twice (docs: the README's "Task health").
            moved.sort(key=lambda w: self._index_read_at.get(w, 0))
            self.deferred = len(moved) - self.index_reads
            moved = moved[: self.index_reads]
        else:
            self.deferred = 0
        for w in moved:
            if w not in fresh:
                again.discard(w)  # the read once more (or a deferred first read)
        ids = due + moved
        for w in ids:
            self._index_read_at[w] = self._reads
        window.forget_workers(worker_ids)
        listed = set(worker_ids)
        for gone in [w for w in self._counted if w not in listed]:
            del self._counted[gone]
            again.discard(gone)
            self._index_read_at.pop(gone, None)
        return task_reads.ExecutionRead(ids, bulk)

    def _task_health(
        self,
        r1: dict[str, Any],
        workers: Sequence[WorkerView],
        types: Sequence[TypeView],
        now: int,
    ) -> tuple[ExecutionsView, SloView, list[Alert]]:
        """The window's figures, the SLO block and the alerts of this read."""
        self._lease_holders = {w.worker_id for w in workers if w.runtime is not None}
        self._counters = {
            w.worker_id: (w.processed, w.failed)
            for w in workers
            if w.processed is not None or w.failed is not None
        }
        fleet, by_type = self.executions.figures(now)
        executions = ExecutionsView(
            **fleet.model_dump(), by_type=by_type, deferred_workers=self.deferred
        )
        control = task_reads.control_plane(r1, self.keys)
        slo = slo_view(fleet, types, control, workers, now, self.policy)
        return executions, slo, build_alerts(workers, types, fleet, slo, control, self.policy)

    async def read_worker_detail(self, worker_id: str, limit: int = 20) -> WorkerDetail:
        """One worker in depth: full lease, admin state, running and recent executions.

        Two round trips: the worker's own keys, then the denylists of its types.

        Args:
            worker_id: the worker.
            limit: how many recent executions to return.

        Raises:
            redis.exceptions.RedisError: Redis is unreachable.
        """
        self.round_trips = 0
        now = now_ms()
        k = self.keys
        limit = max(1, limit)
        r1, _ = await self._run_named(
            {
                "registered": _c("sismember", k.workers, worker_id),
                "lease": _c("get", k.worker_online(worker_id)),
                "admin": _c("hgetall", k.worker_admin(worker_id)),
                "declared": _c("smembers", k.worker_agent_types(worker_id)),
                "status": _c("hgetall", k.worker_status(worker_id)),
                "recent": _c("zrevrange", k.worker_executions(worker_id), 0, limit - 1),
                "active": _c("zrevrange", k.worker_active_executions(worker_id), 0, limit - 1),
                "active_snapshots": _c("hgetall", k.worker_active_snapshots(worker_id)),
                "history_snapshots": _c("hgetall", k.worker_history_snapshots(worker_id)),
                "types": _c("smembers", k.agent_types),
                "administered": _c("sismember", k.admin_workers, worker_id),
                "ttl": _c("pttl", k.worker_online(worker_id)),
            }
        )
        raw_lease = text(r1["lease"])
        lease_obj = lease_value(raw_lease)
        admin = AdminState.parse(mapping(r1["admin"]))
        declared = strs(r1["declared"])
        lease_types: set[str] = set()
        if isinstance(lease_obj, dict):
            lease_types = set(Lease.parse(lease_obj).agent_types)
        known_types = declared | lease_types | strs(r1["types"])
        types = sorted(t for t in known_types if len(t) <= MAX_NAME)
        r2 = await self._run([_c("sismember", k.type_denied(t), worker_id) for t in types])
        denied = [t for t, hit in zip(types, r2, strict=True) if hit]

        status_hash = mapping(r1["status"])
        view_lease = lease_obj
        if isinstance(lease_obj, dict) and Lease.parse(lease_obj).active_jobs is None:
            # A by-framework worker: its active jobs are the status hash's counter.
            counter = parse_count_any(status_hash.get("active_count"))
            if counter is None:
                # No status hash either (TypeScript, Java): its entries pending under
                # its name, as the fleet read counts them.
                counter = await self._pending_of(worker_id, types)
            view_lease = {**lease_obj, "active_jobs": counter}
        ttl = r1["ttl"] if isinstance(r1["ttl"], int) else None
        owned = 0
        if raw_lease is None and admin.known_lifecycle is Lifecycle.EVICTED:
            # An eviction is applied once the worker owns no pending entry either.
            owned = await self._pending_of(worker_id, types)
        view = build_worker_view(
            worker_id, view_lease, admin, declared, denied, now, ttl, owned=owned
        )
        active_snaps = mapping(r1["active_snapshots"])
        history_snaps = mapping(r1["history_snapshots"])
        active = executions(execution_order(r1["active"], active_snaps), active_snaps, limit)
        recent = executions(execution_order(r1["recent"], history_snaps), history_snaps, limit)
        return WorkerDetail(
            worker_id=worker_id,
            # An admin hash alone makes it known: by-framework's TypeScript and Java admins
            # index none, and their evicted workers leave the registry.
            known=bool(r1["registered"])
            or raw_lease is not None
            or bool(r1["administered"])
            or bool(admin.lifecycle or admin.updated_at),
            worker=view,
            lease=lease_obj if isinstance(lease_obj, dict) else None,
            lease_raw=raw_lease
            if raw_lease is not None and not isinstance(lease_obj, dict)
            else None,
            admin=admin,
            runtime_status=text(status_hash.get(RUNTIME_STATUS_FIELD)),
            declared_types=sorted(declared),
            denied_types=denied,
            active_executions=active,
            recent_executions=recent,
        )

    async def _pending_of(self, worker_id: str, types: Sequence[str]) -> int:
        """Entries pending under consumer ``worker_id`` on its types' streams, any group."""
        if not types:
            return 0
        replies = await self._run([_c("xinfo_groups", self.keys.type_stream(t)) for t in types])
        pairs = [
            (t, str(g["name"]))
            for t, groups in zip(types, replies, strict=True)
            if isinstance(groups, list)
            for g in groups[:GROUPS_EXAMINED]
            if isinstance(g, dict) and g.get("name") is not None and g.get("pending")
        ]
        if not pairs:
            return 0
        summaries = await self._run(
            [_c("xpending", self.keys.type_stream(t), group) for t, group in pairs]
        )
        running = 0
        for summary in summaries:
            for consumer in (summary.get("consumers") or ()) if isinstance(summary, dict) else ():
                if isinstance(consumer, dict) and consumer.get("name") == worker_id:
                    running += parse_count_any(consumer.get("pending")) or 0
        return running

    async def read_metrics_history(
        self, limit: int | None = None, *, history_range: str | None = None
    ) -> MetricsHistory:
        """Our history over a range, and the other collectors' points apart (one round trip).

        Args:
            limit: at most this many points of each (the newest); None: the range's.
            history_range: a name of :data:`worker_runtime.history.RANGES`; None: this
                reader's range.

        Returns:
            Our points from the tier that covers the range (or, before any tier was
            written, our points of the shared history), and the shared history's points
            of other writers (by-framework's depth is XLEN), both oldest first.

        Raises:
            ValueError: an unknown range name.
        """
        name = history_range or self.history_range or DEFAULT_RANGE
        length = range_ms(name)
        tier = tier_for(length, self.tiers)
        now = now_ms()
        bound = length // tier.step_ms + 2
        r1 = await self._run(
            [
                _c("zrange", self.keys.metrics_history, -self.history_limit, -1),
                _c(
                    "zrangebyscore", self.keys.metrics_tier(tier.name),
                    now - length - tier.step_ms, "+inf", start=0, num=bound,
                ),
            ]
        )  # fmt: skip
        shared = [MetricsPoint.parse(m) for m in r1[0] or [] if isinstance(m, str)]
        ours = [TierPoint.parse(m).to_point() for m in _members(r1[1])]
        foreign = [p for p in shared if p.source != SOURCE_OURS]
        from_tier = bool(ours)
        if not ours:
            ours = [p for p in shared if p.source == SOURCE_OURS and p.ts >= now - length]
        keep = bound if limit is None else max(1, limit)
        return MetricsHistory(
            history_range=name,
            tier=tier.name if from_tier else None,
            step_ms=tier.step_ms if from_tier else None,
            points=ours[-keep:],
            foreign=foreign[-keep:],
        )

    def set_history_range(self, name: str | None) -> None:
        """The range the next reads carry (its first read fetches it whole, later ones
        only the buckets since; None: none); ValueError for an unknown name."""
        if name is not None:
            range_ms(name)
        if name != self.history_range:
            self._window = None
        self.history_range = name

    def _tier_plan(self, now: int) -> _TierPlan | None:
        """Round trip 1's read of our tier (None: no range): the whole range once, then
        only the newest bucket (which may have grown) and those after it."""
        if self.history_range is None:
            return None
        length = range_ms(self.history_range)
        tier = tier_for(length, self.tiers)
        window = self._window
        whole = window is None or window.tier != tier.name or not window.points
        since = now - length - tier.step_ms if whole or window is None else window.points[-1].ts
        key = self.keys.metrics_tier(tier.name)
        command = _c("zrangebyscore", key, since, "+inf", start=0, num=length // tier.step_ms + 2)
        return _TierPlan(self.history_range, length, tier, command)

    def _series(
        self, plan: _TierPlan | None, reply: Any, shared: list[MetricsPoint], now: int
    ) -> tuple[list[MetricsPoint], list[MetricsPoint], bool]:
        """Our series for the planned range (the held window updated by ``reply``), the
        shared history's points of other writers, and whether the series is a tier's."""
        foreign = [p for p in shared if p.source != SOURCE_OURS]
        ours_shared = [p for p in shared if p.source == SOURCE_OURS]
        if plan is None:
            return ours_shared, foreign, False
        fresh = [TierPoint.parse(m).to_point() for m in _members(reply)]
        window = self._window
        held = window.points if window is not None and window.tier == plan.tier.name else []
        first_new = fresh[0].ts if fresh else None
        kept = [p for p in held if first_new is None or p.ts < first_new]
        cutoff = now - plan.length - plan.tier.step_ms
        points = [p for p in kept + fresh if p.ts >= cutoff]
        # A range changed during this read is read whole by the next one.
        same = self.history_range == plan.history_range
        self._window = _Window(plan.tier.name, points) if same else None
        if points:
            return points, foreign, True
        # No tier yet (a leader of an older version, or none): our points of the shared
        # history, the same definition.
        return [p for p in ours_shared if p.ts >= now - plan.length], foreign, False

    async def read_observability(
        self, snapshot: FleetSnapshot, recent: int = 20
    ) -> task_reads.Observability:
        """What by-framework's observability snapshot adds to a fleet read, for
        ``metrics snapshot``: per worker holding a lease its status-hash counters and its
        ``recent`` newest execution snapshots; per type and control-plane stream its
        consumer groups. Two round trips (not part of the console's refresh).

        Raises:
            redis.exceptions.RedisError: Redis is unreachable.
        """
        k = self.keys
        holders = sorted(w.worker_id for w in snapshot.workers if w.runtime is not None)
        streams = {t.name: k.type_stream(t.name) for t in snapshot.types}
        queue = task_reads.observability_queue(k, holders, streams, recent)
        r1 = await self._run(queue)
        obs = task_reads.take_observability(holders, streams, k, r1)
        r2 = await self._run(task_reads.recent_snapshot_queue(k, obs))
        task_reads.take_recent_snapshots(obs, r2)
        return obs


def _with_pending_jobs(
    lease: Lease, worker_id: str, declared: Iterable[str], type_data: Mapping[str, TypeReplies]
) -> Lease:
    """A lease without active jobs and without a status hash: its pending entries.

    The queue-health read counts each type stream's pending entries per consumer name
    (over every group); by-framework's workers consume with their worker id.
    """
    types = set(lease.agent_types) | set(declared)
    running = 0
    for t in types:
        td = type_data.get(t)
        if td is not None:
            running += td.queue.consumers.get(worker_id, 0)
    return lease.model_copy(update={"active_jobs": running})


def _with_status_counters(lease: Lease, raw: Any) -> Lease:
    """A lease lacking active jobs, processed or failed counts, filled from its worker's
    status hash (by-framework keeps them there: ``active_count``, ``completed_count``,
    ``failed_count``); the lease's own values win."""
    fields = task_reads.status_counters(raw)
    update: dict[str, int] = {}
    for name, field in (
        ("active_jobs", "active_count"),
        ("processed", "completed_count"),
        ("failed", "failed_count"),
    ):
        value = parse_count_any(fields.get(field))
        if getattr(lease, name) is None and value is not None:
            update[name] = value
    return lease.model_copy(update=update) if update else lease
