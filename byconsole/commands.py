"""The headless commands behind ``byconsole``: ``--snapshot`` and the admin subcommands.

Each handler reads through :class:`~worker_runtime.fleet.FleetReader`, writes through
:class:`~worker_runtime.admin.WorkerManager` (both channels + audit) and returns the
exit code: 0 success, 1 a check failed or the target does not exist. Usage and
connection errors are raised and turned into exit code 2 by :mod:`byconsole.cli`.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster
from rich.console import Console
from rich.text import Text

from byconsole import checks as chk
from byconsole.config import Context
from byconsole.render_prom import render_prom
from byconsole.render_table import (
    contexts_table,
    counts_line,
    emit,
    history_table,
    make_console,
    metrics_summary,
    snapshot_view,
    worker_detail_view,
    workers_table,
)
from byconsole.styles import ansi_style
from byconsole.text import safe_text
from worker_runtime.admin import (
    ActionResult,
    UnknownWorkerError,
    WorkerManager,
    WorkerOnlineError,
)
from worker_runtime.fleet import FleetReader
from worker_runtime.keys import Keys
from worker_runtime.models import MetricsPoint, now_ms
from worker_runtime.quota import check_scale_count
from worker_runtime.settings import RedisSettings
from worker_runtime.snapshot import FleetSnapshot


class NotFoundError(LookupError):
    """A named target (worker, type, instance) does not exist: exit code 1."""


class RefusedError(RuntimeError):
    """The target exists but the command does not apply to it now: exit code 1."""


@dataclass
class Session:
    """What a command needs: the client, the key factory and where to print."""

    redis: Redis | RedisCluster
    keys: Keys
    settings: RedisSettings
    out: Console
    err: Console

    def reader(self, **kwargs: Any) -> FleetReader:
        """A fleet reader on this session's client."""
        return FleetReader(self.redis, self.keys, endpoint=self.settings.endpoint, **kwargs)

    def manager(self) -> WorkerManager:
        """The admin API on this session's client."""
        return WorkerManager(self.redis, self.keys)


def print_json(doc: Any) -> None:
    """One JSON document on stdout (indented on a terminal, compact when piped)."""
    indent = 2 if sys.stdout.isatty() else None
    # ASCII escapes keep the document valid whatever the terminal encoding.
    sys.stdout.write(json.dumps(doc, indent=indent, ensure_ascii=True) + "\n")
    sys.stdout.flush()


def fail(session: Session, message: str) -> None:
    """A one-line explanation of a failed check on stderr (plain: never wrapped)."""
    del session  # stderr lines are plain text so scripts can grep them
    line = " ".join(safe_text(message, 2000).split())
    sys.stderr.write(f"byconsole: {line}\n")
    sys.stderr.flush()


# -- --snapshot ---------------------------------------------------------------------


def _scoped(snapshot: FleetSnapshot, agent_type: str | None) -> FleetSnapshot:
    if agent_type is None:
        return snapshot
    workers = chk.in_scope(snapshot, agent_type)
    ids = {w.instance_id for w in workers}
    instances = [
        i
        for i in snapshot.instances
        if i.instance_id in ids or agent_type in i.replicas or agent_type in i.quota
    ]
    return snapshot.model_copy(
        update={
            "workers": workers,
            "types": chk.types_in_scope(snapshot, agent_type),
            "instances": instances,
        }
    )


async def run_snapshot(session: Session, args: argparse.Namespace, checks: chk.Checks) -> int:
    """``byconsole --snapshot``: print the fleet, then run the checks."""
    snapshot = await session.reader().read()
    agent_type: str | None = args.snapshot_type
    scoped = _scoped(snapshot, agent_type)
    if args.format == "json":
        print_json(scoped.model_dump(mode="json"))
    elif args.format == "prom":
        sys.stdout.write(render_prom(scoped, list(scoped.workers), list(scoped.types)))
    else:
        emit(session.out, snapshot_view(scoped))
    code = 0
    if agent_type is not None and not scoped.types and not scoped.workers:
        fail(session, f"unknown agent type: {safe_text(agent_type)}")
        code = 1
    failures = chk.run_checks(snapshot, checks, agent_type)
    for line in failures:
        fail(session, f"check failed: {line}")
    return 1 if failures else code


# -- worker ...------------------------------------------------------------------------


async def worker_list(session: Session, args: argparse.Namespace) -> int:
    """``worker list [--type T]``."""
    snapshot = await session.reader(history_limit=1, events_limit=1).read()
    agent_type: str | None = args.worker_type
    workers = chk.in_scope(snapshot, agent_type)
    if agent_type is not None and not workers and not chk.types_in_scope(snapshot, agent_type):
        raise NotFoundError(f"unknown agent type: {agent_type}")
    if args.json:
        print_json([w.model_dump(mode="json") for w in workers])
        return 0
    emit(session.out, workers_table(workers, snapshot.generated_at))
    emit(session.out, counts_line(workers))
    return 0


async def worker_info(session: Session, args: argparse.Namespace) -> int:
    """``worker info ID``."""
    detail = await session.reader().read_worker_detail(args.worker_id)
    if not detail.known:
        raise NotFoundError(f"unknown worker: {args.worker_id}")
    if args.json:
        print_json(detail.model_dump(mode="json"))
    else:
        emit(session.out, worker_detail_view(detail, now_ms()))
    return 0


async def _wait(manager: WorkerManager, result: ActionResult, timeout: float) -> float | None:
    """Seconds until the worker confirmed ``result``, ``None`` on timeout.

    A draining worker may exit (dropping its lease) before it rewrites the lease with
    the applied state; its exit is the confirmation.
    """
    if result.action != "drain":
        return await manager.wait_applied(result, timeout=timeout)
    deadline = time.monotonic() + timeout
    while True:
        step = max(0.05, min(0.5, deadline - time.monotonic()))
        latency = await manager.wait_applied(result, timeout=step)
        if latency is not None:
            return latency
        if await manager.get_lease(result.worker_id) is None:
            return max(0.0, (now_ms() - result.updated_at) / 1000)
        if time.monotonic() >= deadline:
            return None


async def _report(
    session: Session,
    args: argparse.Namespace,
    result: ActionResult,
    description: str,
    can_wait: bool = True,
) -> int:
    """Say what was written and whether the worker has confirmed it."""
    latency: float | None = None
    waited = bool(getattr(args, "wait", False)) and can_wait and result.online
    if waited:
        latency = await _wait(session.manager(), result, args.timeout)
    if not result.online:
        state = "offline"
        note = "the worker is offline: it applies this state when it starts"
    elif latency is not None:
        state = "applied"
        note = f"applied by the worker in {latency:.3f} s"
    elif waited:
        state = "timeout"
        note = f"not confirmed by the worker within {args.timeout:g} s"
    else:
        state = "pending"
        note = "pending until the worker confirms (within one heartbeat; --wait to wait)"
    if args.json:
        print_json(
            {
                "target": result.worker_id,
                "action": result.action,
                "updated_at": result.updated_at,
                "online": result.online,
                "state": state,
                "latency_s": latency,
            }
        )
    else:
        line = Text(f"{description}: written · ")
        role = {"applied": "success", "timeout": "alert"}.get(state)
        line.append(note, style=ansi_style(role) if role else "")
        emit(session.out, line)
    if state == "timeout":
        fail(session, f"check failed: {note}")
        return 1
    return 0


async def worker_action(session: Session, args: argparse.Namespace) -> int:
    """``worker suspend|resume|evict|drain|forget ID``."""
    manager = session.manager()
    wid: str = args.worker_id
    reason: str | None = args.reason
    action: str = args.action
    shown = safe_text(wid, 80)
    if action == "forget":
        try:
            forgotten = await manager.forget_worker(wid, reason, force=args.force)
        except WorkerOnlineError:
            raise RefusedError(
                f"worker {wid} is online: evict or drain it first (or forget --force)"
            ) from None
        if not forgotten:
            raise UnknownWorkerError(f"unknown worker: {wid}")
        if args.json:
            print_json({"target": wid, "action": "forget", "forgotten": True})
        else:
            emit(session.out, Text(f"forget {shown}: every key of the worker removed"))
        return 0
    if action == "suspend":
        result = await manager.suspend_worker(wid, reason)
    elif action == "resume":
        result = await manager.resume_worker(wid, reason)
    elif action == "evict":
        result = await manager.evict_worker(wid, force=args.force, reason=reason)
    else:
        result = await manager.drain_worker(wid, reason)
    return await _report(session, args, result, f"{result.action} {shown}")


# -- type ...---------------------------------------------------------------------------


async def _type_known(session: Session, agent_type: str) -> bool:
    k = session.keys
    pipe = session.redis.pipeline(transaction=False)
    pipe.sismember(k.agent_types, agent_type)
    pipe.exists(k.type_stream(agent_type))
    pipe.exists(k.type_denied(agent_type))
    pipe.hexists(k.scale_targets, agent_type)
    replies = await pipe.execute(raise_on_error=False)
    return any(r is True or (isinstance(r, int) and r > 0) for r in replies)


async def type_denylist(session: Session, args: argparse.Namespace) -> int:
    """``type denylist T``."""
    agent_type: str = args.agent_type
    if not await _type_known(session, agent_type):
        raise NotFoundError(f"unknown agent type: {agent_type}")
    denied = await session.manager().get_type_denylist(agent_type)
    if args.json:
        print_json({"type": agent_type, "denied": denied})
        return 0
    emit(session.out, Text(f"Denylist of {safe_text(agent_type, 80)}", style=ansi_style("heading")))
    for wid in denied:
        emit(session.out, Text(f"  {safe_text(wid, 120)}"))
    emit(session.out, Text(f"{len(denied)} worker(s) denied"))
    return 0


async def type_deny_allow(session: Session, args: argparse.Namespace) -> int:
    """``type deny T ID`` / ``type allow T ID``."""
    manager = session.manager()
    agent_type: str = args.agent_type
    wid: str = args.worker_id
    if not await manager.worker_exists(wid):
        raise UnknownWorkerError(f"unknown worker: {wid}")
    if args.action == "deny":
        result = await manager.deny_worker_for_type(agent_type, wid, args.reason)
    else:
        result = await manager.allow_worker_for_type(agent_type, wid, args.reason)
    what = f"{args.action} {safe_text(wid, 80)} for {safe_text(agent_type, 80)}"
    # The lease reports applied denials, not an admin_applied_at: nothing to wait on.
    return await _report(session, args, result, what, can_wait=False)


# -- scale ------------------------------------------------------------------------------


async def scale(session: Session, args: argparse.Namespace) -> int:
    """``scale T N [--instance ID]``."""
    agent_type: str = args.agent_type
    instance: str | None = args.instance
    check_scale_count(args.count)  # before any Redis call: a bad count is a usage error
    before = await session.reader(history_limit=1, events_limit=1).read()
    if not args.force:
        if agent_type not in {t.name for t in before.types}:
            known = ", ".join(sorted(t.name for t in before.types)[:20]) or "none"
            raise NotFoundError(
                f"unknown agent type: {agent_type} (known: {known}); --force sets it anyway"
            )
        if instance is not None and instance not in {i.instance_id for i in before.instances}:
            raise NotFoundError(f"unknown instance: {instance}; --force sets it anyway")
    manager = session.manager()
    if instance is None:
        result = await manager.scale_type(agent_type, args.count, args.reason)
    else:
        result = await manager.scale_instance(agent_type, instance, args.count, args.reason)
    after = await session.reader(history_limit=1, events_limit=1).read()
    quotas = {i.instance_id: i.quota[agent_type] for i in after.instances if agent_type in i.quota}
    live = {i.instance_id: i.replicas.get(agent_type, 0) for i in after.instances if i.online}
    notes = {i.instance_id: i.scale_note for i in after.instances if i.scale_note}
    if args.json:
        print_json(
            {
                "type": agent_type,
                "instance": instance,
                "count": args.count,
                "updated_at": result.updated_at,
                "quotas": quotas,
                "replicas": live,
                "notes": notes,
            }
        )
        return 0
    where = f" on {safe_text(instance, 80)}" if instance else ""
    emit(session.out, Text(f"scale {safe_text(agent_type, 80)}{where} to {args.count}: written"))
    for iid in sorted(set(quotas) | set(live)):
        want = quotas.get(iid)
        emit(
            session.out,
            Text(
                f"  {safe_text(iid, 80)}: {live.get(iid, 0)} running"
                + ("" if want is None else f", quota {want}")
                + (f" ({safe_text(notes[iid], 200)})" if iid in notes else "")
            ),
        )
    return 0


# -- metrics ------------------------------------------------------------------------------


async def metrics_snapshot(session: Session, args: argparse.Namespace) -> int:
    """``metrics snapshot``: live figures computed from the fleet."""
    snapshot = await session.reader(history_limit=1, events_limit=1).read()
    metrics = snapshot.metrics
    if args.json:
        doc = metrics.model_dump(mode="json", exclude={"history"})
        print_json({"generated_at": snapshot.generated_at, **doc})
    else:
        emit(session.out, metrics_summary(metrics))
    return 0


async def metrics_history(session: Session, args: argparse.Namespace) -> int:
    """``metrics history [--limit N]``: the collector's points, oldest first."""
    raw = await session.redis.zrange(session.keys.metrics_history, -args.limit, -1)
    points = [MetricsPoint.parse(m) for m in raw if isinstance(m, str)]
    if args.json:
        print_json([p.model_dump(mode="json") for p in points])
        return 0
    if not points:
        emit(session.out, Text("no metrics history yet (the leader's collector writes it)"))
        return 0
    emit(session.out, history_table(points))
    emit(session.out, Text(f"{len(points)} point(s)"))
    return 0


# -- contexts -------------------------------------------------------------------------------


def list_contexts(
    contexts: dict[str, Context], default: str | None, path: str, as_json: bool
) -> int:
    """``byconsole contexts``: name, masked endpoint, read-only flag."""
    if as_json:
        print_json(
            [
                {
                    "name": name,
                    "endpoint": ctx.endpoint,
                    "read_only": ctx.read_only,
                    "default": name == default,
                }
                for name, ctx in sorted(contexts.items())
            ]
        )
        return 0
    out = make_console()
    if not contexts:
        emit(out, Text(f"no contexts defined ({path})"))
        return 0
    emit(out, contexts_table(contexts, default))
    emit(out, Text(f"{len(contexts)} context(s) in {path}"))
    return 0
