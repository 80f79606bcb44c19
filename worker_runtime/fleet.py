"""``FleetReader``: one immutable :class:`FleetSnapshot` per refresh, in at most 3 round trips.

The console, ``byconsole --snapshot``, the admin CLI and any script read the fleet the
same way, so they agree on what "online", "pending" or a type's depth mean.

Round trips, whatever the fleet size (each one a non-transactional pipeline):

1. the indexes: workers set, agent types index, instances ZSet, leader lock and epoch,
   scale targets, the metrics history tail and the audit tail;
2. every lease (one MGET on a single Redis), per worker its admin hash and declared
   types; per type its routable set, denylist, consumer group info, length,
   dead-letter length and scale overrides; per instance its lease;
3. only when round trip 2 revealed types no index listed (declared by a worker or only
   in a lease): the per-type reads for those.

Connection problems raise :class:`redis.exceptions.RedisError` (the caller decides what
to show). Bad data never raises: every reply is checked for its shape, per-command
errors (``WRONGTYPE`` …) count as empty, payloads go through the lenient models.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import ValidationError
from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster

from worker_runtime.audit import parse_audit
from worker_runtime.byframework import RUNTIME_STATUS_FIELD
from worker_runtime.derive import derive_status as derive_status
from worker_runtime.derive import is_applied, lifecycle_action
from worker_runtime.keys import Keys
from worker_runtime.models import (
    AdminState,
    Capability,
    Execution,
    InstanceLease,
    Lease,
    Lifecycle,
    MetricsPoint,
    Status,
    now_ms,
)
from worker_runtime.quota import compute_quota, parse_count, parse_count_any
from worker_runtime.snapshot import (
    APPLIED_FADE_MS,
    MAX_WORKER_ID,
    CommandState,
    FleetSnapshot,
    InstanceView,
    LeaderView,
    MetricsView,
    RedisInfo,
    TypeView,
    WorkerDetail,
    WorkerView,
    queue_depth,
)

_MAX_ID = 1024  # ids longer than this are not ours to track (and would bloat every view)


# -- reply shape helpers: anything unexpected is "empty" ------------------------------


def _strs(reply: Any, limit: int = _MAX_ID) -> set[str]:
    if isinstance(reply, set | list | tuple | frozenset):
        return {str(m) for m in reply if isinstance(m, str | bytes) and len(m) <= limit}
    return set()


def _str(reply: Any) -> str | None:
    if isinstance(reply, bytes):
        return reply.decode("utf-8", "replace")
    return reply if isinstance(reply, str) else None


def _dict(reply: Any) -> dict[str, Any]:
    if isinstance(reply, dict):
        return {str(k): v for k, v in reply.items()}
    return {}


def _int(reply: Any) -> int:
    if isinstance(reply, int) and not isinstance(reply, bool):
        return max(0, reply)
    return 0


def _json(raw: str | None) -> Any:
    if raw is None:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return None


def _lease_obj(raw: str | None) -> Any:
    """``None`` when there is no lease, the decoded JSON, or the raw text when not JSON."""
    if raw is None:
        return None
    try:
        decoded = json.loads(raw)
    except ValueError:
        return raw
    # A lease of JSON ``null`` is malformed, not absent.
    return raw if decoded is None else decoded


def _counts(reply: Any) -> dict[str, int]:
    return {
        k: c
        for k, v in _dict(reply).items()
        if len(k) <= _MAX_ID and (c := parse_count(v)) is not None
    }


@dataclass
class _GroupInfo:
    depth: int | None = None
    pending: int = 0
    exists: bool = False


def _undelivered(td: _TypeReplies) -> int:
    """Entries no group has been delivered yet (summed lag; see :func:`_group_info`)."""
    if td.group.depth is not None:
        return td.group.depth
    return max(0, td.length - td.group.pending)


def _group_info(reply: Any, length: int = 0) -> _GroupInfo:
    """Lag and pending over every consumer group of a stream (``XINFO GROUPS`` reply).

    Workers of a type may consume in any group name (ours, by-framework's
    ``agent_engines``, its per-type-set names): every group gets every entry, so the
    work outstanding is the sum over the groups. A group whose lag Redis cannot tell
    (entries deleted) counts the stream ``length`` minus its pending (an upper bound).
    """
    if not isinstance(reply, list):
        return _GroupInfo()
    info = _GroupInfo()
    for group in reply:
        if not isinstance(group, dict):
            continue
        lag = group.get("lag")
        pending = _int(group.get("pending"))
        depth = _int(lag) if isinstance(lag, int) else max(0, length - pending)
        info = _GroupInfo(
            depth=(info.depth or 0) + depth,
            pending=info.pending + pending,
            exists=True,
        )
    return info


# -- derivations shared by the snapshot and the detail read ---------------------------


def derive_command_state(
    admin: AdminState, lease: Lease | None, status: Status, now: int | None = None
) -> CommandState | None:
    """Whether the worker has confirmed the operator's latest admin state.

    ``None`` when there is no admin state. An eviction is pending while a lease still
    exists (the worker deletes it when it complies). Anything else is pending while the
    worker holds a lease whose ``admin_applied_at`` is older than the admin
    ``updated_at``. An offline worker has applied nothing: it applies the state when it
    starts (``on start``), except an eviction, which its missing lease fulfils. A
    worker that never confirms (by-framework) is ``sent`` while an eviction waits for
    its exit and ``unconfirmable`` otherwise, never pending. Given ``now``,
    ``applied`` fades to ``None`` :data:`APPLIED_FADE_MS` after the command.
    """
    if admin.updated_at is None and admin.lifecycle is None:
        return None
    evicted = admin.known_lifecycle is Lifecycle.EVICTED
    if lease is None or status is Status.OFFLINE:
        state = CommandState.APPLIED if evicted else CommandState.ON_START
    elif not lease.supports(Capability.CONFIRM):
        return CommandState.SENT if evicted else CommandState.UNCONFIRMABLE
    elif not is_applied(lifecycle_action(admin.known_lifecycle), admin.updated_at or 0, lease):
        return CommandState.PENDING
    else:
        state = CommandState.APPLIED
    if (
        state is CommandState.APPLIED
        and now is not None
        and (admin.updated_at is None or now - admin.updated_at > APPLIED_FADE_MS)
    ):
        return None
    return state


def build_worker_view(
    worker_id: str,
    lease_obj: Any,
    admin: AdminState,
    declared: Iterable[str],
    denied: Iterable[str],
    now: int,
    ttl_ms: int | None = None,
) -> WorkerView:
    """The operator's view of one worker from its raw parts.

    Args:
        worker_id: the registry id (the lease's own ``worker_id`` is not trusted).
        lease_obj: the online key: ``None`` when absent, a :class:`Lease` or a dict
            when valid, anything else when malformed (the worker is then ``stale``).
        admin: the parsed admin hash.
        declared: the worker's declared agent types (its ``agent_types`` set).
        denied: the types whose denylist names this worker.
        now: the reference time (ms) for ages.
        ttl_ms: the lease key's remaining TTL (``PTTL``), when read.
    """
    lease: Lease | None
    valid = True
    if lease_obj is None or isinstance(lease_obj, Lease):
        lease = lease_obj
    else:
        valid = isinstance(lease_obj, dict)
        lease = Lease.parse(lease_obj if valid else {})
    # A malformed lease says nothing trustworthy: stale, whatever its TTL.
    status = derive_status(lease, now, ttl_ms) if valid else Status.STALE
    # Every value below is already validated (lease, admin) or derived here, so the
    # view is built without a second validation pass: this runs 10,000 times a refresh.
    # A copy of the validated fields (a dict copy, ~10x cheaper than getattr per field).
    data: dict[str, Any] = dict(lease.__dict__) if lease is not None else {}
    applied = data.pop("lifecycle", None)
    runtime_status = data.pop("status", None)
    types = list(dict.fromkeys(data.get("agent_types") or []))
    extra = set(declared).difference(types)
    if extra:
        types += sorted(extra)
    data.update(
        worker_id=worker_id,
        agent_types=types,
        denied_types=sorted(set(denied)),
        status=status,
        lifecycle=admin.lifecycle or applied or Lifecycle.ACTIVE.value,
        applied_lifecycle=applied,
        reason=admin.reason or None,
        lifecycle_reason=admin.reason or "",
        runtime_status=runtime_status,
        admin_updated_at=admin.updated_at,
        admin_updated_by=admin.updated_by,
        command_state=derive_command_state(admin, lease, status, now),
        runtime=_runtime_of(lease),
        lease_age_ms=(now - lease.last_seen) if lease and lease.last_seen is not None else None,
        lease_valid=valid,
    )
    # model_validate runs in pydantic-core: about 3x faster than model_construct here.
    return WorkerView.model_validate(data)


def _runtime_of(lease: Lease | None) -> str | None:
    if lease is None:
        return None
    return "by-framework" if lease.is_by_framework else "worker_runtime"


def parse_lease(raw: str | None) -> Lease | str | list[Any] | Any:
    """The online key's value: ``None``, a :class:`Lease`, or the malformed value itself.

    The well-formed case is validated straight from JSON (fast); anything else falls
    back to the lenient per-field parse.
    """
    if raw is None:
        return None
    try:
        return Lease.model_validate_json(raw)
    except ValidationError:
        obj = _lease_obj(raw)
        return Lease.parse(obj) if isinstance(obj, dict) else obj


_NO_ADMIN = AdminState()


def _admin(reply: Any) -> AdminState:
    # Most workers have no admin hash: skip the parse for the empty reply.
    return AdminState.parse(_dict(reply)) if reply else _NO_ADMIN


def _leader(lock_raw: Any, epoch_raw: Any) -> LeaderView:
    lock = _json(_str(lock_raw))
    instance_id: str | None = None
    epoch = parse_count_any(epoch_raw)
    if isinstance(lock, dict):
        value = lock.get("instance_id", lock.get("instanceId"))
        if isinstance(value, str) and len(value) <= _MAX_ID:
            instance_id = value
        lock_epoch = parse_count_any(lock.get("epoch"))
        epoch = lock_epoch if lock_epoch is not None else epoch
    return LeaderView(instance_id=instance_id, epoch=epoch)


# -- the reader ----------------------------------------------------------------------

_paused_reads = 0


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """No cyclic garbage collection while a read builds its snapshot.

    A read allocates tens of objects per worker and frees none of them: at 10,000
    workers the collector ran full passes over the whole heap mid-read, about 40% of
    the read's CPU (``bench/profiles.py``). It runs again once the last overlapping
    read is done; the reader itself creates no reference cycles.
    """
    global _paused_reads
    if _paused_reads == 0 and not gc.isenabled():
        yield  # disabled by the application: leave it that way
        return
    _paused_reads += 1
    gc.disable()
    try:
        yield
    finally:
        _paused_reads -= 1
        if _paused_reads == 0:
            gc.enable()


@dataclass
class _TypeReplies:
    routable: set[str] = field(default_factory=set)
    denied: set[str] = field(default_factory=set)
    group: _GroupInfo = field(default_factory=_GroupInfo)
    length: int = 0
    dead: int = 0
    overrides: dict[str, int] = field(default_factory=dict)


_TYPE_COMMANDS = 6

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


def _pairs_to_dict(flat: Any) -> dict[str, Any] | None:
    """A Lua HGETALL reply (flat field/value list) as a dict."""
    if not isinstance(flat, list):
        return None
    return {str(flat[i]): flat[i + 1] for i in range(0, len(flat) - 1, 2)}


_Cmd = tuple[str, tuple[Any, ...], dict[str, Any]]
_T = TypeVar("_T")


def _c(name: str, *args: Any, **kwargs: Any) -> _Cmd:
    """One queued pipeline command: method name, arguments, keyword arguments."""
    return (name, args, kwargs)


_OFF_LOOP_MIN = 200
"""Fleets at least this large are parsed and built in a thread (see :func:`_off_loop`)."""


async def _off_loop(n: int, fn: Callable[..., _T], *args: Any) -> _T:
    """Run a CPU-bound build step of ``n`` workers in a thread when ``n`` is large.

    At 10,000 workers parsing the leases and building the views is hundreds of
    milliseconds of Python: on the event loop that is how long the console's keys would
    wait. In a thread the interpreter switches back to the loop every few milliseconds
    (``sys.getswitchinterval``), so keys and paints go on during a read. Small fleets
    skip the thread hand-off.
    """
    if n < _OFF_LOOP_MIN:
        return fn(*args)
    return await asyncio.to_thread(fn, *args)


def _parse_workers(
    worker_ids: Sequence[str],
    raw_leases: Sequence[Any],
    raw_admins: Sequence[Any],
    raw_types: Sequence[Any],
) -> tuple[dict[str, Any], dict[str, AdminState], dict[str, set[str]], set[str]]:
    """Per worker its parsed lease, admin state and declared types; every type seen."""
    leases: dict[str, Any] = {}
    admins: dict[str, AdminState] = {}
    declared: dict[str, set[str]] = {}
    discovered: set[str] = set()
    for i, wid in enumerate(worker_ids):
        lease = parse_lease(_str(raw_leases[i]))
        leases[wid] = lease
        admins[wid] = _admin(raw_admins[i])
        declared[wid] = _strs(raw_types[i])
        discovered |= declared[wid]
        if isinstance(lease, Lease):
            discovered.update(lease.agent_types)
    return leases, admins, declared, discovered


def _build_workers(
    worker_ids: Sequence[str],
    leases: Mapping[str, Any],
    admins: Mapping[str, AdminState],
    declared: Mapping[str, set[str]],
    denied_by_worker: Mapping[str, set[str]],
    now: int,
    ttls: Sequence[int | None],
) -> list[WorkerView]:
    """Every worker's view, in ``worker_ids`` order (``ttls``: the leases' PTTLs)."""
    return [
        build_worker_view(
            wid,
            leases[wid],
            admins[wid],
            declared[wid],
            denied_by_worker.get(wid, ()),
            now,
            ttls[i],
        )
        for i, wid in enumerate(worker_ids)
    ]


class FleetReader:
    """Reads the whole fleet into one :class:`FleetSnapshot` per call.

    Args:
        redis: a client from :func:`worker_runtime.connection.create_redis` (it decodes
            with ``errors="replace"``; a strict client would fail on invalid UTF-8).
        keys: the key factory of the deployment.
        endpoint: the endpoint as it may be shown (password masked).
        history_limit: how many metrics history points (the most recent) to read.
        events_limit: how many audit events (the most recent) to read.

    Attributes:
        round_trips: pipelined round trips of the last :meth:`read` (for benchmarks).
    """

    def __init__(
        self,
        redis: Redis | RedisCluster,
        keys: Keys,
        *,
        endpoint: str = "",
        history_limit: int = 120,
        events_limit: int = 100,
    ) -> None:
        self.redis = redis
        self.keys = keys
        self.endpoint = endpoint
        self.history_limit = max(1, history_limit)
        self.events_limit = max(1, events_limit)
        self.round_trips = 0
        self._bulk_script: bool | None = None
        self._bulk_keys: tuple[list[str], list[str], list[list[str]]] | None = None

    async def _run(self, queue: Sequence[_Cmd]) -> list[Any]:
        """One pipelined round trip; per-command errors come back as exception objects."""
        if not queue:
            return []
        pipe = self.redis.pipeline(transaction=False)
        for name, args, kwargs in queue:
            getattr(pipe, name)(*args, **kwargs)
        self.round_trips += 1
        replies: list[Any] = await pipe.execute(raise_on_error=False)
        return [None if isinstance(r, Exception) else r for r in replies]

    async def _run_checked(self, queue: Sequence[_Cmd]) -> tuple[list[Any], set[int]]:
        """Like :meth:`_run`, also returning the positions whose command failed."""
        if not queue:
            return [], set()
        pipe = self.redis.pipeline(transaction=False)
        for name, args, kwargs in queue:
            getattr(pipe, name)(*args, **kwargs)
        self.round_trips += 1
        replies: list[Any] = await pipe.execute(raise_on_error=False)
        failed = {i for i, r in enumerate(replies) if isinstance(r, Exception)}
        return [None if i in failed else r for i, r in enumerate(replies)], failed

    def _worker_queue(self, worker_ids: Sequence[str], cluster: bool, bulk: bool) -> list[_Cmd]:
        k = self.keys
        if not worker_ids:
            return []
        queue: list[_Cmd] = []
        if bulk:
            # The registry rarely changes between refreshes: reuse last read's key names
            # (30,000 of them at 10,000 workers) when the worker ids are the same.
            cached = self._bulk_keys
            if cached is not None and cached[0] == worker_ids:
                online, chunks = cached[1], cached[2]
            else:
                online = [k.worker_online(w) for w in worker_ids]
                # Chunks keep each script short (~3 ms per 1,000 workers) so Redis serves
                # the fleet's own commands in between instead of stalling for the read.
                chunks = []
                for at in range(0, len(worker_ids), _SCRIPT_CHUNK):
                    chunk = worker_ids[at : at + _SCRIPT_CHUNK]
                    chunks.append(
                        [k.worker_admin(w) for w in chunk]
                        + [k.worker_agent_types(w) for w in chunk]
                    )
                self._bulk_keys = (list(worker_ids), online, chunks)
            queue.append(_c("mget", online))
            for keys in chunks:
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
            admins = [_pairs_to_dict(p[0]) if isinstance(p, list) and p else None for p in pairs]
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

    def _type_queue(self, types: Iterable[str]) -> list[_Cmd]:
        k = self.keys
        queue: list[_Cmd] = []
        for t in types:
            queue += [
                _c("smembers", k.type_workers(t)),
                _c("smembers", k.type_denied(t)),
                _c("xinfo_groups", k.type_stream(t)),
                _c("xlen", k.type_stream(t)),
                _c("xlen", k.dead_letter_stream(t)),
                _c("hgetall", k.scale_overrides(t)),
            ]
        return queue

    @staticmethod
    def _type_replies(types: Sequence[str], replies: Sequence[Any]) -> dict[str, _TypeReplies]:
        out: dict[str, _TypeReplies] = {}
        for i, t in enumerate(types):
            r = replies[i * _TYPE_COMMANDS : (i + 1) * _TYPE_COMMANDS]
            out[t] = _TypeReplies(
                routable=_strs(r[0], MAX_WORKER_ID),
                denied=_strs(r[1], MAX_WORKER_ID),
                group=_group_info(r[2], _int(r[3])),
                length=_int(r[3]),
                dead=_int(r[4]),
                overrides=_counts(r[5]),
            )
        return out

    async def read(self) -> FleetSnapshot:
        """Read the fleet.

        Raises:
            redis.exceptions.RedisError: Redis is unreachable or refused the connection.
        """
        with _collector_paused():
            return await self._read()

    async def _read(self) -> FleetSnapshot:
        started = time.perf_counter()
        self.round_trips = 0
        now = now_ms()
        k = self.keys

        # -- round trip 1: the indexes ---------------------------------------------
        cluster = isinstance(self.redis, RedisCluster)
        probe = not cluster and self._bulk_script is None
        r1, failed1 = await self._run_checked(
            [
                _c("smembers", k.workers),
                _c("smembers", k.agent_types),
                _c("zrange", k.instances, 0, -1, withscores=True),
                _c("get", k.leader_lock),
                _c("get", k.leader_epoch),
                _c("hgetall", k.scale_targets),
                _c("zrange", k.metrics_history, -self.history_limit, -1),
                _c("xrevrange", k.audit_stream, "+", "-", self.events_limit),
                # by-framework's admin-state index: a suspended or evicted worker that
                # left the registry (by-framework's do on exit) is still listed.
                _c("smembers", k.admin_workers),
                # Once per reader: may this client run read-only scripts (EVAL_RO is
                # Redis 7+, and an ACL viewer may lack @scripting)?
                *([_c("eval_ro", "return 1", 0)] if probe else []),
            ]
        )
        if probe:
            self._bulk_script = 9 not in failed1
        # Worker ids get a larger bound than other names: a worker in the registry is
        # listed, whatever its id (1 KiB used to hide a 10 kB id from every view).
        worker_ids = sorted(_strs(r1[0], MAX_WORKER_ID) | _strs(r1[8], MAX_WORKER_ID))
        indexed_types = _strs(r1[1])
        instance_scores = self._instance_scores(r1[2])
        leader = _leader(r1[3], r1[4])
        targets = _counts(r1[5])
        history = [MetricsPoint.parse(m) for m in (r1[6] or []) if isinstance(m, str)]
        events = parse_audit(r1[7])

        # -- round trip 2: per worker, per known type, per instance --------------------
        known_types = sorted(indexed_types | set(targets))
        # On a single Redis every lease comes back in one MGET and every admin hash and
        # declared-type set in one read-only script reply: per-command overhead in the
        # client, not Redis, is what dominates a 10,000-worker read. A cluster (keys in
        # many slots) or a server refusing EVAL_RO gets one command per key instead.
        bulk = bool(worker_ids) and not cluster and bool(self._bulk_script)
        queue: list[_Cmd] = self._worker_queue(worker_ids, cluster, bulk)
        n_w = len(queue)
        queue += self._type_queue(known_types)
        instance_ids = sorted(instance_scores)
        queue += [_c("get", k.instance_online(i)) for i in instance_ids]
        n_before_ttl = len(queue)
        queue += self._ttl_queue(worker_ids, bulk)
        r2 = await self._run(queue)
        ttls = self._split_ttls(r2[n_before_ttl:], len(worker_ids), bulk)
        raw_leases, raw_admins, raw_types = self._split_workers(r2[:n_w], worker_ids, cluster, bulk)
        n_t = _TYPE_COMMANDS * len(known_types)
        leases, admins, declared, discovered = await _off_loop(
            len(worker_ids), _parse_workers, worker_ids, raw_leases, raw_admins, raw_types
        )
        type_data = self._type_replies(known_types, r2[n_w : n_w + n_t])
        instance_leases: dict[str, InstanceLease | None] = {}
        for i, iid in enumerate(instance_ids):
            raw = _str(r2[n_w + n_t + i])
            instance_leases[iid] = None if raw is None else InstanceLease.parse(raw)

        # -- round trip 3: types only a worker knew about, and the active jobs of
        # workers whose lease does not report them (by-framework keeps them in its
        # status hash) -----------------------------------------------------------------
        extra_types = sorted(t for t in discovered - set(type_data) if len(t) <= _MAX_ID)
        counted = [
            wid
            for wid in worker_ids
            if isinstance(leases[wid], Lease) and leases[wid].active_jobs is None
        ]
        if extra_types or counted:
            queue = self._type_queue(extra_types)
            queue += [_c("hget", k.worker_status(w), "active_count") for w in counted]
            r3 = await self._run(queue)
            n_x = _TYPE_COMMANDS * len(extra_types)
            type_data.update(self._type_replies(extra_types, r3[:n_x]))
            for wid, raw in zip(counted, r3[n_x:], strict=True):
                active = parse_count_any(raw)
                if active is not None:
                    leases[wid] = leases[wid].model_copy(update={"active_jobs": active})

        # -- derive ---------------------------------------------------------------------
        denied_by_worker: dict[str, set[str]] = {}
        for t, td in type_data.items():
            for wid in td.denied:
                denied_by_worker.setdefault(wid, set()).add(t)
        workers = await _off_loop(
            len(worker_ids),
            _build_workers,
            worker_ids,
            leases,
            admins,
            declared,
            denied_by_worker,
            now,
            ttls,
        )
        types = [
            TypeView(
                name=t,
                workers=sorted(td.routable),
                denied=sorted(td.denied),
                depth=queue_depth(_undelivered(td), td.group.pending),
                undelivered=_undelivered(td),
                pending=td.group.pending,
                length=td.length,
                dead=td.dead,
                target=targets.get(t),
                overrides=td.overrides,
            )
            for t, td in sorted(type_data.items())
        ]
        # Grouping 10,000 workers by instance is tens of ms of Python: off the loop too.
        instances = await _off_loop(
            len(workers), self._instances, instance_scores, instance_leases, workers, types, leader
        )
        online = [w for w in workers if w.status is Status.ONLINE]
        metrics = MetricsView(
            workers_online=len(online),
            agent_types=len(types),
            active_executions=sum(max(0, w.active_jobs or 0) for w in online),
            queue_depth=sum(t.depth for t in types),
            history=history,
        )
        redis_info = RedisInfo(
            endpoint=self.endpoint,
            connected=True,
            schema_version=k.schema,
            cluster=isinstance(self.redis, RedisCluster),
            read_ms=round((time.perf_counter() - started) * 1000, 2),
            round_trips=self.round_trips,
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
        )

    @staticmethod
    def _instance_scores(reply: Any) -> dict[str, int | None]:
        scores: dict[str, int | None] = {}
        if not isinstance(reply, list):
            return scores
        for item in reply:
            if isinstance(item, list | tuple) and len(item) == 2 and isinstance(item[0], str):
                if len(item[0]) > _MAX_ID:
                    continue
                score = item[1]
                scores[item[0]] = int(score) if isinstance(score, int | float) else None
        return scores

    @staticmethod
    def _instances(
        scores: Mapping[str, int | None],
        leases: Mapping[str, InstanceLease | None],
        workers: Sequence[WorkerView],
        types: Sequence[TypeView],
        leader: LeaderView,
    ) -> list[InstanceView]:
        """Instances from the registry plus any instance named only by worker leases."""
        members: dict[str, list[WorkerView]] = {}
        for w in workers:
            if w.instance_id and len(w.instance_id) <= _MAX_ID:
                members.setdefault(w.instance_id, []).append(w)
        ids = sorted(set(scores) | set(members))

        # Live replicas per (instance, type): the instance's own report when it has
        # one, else counted from its online workers' leases.
        replicas: dict[str, dict[str, int]] = {}
        online: dict[str, bool] = {}
        for iid in ids:
            lease = leases.get(iid)
            live_workers = [w for w in members.get(iid, []) if w.status is Status.ONLINE]
            if lease is not None and lease.replicas:
                replicas[iid] = {t: len(ws) for t, ws in lease.replicas.items()}
            else:
                counts: dict[str, int] = {}
                for w in live_workers:
                    for t in w.agent_types:
                        counts[t] = counts.get(t, 0) + 1
                replicas[iid] = counts
            online[iid] = lease is not None if iid in scores else bool(live_workers)

        # Exactly the runtime's notion (worker_runtime.scale): a registered instance
        # with a live lease that declares the type. Instances known only from worker
        # leases (other runtimes) run no quota.
        serving: dict[str, list[str]] = {}
        for iid in ids:
            lease = leases.get(iid)
            if lease is None:
                continue
            for t in set(lease.agent_types):
                serving.setdefault(t, []).append(iid)

        by_type = {t.name: t for t in types}
        views: list[InstanceView] = []
        for iid in ids:
            lease = leases.get(iid)
            quota: dict[str, int] = {}
            for t, tv in by_type.items():
                if not online[iid] and iid not in tv.overrides:
                    continue
                if iid not in serving.get(t, []) and iid not in tv.overrides:
                    continue
                q = compute_quota(tv.target, tv.overrides, serving.get(t, []), iid)
                if q is not None:
                    quota[t] = q
            is_leader = (
                leader.instance_id == iid
                if leader.instance_id is not None
                else bool(lease and lease.is_leader)
            )
            worker_ids = {w.worker_id for w in members.get(iid, [])}
            if lease is not None:
                for ws in lease.replicas.values():
                    worker_ids.update(w for w in ws if len(w) <= _MAX_ID)
            views.append(
                InstanceView(
                    instance_id=iid,
                    online=online[iid],
                    hostname=lease.hostname if lease else None,
                    pid=lease.pid if lease else None,
                    role=lease.role if lease else None,
                    is_leader=is_leader,
                    last_seen=(lease.last_seen if lease and lease.last_seen else scores.get(iid)),
                    workers=sorted(worker_ids),
                    replicas=dict(sorted(replicas[iid].items())),
                    quota=quota,
                    scale_note=lease.scale_note if lease else None,
                )
            )
        return views

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
        r1 = await self._run(
            [
                _c("sismember", k.workers, worker_id),
                _c("get", k.worker_online(worker_id)),
                _c("hgetall", k.worker_admin(worker_id)),
                _c("smembers", k.worker_agent_types(worker_id)),
                _c("hgetall", k.worker_status(worker_id)),
                _c("zrevrange", k.worker_executions(worker_id), 0, limit - 1),
                _c("zrevrange", k.worker_active_executions(worker_id), 0, limit - 1),
                _c("hgetall", k.worker_active_snapshots(worker_id)),
                _c("hgetall", k.worker_history_snapshots(worker_id)),
                _c("smembers", k.agent_types),
                _c("sismember", k.admin_workers, worker_id),
                _c("pttl", k.worker_online(worker_id)),
            ]
        )
        raw_lease = _str(r1[1])
        lease_obj = _lease_obj(raw_lease)
        admin = AdminState.parse(_dict(r1[2]))
        declared = _strs(r1[3])
        lease_types: set[str] = set()
        if isinstance(lease_obj, dict):
            lease_types = set(Lease.parse(lease_obj).agent_types)
        types = sorted(t for t in declared | lease_types | _strs(r1[9]) if len(t) <= _MAX_ID)
        r2 = await self._run([_c("sismember", k.type_denied(t), worker_id) for t in types])
        denied = [t for t, hit in zip(types, r2, strict=True) if hit]

        status_hash = _dict(r1[4])
        view_lease = lease_obj
        if isinstance(lease_obj, dict) and Lease.parse(lease_obj).active_jobs is None:
            # A by-framework worker: its active jobs are the status hash's counter.
            counter = parse_count_any(status_hash.get("active_count"))
            if counter is not None:
                view_lease = {**lease_obj, "active_jobs": counter}
        ttl = r1[11] if isinstance(r1[11], int) else None
        view = build_worker_view(worker_id, view_lease, admin, declared, denied, now, ttl)
        active_snaps = _dict(r1[7])
        history_snaps = _dict(r1[8])
        active = _executions(_order(r1[6], active_snaps), active_snaps, limit)
        recent = _executions(_order(r1[5], history_snaps), history_snaps, limit)
        return WorkerDetail(
            worker_id=worker_id,
            known=bool(r1[0]) or raw_lease is not None or bool(r1[10]),
            worker=view,
            lease=lease_obj if isinstance(lease_obj, dict) else None,
            lease_raw=raw_lease
            if raw_lease is not None and not isinstance(lease_obj, dict)
            else None,
            admin=admin,
            runtime_status=_str(status_hash.get(RUNTIME_STATUS_FIELD)),
            declared_types=sorted(declared),
            denied_types=denied,
            active_executions=active,
            recent_executions=recent,
        )

    async def read_metrics_history(self, limit: int) -> list[MetricsPoint]:
        """The collector's newest ``limit`` points, oldest first (malformed ones skipped)."""
        raw = await self.redis.zrange(self.keys.metrics_history, -limit, -1)
        return [MetricsPoint.parse(m) for m in raw if isinstance(m, str)]


def _order(index_reply: Any, snapshots: Mapping[str, Any]) -> list[str]:
    """Execution ids most recent first: the index order, then snapshots it misses."""
    ordered = [str(e) for e in index_reply] if isinstance(index_reply, list) else []
    seen = set(ordered)
    rest = [e for e in snapshots if e not in seen]

    def started(eid: str) -> int:
        return Execution.parse(snapshots[eid]).started_at or 0

    return ordered + sorted(rest, key=started, reverse=True)


def _executions(order: Sequence[str], snapshots: Mapping[str, Any], limit: int) -> list[Execution]:
    out: list[Execution] = []
    for eid in order:
        if len(out) >= limit:
            break
        raw = snapshots.get(eid)
        execution = Execution.parse(raw) if raw is not None else Execution()
        if not execution.execution_id:
            execution = execution.model_copy(update={"execution_id": eid})
        out.append(execution)
    return out
