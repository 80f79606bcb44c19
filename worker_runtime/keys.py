"""The one place Redis keys are spelled.

Two schemas share one factory:

* ``v1`` (default, single Redis) matches the keys the other by-framework runtimes
  write, byte for byte.
* ``v2`` (Redis Cluster) adds the ``byai_gateway:v2:`` prefix and wraps the entity id
  of same-entity keys in a hash tag (``{worker-07}``), so every multi-key pipeline
  about one worker, instance or session stays in one slot. Single-key families get
  only the prefix.

Nothing outside this module may contain a key literal; a unit test enforces it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

SchemaVersion = Literal["v1", "v2"]

CONSUMER_GROUP = "byai_gateway:consumer_group:agent_engines"
PARKED_ID = "18446744073709551615-0"
"""Last-delivered id of a consumer group this runtime retired after moving a type stream to
the fleet's group (README, "How the runtime behaves", consumer groups): past any entry, it
delivers nothing. Not the largest id, so ``XRANGE (PARKED_ID +`` stays valid."""
"""The consumer group every worker joins on every task stream (a group name, not a key)."""

_GATEWAY = "byai_gateway"
_OBS = "by_framework:obs"
_BF_TRACE = "by_framework:trace"


def _tagged(head: str, entity_id: str, tail: str) -> str:
    """``head:{entity_id}tail``: a v2 key whose slot depends on the entity id.

    Spelled exactly as by-framework's three SDKs spell it (Python ``RedisKeys``,
    TypeScript ``QueueNames`` / ``RegistryKeys``, Java ``Constants``), whatever the id:
    these keys are shared with their workers, admins and clients, so any other spelling
    is another key. Redis hashes the text between the first ``{`` and the next ``}``,
    so for an id starting with ``}`` the tag is empty and each key hashes on its whole
    name, in every SDK alike; this runtime's own instance ids contain no braces
    (``BYAI_WORKER_INSTANCE``), so its workers never have such an id.
    """
    return f"{head}:{{{entity_id}}}{tail}"


@dataclass(frozen=True, slots=True)
class Keys:
    """Renders every key of the product for one schema version.

    Attributes:
        schema: ``"v1"`` for a single Redis, ``"v2"`` for Redis Cluster.
    """

    schema: SchemaVersion = "v1"

    # -- helpers -----------------------------------------------------------------

    @property
    def _root(self) -> str:
        return f"{_GATEWAY}:v2" if self.schema == "v2" else _GATEWAY

    def _group(self, group: str) -> str:
        # Singleton state checked and written together in one script shares a slot in v2.
        return f"{self._root}:{{{group}}}" if self.schema == "v2" else f"{self._root}:{group}"

    def _worker(self, suffix: str, worker_id: str) -> str:
        # v1: byai_gateway:registry:worker:<suffix>:<id>
        # v2: byai_gateway:v2:registry:worker:{<id>}:<suffix>
        if self.schema == "v2":
            return _tagged(f"{self._root}:registry:worker", worker_id, f":{suffix}")
        return f"{self._root}:registry:worker:{suffix}:{worker_id}"

    def _instance(self, suffix: str, instance_id: str) -> str:
        if self.schema == "v2":
            return _tagged(f"{self._root}:registry:instance", instance_id, f":{suffix}")
        return f"{self._root}:registry:instance:{suffix}:{instance_id}"

    def _session(self, suffix: str, session_id: str) -> str:
        if self.schema == "v2":
            return _tagged(f"{self._root}:session", session_id, f":{suffix}")
        return f"{self._root}:session:{session_id}:{suffix}"

    # -- registry (docs/protocol.md, Redis keys) ---------------------------------

    @property
    def workers(self) -> str:
        """Set of every known worker id."""
        return f"{self._root}:registry:workers"

    def worker_online(self, worker_id: str) -> str:
        """String: the worker's lease JSON, with a TTL."""
        return self._worker("online", worker_id)

    def worker_lock(self, worker_id: str) -> str:
        """String: start-up mutex so two processes never run one worker id."""
        return self._worker("lock", worker_id)

    def worker_agent_types(self, worker_id: str) -> str:
        """Set: agent types the worker declares."""
        return self._worker("agent_types", worker_id)

    def worker_status(self, worker_id: str) -> str:
        """Hash: by-framework's execution counters (``active_count`` …) plus ours.

        Shared with by-framework, which keeps ``{status}_count`` counters and
        ``last_*_at`` stamps here; this runtime adds ``runtime_status``
        (idle/busy/suspended/draining), a field by-framework ignores.
        """
        return self._worker("status", worker_id)

    def worker_admin(self, worker_id: str) -> str:
        """Hash: operator-set lifecycle, reason, updated_at, updated_by (no TTL)."""
        return self._worker("admin", worker_id)

    def worker_executions(self, worker_id: str) -> str:
        """ZSet: execution ids the worker handled, score = updated ms."""
        return self._worker("executions", worker_id)

    def worker_active_executions(self, worker_id: str) -> str:
        """ZSet: running execution ids."""
        return self._worker("active_execution_index", worker_id)

    def worker_active_snapshots(self, worker_id: str) -> str:
        """Hash: running execution id -> small JSON snapshot."""
        return self._worker("active_snapshots", worker_id)

    def worker_history_snapshots(self, worker_id: str) -> str:
        """Hash: finished execution id -> small JSON snapshot (capped)."""
        return self._worker("history_snapshots", worker_id)

    def _agent_type(self, suffix: str, agent_type: str) -> str:
        # v1: byai_gateway:registry:agent_type:<suffix>:<type>
        # v2: byai_gateway:v2:registry:agent_type:{<type>}:<suffix>, as by-framework's
        # three SDKs spell it (routing set and denylist of a type share a slot).
        if self.schema == "v2":
            return _tagged(f"{self._root}:registry:agent_type", agent_type, f":{suffix}")
        return f"{self._root}:registry:agent_type:{suffix}:{agent_type}"

    def type_workers(self, agent_type: str) -> str:
        """Set: routable workers of an agent type."""
        return self._agent_type("workers", agent_type)

    def type_denied(self, agent_type: str) -> str:
        """Set: worker ids denied for an agent type."""
        return self._agent_type("denied", agent_type)

    @property
    def admin_workers(self) -> str:
        """Set: every worker id with an admin hash (by-framework's admin-state index).

        Keeps suspended and evicted workers listable after they leave
        :attr:`workers` (a by-framework worker removes itself on exit).
        """
        return f"{self._root}:registry:worker:admin_workers"

    # -- streams -------------------------------------------------------------------

    def type_stream(self, agent_type: str) -> str:
        """Stream of tasks for an agent type, consumed by :data:`CONSUMER_GROUP`."""
        return f"{self._root}:ctrl:agent_type:{agent_type}"

    def dead_letter_stream(self, agent_type: str) -> str:
        """Stream of entries that exhausted their deliveries (poison tasks)."""
        # Not under ctrl:agent_type: a type named "chat:dead" must not collide with it.
        return f"{self._root}:dead_letter:agent_type:{agent_type}"

    @property
    def control_plane_dead_letters(self) -> str:
        """Stream: by-framework's control-plane dead letters (failed wakeups; read-only here).

        by-framework's ``RedisKeys.control_plane_deadletter_stream``: versioned like the
        type streams and untagged in v2. Each entry is one field ``data`` = JSON of its
        ``WakeupDecision`` (``execution_id``, ``target_agent_type``, ``status``,
        ``reason`` …).
        """
        return f"{self._root}:control_plane:mgmt:deadletter"

    @property
    def type_stream_pattern(self) -> str:
        """``SCAN MATCH`` pattern of every type stream (:meth:`type_stream`) of this schema."""
        return self._scan_prefix(self.type_stream("")) + "*"

    @property
    def dead_letter_stream_pattern(self) -> str:
        """``SCAN MATCH`` pattern of every dead-letter stream (:meth:`dead_letter_stream`)."""
        return self._scan_prefix(self.dead_letter_stream("")) + "*"

    @property
    def worker_admin_pattern(self) -> str:
        """``SCAN MATCH`` pattern of every worker's admin hash (:meth:`worker_admin`).

        by-framework's TypeScript and Java admins keep no admin-state index: their
        hashes are found by this pattern alone.
        """
        if self.schema == "v2":
            return self._scan_prefix(f"{self._root}:registry:worker:{{") + "*}:admin"
        return self._scan_prefix(self.worker_admin("")) + "*"

    @staticmethod
    def _scan_prefix(prefix: str) -> str:
        # Glob metacharacters in a fixed prefix match themselves only when escaped.
        return "".join("\\" + c if c in "*?[]\\" else c for c in prefix)

    def worker_stream(self, worker_id: str) -> str:
        """Stream of direct tasks and control commands for one worker."""
        if self.schema == "v2":
            return _tagged(f"{self._root}:ctrl:worker", worker_id, "")
        return f"{self._root}:ctrl:worker:{worker_id}"

    @property
    def control_plane_streams(self) -> dict[str, str]:
        """by-framework's control-plane streams by its names for them (``wakeup``,
        ``delivery_pending``, ``deadletter``): read for its alerts and SLO, never written."""
        root = f"{self._root}:control_plane:mgmt"
        return {
            "wakeup": f"{root}:wakeup",
            "delivery_pending": f"{root}:delivery:pending",
            "deadletter": f"{root}:deadletter",
        }

    def session_data_stream(self, session_id: str) -> str:
        """Stream of task output for a session."""
        return self._session("data_stream", session_id)

    def session_registry(self, session_id: str) -> str:
        """Hash: ``exec:{eid}`` -> execution JSON, ``msg_map:{mid}`` -> eid."""
        return self._session("registry", session_id)

    # -- by-framework's trace records (read by ``byconsole find`` / ``session``) ------
    # by-framework's common/constants.py: v1 keeps the Python SDK's by_framework:trace:*
    # namespace; v2 unifies the three SDKs onto byai_gateway:v2:trace:{id}.

    def trace_meta(self, trace_id: str) -> str:
        """Hash: a trace's metadata as by-framework's ``TraceWriteClient`` writes it.

        Fields ``trace_id``, ``name``, ``session_id``, ``root_message_id``,
        ``root_agent_type``, ``status``, ``start_ts``, ``end_ts`` … (structured
        values as JSON text).
        """
        if self.schema == "v2":
            return _tagged(f"{self._root}:trace", trace_id, "")
        return f"{_BF_TRACE}:{trace_id}"

    def trace_meta_ts(self, trace_id: str) -> str:
        """The TypeScript SDK's v1 trace metadata key; in v2 :meth:`trace_meta` (one namespace)."""
        if self.schema == "v2":
            return self.trace_meta(trace_id)
        return f"{_GATEWAY}:trace:{trace_id}:meta"

    def trace_spans(self, trace_id: str) -> str:
        """List: a trace's span JSON payloads, oldest first (by-framework)."""
        if self.schema == "v2":
            return _tagged(f"{self._root}:trace:spans", trace_id, "")
        return f"{_BF_TRACE}:spans:{trace_id}"

    def trace_index_session(self, session_id: str) -> str:
        """ZSet: trace ids of a session scored by start ms (by-framework; untagged in v2)."""
        if self.schema == "v2":
            return f"{self._root}:trace:idx:session:{session_id}"
        return f"{_BF_TRACE}:idx:session:{session_id}"

    # -- observability (by_framework namespace, as the seeds) ------------------------
    # by-framework keeps these two unversioned in both schemas (metrics/collector.py,
    # metrics/snapshot.py): the same key on a single Redis and on a cluster.

    @property
    def collector_lock(self) -> str:
        """String: metrics collector lock, shared with by-framework's collector.

        Unversioned in v2 too, as by-framework keeps it: both collectors must see one
        lock. Held the way by-framework holds it (see :mod:`worker_runtime.metrics`).
        """
        return f"{_OBS}:collector_lock"

    @property
    def metrics_history(self) -> str:
        """ZSet: metrics history points, score = ts ms, member = JSON (shared, unversioned)."""
        return f"{_OBS}:history"

    @property
    def metrics_fence(self) -> str:
        """String: highest leader epoch that wrote the history (rejects stale leaders).

        v2: hash-tagged with the history key's full name, so it lands in the history's
        slot (an untagged key hashes its whole name) and the fenced write stays one
        script on a cluster.
        """
        if self.schema == "v2":
            return f"{self._root}:{{{_OBS}:history}}:fence"
        return f"{_OBS}:fence"

    def metrics_tier(self, tier: str) -> str:
        """ZSet: one tier of our own downsampled history, score = bucket start ms.

        Ours alone (no other collector writes or trims it), one member per bucket of
        the tier's step, trimmed by the tier's retention (:mod:`worker_runtime.history`).
        v2: tagged like :attr:`metrics_fence` (the history's slot), so the fenced write
        of a tier point is one script on a cluster.
        """
        if self.schema == "v2":
            return f"{self._root}:{{{_OBS}:history}}:metrics:{tier}"
        return f"{self._root}:metrics:history:{tier}"

    # -- keys this project adds ----------------------------------------------------

    @property
    def agent_types(self) -> str:
        """Set: index of every agent type ever declared by a worker."""
        return f"{self._root}:registry:agent_types"

    @property
    def instances(self) -> str:
        """ZSet: instance ids scored by their last beat (ms)."""
        return f"{self._root}:registry:instances"

    def instance_online(self, instance_id: str) -> str:
        """String: the instance lease JSON, with a TTL."""
        return self._instance("online", instance_id)

    @property
    def leader_lock(self) -> str:
        """String: the elected leader's JSON ``{instance_id, token, epoch}`` (SET NX PX)."""
        return f"{self._group('leader')}:lock"

    @property
    def leader_epoch(self) -> str:
        """String counter: incremented by every election win (fencing token)."""
        return f"{self._group('leader')}:epoch"

    @property
    def scale_targets(self) -> str:
        """Hash: agent type -> global replica target."""
        return f"{self._root}:scale:targets"

    def scale_overrides(self, agent_type: str) -> str:
        """Hash: instance id -> absolute replica count for one agent type."""
        return f"{self._root}:scale:overrides:{agent_type}"

    def type_config(self, agent_type: str) -> str:
        """String: a type's runtime configuration JSON
        (:class:`~worker_runtime.models.TypeConfig`), applied by every replica serving it
        without a restart (README, "Type configuration")."""
        return f"{self._root}:config:agent_type:{agent_type}"

    @property
    def fleet_stream(self) -> str:
        """Stream of fleet-wide notifications (scale changes) every instance follows."""
        return f"{self._root}:ctrl:fleet"

    @property
    def type_pauses(self) -> str:
        """Hash: agent type -> pause record JSON (:class:`~worker_runtime.models.TypePause`).

        A field exists while the type is paused; every worker_runtime worker reads the
        hash at start and every heartbeat (the pull side of ``type pause``).
        """
        return f"{self._root}:pause:agent_types"

    @property
    def audit_stream(self) -> str:
        """Stream of operator actions (capped with MAXLEN ~)."""
        return f"{self._root}:audit"

    @property
    def type_stats(self) -> str:
        """Hash: ``processed:{type}`` / ``failed:{type}`` counters, for throughput."""
        return f"{self._root}:stats:types"

    @property
    def scheduler_runs(self) -> str:
        """Hash: periodic task name -> last period number submitted."""
        return f"{self._group('scheduler')}:runs"

    @property
    def scheduler_fence(self) -> str:
        """String: highest leader epoch that submitted periodic tasks."""
        return f"{self._group('scheduler')}:fence"

    @property
    def offline_since(self) -> str:
        """Hash: worker id -> ms the janitor first saw it without a lease."""
        return f"{self._root}:registry:offline_since"

    @property
    def janitor_fence(self) -> str:
        """String: highest leader epoch that made a janitor write (prune, re-home)."""
        return f"{self._group('janitor')}:fence"

    @property
    def acl_patterns(self) -> list[str]:
        """Redis ACL key patterns (``~pattern``) covering every key of this schema.

        For ``ACL SETUSER``: a user limited to these can reach the fleet's keys and
        nothing else in a shared Redis (see the README's ACL section).
        """
        patterns = [f"{self._root}:*", f"{_OBS}:*"]
        if self.schema == "v1":
            # by-framework's trace records (read by find / session); v2 keeps them under
            # the versioned root.
            patterns.append(f"{_BF_TRACE}:*")
        return patterns

    @property
    def acl_patterns_except_audit(self) -> list[str]:
        """:attr:`acl_patterns` minus the audit stream, for append-only audit ACLs.

        Redis ACL patterns cannot subtract, so the product keys other than
        :attr:`audit_stream` are spelled as globs that differ from it at some position
        (``root:[^a]*``, ``root:a[^u]*`` ... ``root:audit?*``). The README's operator
        and worker users get these with their write commands, and the audit stream
        only through a selector allowing reads and ``XADD`` (no DEL, XTRIM, XDEL).
        """
        prefix = f"{self._root}:"
        rest = self.audit_stream[len(prefix) :]
        patterns = [f"{prefix}{rest[:i]}[^{rest[i]}]*" for i in range(len(rest))]
        patterns += [f"{prefix}{rest}?*"]
        patterns += [f"{prefix}{rest[:i]}" for i in range(1, len(rest))]
        return patterns + self.acl_patterns[1:]

    @property
    def acl_patterns_worker_writes(self) -> list[str]:
        """The product keys the README's *worker* ACL user may write (``~pattern``).

        Every product key but the operator's: the audit stream (append-only, through a
        selector), the fleet control stream, the scale targets and overrides, and every
        worker's admin hash (:attr:`acl_patterns_worker_admin`: read and ``DEL`` only,
        through a selector). Redis patterns cannot subtract, so they are spelled as
        globs that leave those keys out (see :func:`_acl_complement`). What they cannot
        express: "a worker's own keys" (one ACL user serves every worker, and a pattern
        cannot name the caller), and a worker's own stream, which must stay writable by
        every producer of direct tasks; pushed commands are authenticated instead
        (:mod:`worker_runtime.signing`).
        """
        root = f"{self._root}:"
        exact = [self.audit_stream, self.fleet_stream]
        prefixes = [self.scale_targets.rpartition(":")[0] + ":"]
        suffix: tuple[str, str] | None = None
        admin = self.acl_patterns_worker_admin
        if admin.endswith(":*"):
            prefixes.append(admin[:-1])
        else:  # v2: registry:worker:{<id>}:admin
            head, _, tail = admin.partition("*")
            suffix = (head, tail)
        excluded = _Exclusions(root, exact, prefixes, suffix)
        return excluded.globs() + self.acl_patterns[1:]

    @property
    def acl_patterns_worker_admin(self) -> str:
        """The ACL pattern of every worker's admin hash (``DEL`` only for the worker user)."""
        if self.schema == "v2":
            return f"{self._root}:registry:worker:*}}:admin"
        return self._worker("admin", "*")

    def all_worker_keys(self, worker_id: str) -> list[str]:
        """Every per-worker key, for ``forget`` (one slot in v2)."""
        return [
            self.worker_online(worker_id),
            self.worker_lock(worker_id),
            self.worker_agent_types(worker_id),
            self.worker_status(worker_id),
            self.worker_admin(worker_id),
            self.worker_executions(worker_id),
            self.worker_active_executions(worker_id),
            self.worker_active_snapshots(worker_id),
            self.worker_history_snapshots(worker_id),
            self.worker_stream(worker_id),
        ]


class _Exclusions:
    """Redis ACL globs for every key under ``root`` except some (see :func:`globs`).

    Args:
        root: the common prefix (``byai_gateway:``).
        exact: keys left out exactly.
        prefixes: key prefixes left out with everything under them.
        suffix: ``(head, tail)``: keys under ``head`` ending with ``tail`` left out.
    """

    def __init__(
        self,
        root: str,
        exact: list[str],
        prefixes: list[str],
        suffix: tuple[str, str] | None,
    ) -> None:
        self.root = root
        self.exact = set(exact)
        self.prefixes = set(prefixes)
        self.suffix = suffix
        self.points = sorted({*exact, *prefixes, *([suffix[0]] if suffix else [])})

    def globs(self) -> list[str]:
        """Globs matching exactly the keys under ``root`` not left out.

        Walks the left-out keys as a trie: at each prefix, a glob for every next
        character no left-out key takes (``p[^ab]*``), the prefix itself when it is a
        key to keep, and the walk goes on for each character one does take.
        """
        return self._under(self.root)

    def _under(self, path: str) -> list[str]:
        if path in self.prefixes:
            return []
        if self.suffix is not None and path == self.suffix[0]:
            return self._not_ending(path, self.suffix[1])
        nexts = sorted({p[len(path)] for p in self.points if p.startswith(path) and p != path})
        out: list[str] = []
        if path != self.root and path not in self.exact:
            out.append(_glob_literal(path))
        if nexts:
            out.append(f"{_glob_literal(path)}[^{''.join(nexts)}]*")
        else:
            out.append(f"{_glob_literal(path)}?*")
        for char in nexts:
            out += self._under(path + char)
        return out

    @staticmethod
    def _not_ending(path: str, tail: str) -> list[str]:
        base = _glob_literal(path)
        out = [base + "?" * n for n in range(len(tail))]
        for i in range(len(tail)):
            kept = _glob_literal(tail[len(tail) - i :])
            out.append(f"{base}*[^{tail[len(tail) - i - 1]}]{kept}")
        return out


def _glob_literal(text: str) -> str:
    """``text`` matched literally by a Redis glob."""
    return "".join(f"\\{c}" if c in "*?[]\\" else c for c in text)


def stream_agent_type(keys: Keys, key: str) -> str | None:
    """The agent type of a type stream or dead-letter stream key of ``keys``, else ``None``.

    The inverse of :meth:`Keys.type_stream` / :meth:`Keys.dead_letter_stream` for keys
    found by ``SCAN`` with their patterns (an empty name is not a type). A function, not
    a method: every method of :class:`Keys` renders a key.
    """
    for prefix in (keys.type_stream(""), keys.dead_letter_stream("")):
        if key.startswith(prefix) and len(key) > len(prefix):
            return key[len(prefix) :]
    return None


def admin_worker_id(keys: Keys, key: str) -> str | None:
    """The worker id of an admin hash key found with :attr:`Keys.worker_admin_pattern`."""
    head, _, tail = keys.worker_admin("\x00").partition("\x00")
    if key.startswith(head) and key.endswith(tail) and len(key) > len(head) + len(tail):
        return key[len(head) : len(key) - len(tail)]
    return None
