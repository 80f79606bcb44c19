"""The headless commands behind ``byconsole``: ``--snapshot`` and the admin subcommands.

Each handler reads through :class:`~worker_runtime.fleet.FleetReader`, writes through
:class:`~worker_runtime.admin.WorkerManager` (both channels + audit) and returns the
exit code: 0 success, 1 a check failed or the target does not exist, 3 ``--wait``
on a worker that cannot confirm (:data:`EXIT_UNCONFIRMABLE`). Usage and connection
errors are raised and turned into exit code 2 by :mod:`byconsole.cli`.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from byconsole.config import Context
from byconsole.headless import checks as chk
from byconsole.headless.plain_table import Fragment, emit
from byconsole.headless.render_dead import dead_detail, dead_table, write_payload
from byconsole.headless.render_find import find_view, session_view
from byconsole.headless.render_pending import pending_table
from byconsole.headless.render_table import (
    contexts_table,
    history_table,
    make_console,
    metrics_summary,
    worker_detail_view,
)
from byconsole.headless.snapshot import (  # noqa: F401  (re-exported for the subcommands)
    NotFoundError,
    RefusedError,
    Session,
    _scoped,
    fail,
    print_json,
    run_snapshot,
    warn_unreadable,
)
from byconsole.outcomes import (
    DRAIN_AS_EVICT,
    plan_outcomes,
    plan_scale,
    serves,
    unconverged,
    unscalable,
    wait_converged,
)
from byconsole.styles import ansi_style
from byconsole.text import safe_text
from byconsole.verbs import verb
from worker_runtime.admin import (
    ActionResult,
    TypePauseResult,
    UnknownWorkerError,
    UnsupportedCommandError,
    WaitOutcome,
    WorkerOnlineError,
    verdict_of,
    verdict_sentence,
)
from worker_runtime.dead_letters import DeadLetter, DeadLetters
from worker_runtime.history import DEFAULT_RANGE, depth_definition
from worker_runtime.lookup import Lookup, timeline_document
from worker_runtime.models import AdminAction, Status, Verdict, now_ms
from worker_runtime.pending import NotPendingError, PendingEntries, PendingEntry
from worker_runtime.quota import check_scale_count
from worker_runtime.restarts import RestartOutcome, RestartResult, RestartState
from worker_runtime.snapshot import FleetSnapshot
from worker_runtime.type_config import ConfigChange, ConfigOutcome, ConfigState, TypeConfigError

BY_ADMIN_WORKER_FIELDS = (
    "worker_id",
    "agent_types",
    "last_seen",
    "ip_address",
    "lifecycle",
    "lifecycle_reason",
)
"""What by-admin's ``worker list|info --json`` print per worker (ours print more)."""

EXIT_UNCONFIRMABLE = 3
"""``--wait`` on a worker that never confirms (by-framework): the command was sent."""


# -- worker ...------------------------------------------------------------------------


async def worker_list(session: Session, args: argparse.Namespace) -> int:
    """``worker list [--type T] [--all]``.

    Like by-admin's ``worker list``, only workers holding a lease (online, or stale)
    by default; ``--all`` adds the offline ones (registry and admin-state index).
    """
    snapshot = await session.reader(history_limit=1, events_limit=1).read()
    agent_type: str | None = args.worker_type
    workers = chk.in_scope(snapshot, agent_type)
    if agent_type is not None and not workers and not chk.types_in_scope(snapshot, agent_type):
        raise NotFoundError(f"unknown agent type: {agent_type}")
    hidden = 0
    if not getattr(args, "all", False):
        shown = [w for w in workers if w.status is not Status.OFFLINE]
        hidden = len(workers) - len(shown)
        workers = shown
    if args.json:
        print_json([w.model_dump(mode="json") for w in workers])
        return warn_unreadable(session, snapshot)
    from byconsole.headless.plain_table import worker_list_view, write_block

    write_block(worker_list_view(workers, snapshot.generated_at), sys.stdout)
    if hidden:
        sys.stdout.write(f"{hidden} offline worker(s) not shown (--all to list them)\n")
    return warn_unreadable(session, snapshot)


async def worker_info(session: Session, args: argparse.Namespace) -> int:
    """``worker info ID``."""
    detail = await session.reader().read_worker_detail(args.worker_id)
    if not detail.known:
        raise NotFoundError(f"unknown worker: {args.worker_id}")
    if args.json:
        doc = detail.model_dump(mode="json")
        # by-admin's ``worker info --json`` fields at the top level, for its scripts.
        view = detail.worker.model_dump(mode="json")
        doc.update({name: view.get(name) for name in BY_ADMIN_WORKER_FIELDS if name != "worker_id"})
        print_json(doc)
    else:
        emit(session.out, worker_detail_view(detail, now_ms()))
    return 0


async def _report(
    session: Session,
    args: argparse.Namespace,
    result: ActionResult,
    description: str,
) -> int:
    """Say what was written and whether the worker has confirmed it.

    ``--wait`` waits through :meth:`WorkerManager.wait_applied`, the console's wait too.
    """
    asked = bool(getattr(args, "wait", False))
    waited: WaitOutcome | None = None
    if asked and result.online and result.confirmable:
        waited = await session.manager().wait_outcome(result, timeout=args.timeout)
    verdict = verdict_of(result, waited)
    latency = waited.latency if waited is not None else None
    superseded = waited.superseded_line if waited is not None else None
    state = verdict.value
    # A superseding write's line is another operator's text: cut, made safe.
    note = verdict_sentence(verdict, result, waited, timeout=getattr(args, "timeout", 0.0))
    if verdict is Verdict.SUPERSEDED:
        note = safe_text(note, 200)
    progress = waited.progress if waited is not None and verdict is Verdict.TIMEOUT else None
    if progress:
        note = f"{note} ({progress})"  # an eviction: how far it got
    if args.json:
        print_json(
            {
                "target": result.worker_id,
                "action": result.action,
                "updated_at": result.updated_at,
                "online": result.online,
                "state": state,
                "latency_s": latency,
                "runtime": result.runtime,
                "confirmation": result.confirmation.value,
                **({"superseded": superseded} if superseded is not None else {}),
                **({"requested": result.requested.value} if result.requested else {}),
                **(
                    {"force_evict": result.force_evict.value if result.force_evict else None}
                    if result.action == AdminAction.FORCE_EVICT
                    else {}
                ),
                **({"progress": progress} if progress else {}),
            }
        )
    else:
        role = {"applied": "success", "timeout": "alert", "superseded": "alert"}.get(state)
        line = [(f"{description}: written · ", ""), (note, ansi_style(role) if role else "")]
        emit(session.out, line)
    if state in ("timeout", "superseded"):
        fail(session, f"check failed: {note}")
        return 1
    if state == "unconfirmable" and asked:
        return EXIT_UNCONFIRMABLE
    return 0


async def worker_action(session: Session, args: argparse.Namespace) -> int:
    """``worker suspend|resume|evict|drain|forget ID``."""
    manager = session.manager()
    wid: str = args.worker_id
    reason: str | None = args.reason
    action = AdminAction(args.action)  # the parser offers only these verbs
    if action is AdminAction.EVICT and args.force:
        action = AdminAction.FORCE_EVICT
    shown = safe_text(wid, 80)
    if action is AdminAction.FORGET:
        try:
            forgotten = await manager.forget_worker(wid, reason, force=args.force)
        except WorkerOnlineError:
            raise RefusedError(
                f"worker {wid} is online: evict or drain it first (or forget --force)"
            ) from None
        if not forgotten:
            raise UnknownWorkerError(f"unknown worker: {wid}")
        if args.json:
            print_json({"target": wid, "action": action.value, "forgotten": True})
        else:
            emit(session.out, f"forget {shown}: every key of the worker removed")
        return 0
    try:
        result = await manager.apply(action, wid, reason=reason)
    except UnsupportedCommandError as exc:  # a drain its runtime cannot take
        # The verdict's sentence: the console's toast for the same refusal.
        raise RefusedError(verdict_sentence(Verdict.REFUSED, error=str(exc))) from None
    assert isinstance(result, ActionResult)  # a worker verb writes one worker
    description = f"{result.action} {shown}"
    if result.requested is not None:
        description = f"{result.requested} {shown} ({DRAIN_AS_EVICT})"
    if action is AdminAction.FORCE_EVICT and not args.json:
        # What force does to its running tasks, as this worker's lease says (the
        # console's confirmation reads the same row).
        said = verb(action).warning_for([result.runtime], [result.force_evict])
        emit(session.out, f"force: {said}")
    return await _report(session, args, result, description)


# -- restart (README, "Restart, stop and pinned calls") -----------------------------------


def _restart_doc(outcome: RestartOutcome) -> dict[str, Any]:
    return {
        "target": outcome.worker_id,
        "action": AdminAction.RESTART.value,
        "state": outcome.state.value,
        "instance": outcome.instance_id,
        "replacement": outcome.replacement,
        "reason": outcome.reason,
        "latency_s": outcome.latency,
    }


def _restart_line(outcome: RestartOutcome) -> list[Fragment]:
    role = {"replaced": "success", "sent": ""}.get(outcome.state.value, "alert")
    return [(safe_text(outcome.line, 400), ansi_style(role) if role else "")]


async def worker_restart(session: Session, args: argparse.Namespace) -> int:
    """``worker restart ID``: refused up front (exit 1) for a worker that cannot
    restart; ``--wait``: until its replacement holds a lease (not confirmed: exit 1)."""
    manager = session.manager()
    try:
        result = await manager.apply(AdminAction.RESTART, args.worker_id, reason=args.reason)
    except UnsupportedCommandError as exc:
        raise RefusedError(str(exc)) from None
    assert isinstance(result, RestartResult)  # a restart writes one replica
    if args.wait:
        outcome = await manager.wait_restarted(result, timeout=args.timeout)
    else:
        outcome = RestartOutcome(result.worker_id, RestartState.SENT, result.instance_id)
    if args.json:
        print_json(_restart_doc(outcome))
    elif outcome.state is RestartState.SENT:
        # Not waited for: what the restart does next, in the verb table's words.
        underway = verb(AdminAction.RESTART).underway_for(wait_hint=True)
        emit(session.out, f"restart {safe_text(result.worker_id, 80)}: sent · {underway}")
    else:
        emit(session.out, _restart_line(outcome))
    if outcome.state in (RestartState.SENT, RestartState.REPLACED):
        return 0
    fail(session, f"check failed: {outcome.line}")
    return 1


async def type_restart(session: Session, args: argparse.Namespace) -> int:
    """``type restart T``: a rolling restart, one progress line per step (``--json``:
    one document at the end); exit 1 unless every replica was replaced."""
    manager = session.manager()
    agent_type: str = args.agent_type
    if not await manager.type_known(agent_type):
        raise NotFoundError(f"unknown agent type: {agent_type}")
    steps: list[RestartOutcome] = []
    async for outcome in manager.rolling_restart(
        agent_type,
        instance_id=args.instance,
        max_unavailable=args.max_unavailable,
        reason=args.reason,
        timeout=args.timeout,
    ):
        steps.append(outcome)
        if not args.json:
            emit(session.out, _restart_line(outcome))
    final = [s for s in steps if s.state is not RestartState.SENT]
    replaced = [s for s in final if s.state is RestartState.REPLACED]
    if args.json:
        print_json(
            {
                "agent_type": agent_type,
                "instance": args.instance,
                "replaced": len(replaced),
                "replicas": [_restart_doc(s) for s in final],
            }
        )
    else:
        emit(session.out, f"{len(replaced)} of {len(final)} replica(s) replaced")
    if not final:
        raise NotFoundError(
            f"no live replica serves {agent_type}"
            + (f" on instance {args.instance}" if args.instance else "")
        )
    if len(replaced) != len(final):
        fail(session, f"check failed: {len(final) - len(replaced)} replica(s) not replaced")
        return 1
    return 0


async def worker_stop(session: Session, args: argparse.Namespace) -> int:
    """``worker stop ID``: a drain (``WorkerManager.stop_worker``), reported as one."""
    wid: str = args.worker_id
    try:
        result = await session.manager().stop_worker(wid, args.reason)
    except UnsupportedCommandError as exc:
        raise RefusedError(str(exc)) from None
    shown = safe_text(wid, 80)
    description = f"stop {shown} (drain: not replaced)"
    if result.requested is not None:
        description = f"stop {shown} ({DRAIN_AS_EVICT})"
    return await _report(session, args, result, description)


async def type_stop(session: Session, args: argparse.Namespace) -> int:
    """``type stop T [--instance I]``: ``scale T 0`` (``--instance``: that instance's
    override); ``--wait``: until no worker_runtime replica serves it there."""
    manager = session.manager()
    agent_type: str = args.agent_type
    if not await manager.type_known(agent_type):
        raise NotFoundError(f"unknown agent type: {agent_type}")
    instance: str | None = args.instance
    if instance is None:
        # A target nothing runs would read "stopped" while every worker keeps serving.
        snapshot = await session.reader(history_limit=1, events_limit=1).read()
        nothing_scales = unscalable(snapshot, agent_type, instance)
        if nothing_scales:
            raise RefusedError(f"{nothing_scales} (stop its workers with worker stop)")
        result = await manager.stop_type(agent_type, args.reason)
    else:
        result = await manager.stop_instance(agent_type, instance, args.reason)
    left: list[str] | None = None
    if args.wait:
        left = await manager.wait_stopped(agent_type, instance, timeout=args.timeout)
    where = f" on {safe_text(instance, 80)}" if instance else ""
    if args.json:
        print_json(
            {
                "agent_type": agent_type,
                "instance": instance,
                "action": result.action,
                "updated_at": result.updated_at,
                **({"serving": left, "stopped": not left} if left is not None else {}),
            }
        )
    else:
        line = f"stop {safe_text(agent_type, 80)}{where}: scale to 0 written"
        if left is not None:
            line += " · stopped" if not left else f" · still serving: {', '.join(left)}"
        emit(session.out, safe_text(line, 2000))
    if left:
        fail(session, f"check failed: {len(left)} replica(s) still serve {agent_type}{where}")
        return 1
    return 0


# -- config (README, "Type configuration") ---------------------------------------------


async def config_get(session: Session, args: argparse.Namespace) -> int:
    """``config get T``: the stored configuration (version 0 and empty: never set)."""
    agent_type: str = args.agent_type
    stored = await session.manager().get_type_config(agent_type)
    if args.json:
        print_json({"agent_type": agent_type, **stored.model_dump(mode="json")})
        return 0
    shown = safe_text(agent_type, 80)
    if stored.version == 0:
        emit(session.out, f"{shown}: no configuration set")
        return 0
    by = f" by {safe_text(stored.updated_by or '?', 80)}" if stored.updated_by else ""
    emit(session.out, [(f"{shown}: version {stored.version}{by}", ansi_style("heading"))])
    for key in sorted(stored.config):
        value = json.dumps(stored.config[key], sort_keys=True, ensure_ascii=False)
        emit(session.out, f"  {safe_text(key, 80)} = {safe_text(value, 400)}")
    return 0


async def config_set(session: Session, args: argparse.Namespace) -> int:
    """``config set T key=value … [--unset K]``: refused (exit 1) for a reserved key or a
    value that is not JSON; ``--wait``: each live replica's applied / failed."""
    manager = session.manager()
    agent_type: str = args.agent_type
    values = dict(args.settings)
    if not values and not args.unset:
        raise RefusedError("nothing to change: give key=value settings or --unset K")
    try:
        change = await manager.apply(
            AdminAction.CONFIG_SET,
            agent_type=agent_type,
            values=values,
            unset=args.unset,
            reason=args.reason,
        )
    except TypeConfigError as exc:
        raise RefusedError(str(exc)) from None
    assert isinstance(change, ConfigChange)  # a config set writes the type's configuration
    outcomes: dict[str, ConfigOutcome] = {}
    if args.wait:
        outcomes = await manager.wait_config(change, timeout=args.timeout)
    shown = safe_text(agent_type, 80)
    if args.json:
        print_json(
            {
                "agent_type": agent_type,
                "action": AdminAction.CONFIG_SET.value,
                "version": change.version,
                "diff": change.diff,
                "config": change.after,
                **(
                    {
                        "replicas": {
                            w: {"state": o.state.value, "error": o.error}
                            for w, o in sorted(outcomes.items())
                        }
                    }
                    if args.wait
                    else {}
                ),
            }
        )
    else:
        emit(
            session.out,
            f"config set {shown}: version {change.version} written · {change.diff}",
        )
        for wid, outcome in sorted(outcomes.items()):
            line = f"  {safe_text(wid, 80)}: {outcome.state.value}"
            if outcome.error:
                line += f" ({safe_text(outcome.error, 300)})"
            role = "success" if outcome.state is ConfigState.APPLIED else "alert"
            emit(session.out, [(line, ansi_style(role))])
        if args.wait and not outcomes:
            emit(session.out, "  no live replica (each reads it when it starts)")
    states = {o.state for o in outcomes.values()}
    bad = [w for w, o in outcomes.items() if o.state in (ConfigState.FAILED, ConfigState.PENDING)]
    if bad:
        fail(session, f"check failed: {len(bad)} replica(s) failed or did not report")
        return 1
    if ConfigState.UNSUPPORTED in states:
        return EXIT_UNCONFIRMABLE
    return 0


# -- type ...---------------------------------------------------------------------------


async def type_list(session: Session, args: argparse.Namespace) -> int:
    """``type list``: every type the fleet read knows, with its queue's health.

    Types come from the registry and from the streams themselves (a backlog nobody
    serves is listed, marked unregistered); ``--json`` prints the snapshot's type views.
    """
    snapshot = await session.reader(history_limit=1, events_limit=1).read()
    if args.json:
        print_json([t.model_dump(mode="json") for t in snapshot.types])
        return 0
    from byconsole.headless.plain_table import PlainBlock, types_table, write_block

    write_block(PlainBlock([types_table(snapshot.types, None)]), sys.stdout)
    sys.stdout.write(f"{len(snapshot.types)} type(s)\n")
    return 0


async def type_denylist(session: Session, args: argparse.Namespace) -> int:
    """``type denylist T``."""
    agent_type: str = args.agent_type
    if not await session.manager().type_known(agent_type):
        raise NotFoundError(f"unknown agent type: {agent_type}")
    denied = await session.manager().get_type_denylist(agent_type)
    if args.json:
        print_json(denied)  # by-admin's shape: a plain list of worker ids
        return 0
    emit(session.out, [(f"Denylist of {safe_text(agent_type, 80)}", ansi_style("heading"))])
    for wid in denied:
        emit(session.out, f"  {safe_text(wid, 120)}")
    emit(session.out, f"{len(denied)} worker(s) denied")
    return 0


async def type_deny_allow(session: Session, args: argparse.Namespace) -> int:
    """``type deny T ID`` / ``type allow T ID`` (``--force`` for a type not seen yet)."""
    manager = session.manager()
    agent_type: str = args.agent_type
    wid: str = args.worker_id
    deny = args.action == AdminAction.DENY
    if not await manager.worker_exists(wid):
        raise UnknownWorkerError(f"unknown worker: {wid}")
    real, denied = await manager.type_served(agent_type, wid)
    # Allowing a leftover denial is always fine: it is how a phantom type is cleaned up.
    if not real and not args.force and (deny or not denied):
        snapshot = await session.reader(history_limit=1, events_limit=1).read()
        known = ", ".join(sorted(t.name for t in snapshot.types)[:20]) or "none"
        raise NotFoundError(
            f"unknown agent type: {agent_type} (no worker declares it; known: {known}); "
            f"--force {args.action}s it anyway"
        )
    verb = AdminAction.DENY if deny else AdminAction.ALLOW
    result = await manager.apply(verb, wid, agent_type=agent_type, reason=args.reason)
    assert isinstance(result, ActionResult)  # a deny / allow writes one worker
    what = f"{args.action} {safe_text(wid, 80)} for {safe_text(agent_type, 80)}"
    return await _report(session, args, result, what)


# -- type pause / resume ----------------------------------------------------------------


async def type_pause(session: Session, args: argparse.Namespace) -> int:
    """``type pause T`` / ``type resume T`` (``--wait``: until every worker reports it)."""
    manager = session.manager()
    agent_type: str = args.agent_type
    pause = args.action == "pause"
    if pause and not args.force and not await manager.type_known(agent_type):
        raise NotFoundError(
            f"unknown agent type: {agent_type} (nothing declares it or has its stream); "
            "--force pauses it anyway"
        )
    action = AdminAction.PAUSE_TYPE if pause else AdminAction.RESUME_TYPE
    result = await manager.apply(action, agent_type=agent_type, reason=args.reason)
    assert isinstance(result, TypePauseResult)  # a type verb writes every worker of it
    latency: float | None = None
    waits = [r.worker_id for r in result.confirmable]
    confirmed: list[str] = []
    if args.wait:
        seen = await manager.wait_type_applied(result, args.timeout)
        confirmed = [w for w, lat in seen.items() if lat is not None]
        waits = [w for w, lat in seen.items() if lat is None]
        if confirmed and not waits:
            latency = max(lat for lat in seen.values() if lat is not None)
    denylisted = [r.worker_id for r in result.unconfirmable]
    if not args.wait:
        state = "pending" if waits else "applied"
    elif waits:
        state = "timeout"
    else:
        state = "applied"
    if args.json:
        print_json(
            {
                "type": agent_type,
                "action": result.action.value,
                "paused": pause,
                "was_paused": result.was_paused,
                "updated_at": result.updated_at,
                "reason": args.reason or "",
                "by": manager.operator,
                "state": state,
                "latency_s": latency,
                "confirmed": confirmed,
                "pending": waits,
                "denylisted": list(result.denylisted),
                "unconfirmable": denylisted,
                "kept_denied": list(result.kept),
                "offline": list(result.offline),
                "note": verb(action).stand_in if denylisted or result.denylisted else "",
            }
        )
    else:
        _print_pause(session, args, result, state, confirmed, waits, latency)
    if state == "timeout":
        fail(
            session,
            f"check failed: {len(waits)} worker(s) did not report the "
            f"{args.action} within {args.timeout:g} s: {', '.join(waits[:10])}",
        )
        return 1
    if args.wait and denylisted:
        return EXIT_UNCONFIRMABLE
    return 0


def _print_pause(
    session: Session,
    args: argparse.Namespace,
    result: TypePauseResult,
    state: str,
    confirmed: list[str],
    waits: list[str],
    latency: float | None,
) -> None:
    """The text report of a pause / resume: who applied it, who was denylisted."""
    said = verb(result.action)  # the verb table's sentences for its outcome
    name = safe_text(result.agent_type, 80)
    why = f" ({safe_text(args.reason, 200)})" if args.reason else ""
    if args.action == "resume" and not result.was_paused:
        emit(session.out, f"resume {name}: it was not paused; resume sent anyway")
    else:
        emit(session.out, f"{args.action} {name}: written{why}")

    def ids(values: Sequence[str]) -> str:
        shown = ", ".join(safe_text(v, 80) for v in values[:10])
        return shown + (f" (+{len(values) - 10})" if len(values) > 10 else "")

    ours = [r.worker_id for r in result.confirmable]
    if state == "applied" and ours:
        took = f" in {latency * 1000:.0f} ms" if latency is not None else ""
        line = f"  applied by every worker_runtime worker{took}: {ids(confirmed or ours)}"
        emit(session.out, [(line, ansi_style("success"))])
    elif state == "timeout":
        emit(session.out, f"  not reported within {args.timeout:g} s: {ids(waits)}")
    elif ours:
        emit(session.out, f"  {ids(ours)}: {said.underway_for(wait_hint=True)}")
    else:
        emit(session.out, "  no live worker_runtime worker serves it")
    if result.unconfirmable:
        how = "denylisted" if args.action == "pause" else "taken off the denylist"
        emit(session.out, f"  {how}: {ids([r.worker_id for r in result.unconfirmable])}")
        emit(session.out, f"    {said.stand_in}")
    elif result.denylisted and args.action == "resume":
        emit(session.out, f"  taken off the denylist: {ids(list(result.denylisted))}")
    if result.kept:
        emit(session.out, f"  already denied by hand, left as is: {ids(list(result.kept))}")
    if result.offline:
        emit(
            session.out,
            f"  offline: {ids(list(result.offline))} (a worker_runtime worker reads the "
            "pause when it starts; a by-framework one is not denylisted)",
        )


# -- scale ------------------------------------------------------------------------------


async def scale(session: Session, args: argparse.Namespace) -> int:
    """``scale T N [--instance ID]``."""
    agent_type: str = args.agent_type
    instance: str | None = args.instance
    check_scale_count(args.count)  # before any Redis call: a bad count is a usage error
    before = await session.reader(history_limit=1, events_limit=1).read()
    if not args.force:
        if before.type(agent_type) is None:
            known = ", ".join(sorted(t.name for t in before.types)[:20]) or "none"
            raise NotFoundError(
                f"unknown agent type: {agent_type} (known: {known}); --force sets it anyway"
            )
        if instance is not None and instance not in {i.instance_id for i in before.instances}:
            raise NotFoundError(f"unknown instance: {instance}; --force sets it anyway")
    steps = plan_scale(before, agent_type, instance, args.count)
    nothing_scales = unscalable(before, agent_type, instance)
    if nothing_scales and not args.force:
        raise RefusedError(f"{nothing_scales} (--force writes the target anyway)")
    manager = session.manager()
    result = await manager.apply(
        AdminAction.SCALE,
        agent_type=agent_type,
        instance_id=instance,
        count=args.count,
        reason=args.reason,
    )
    assert isinstance(result, ActionResult)  # a scale writes one target
    latency: float | None = None
    after: FleetSnapshot | None = None
    if args.wait:
        latency, after = await wait_converged(
            session.reader(history_limit=1, events_limit=1).read,
            agent_type,
            instance,
            result.updated_at,
            args.timeout,
        )
    if after is None:
        after = await session.reader(history_limit=1, events_limit=1).read()
    serving = [
        i
        for i in after.instances
        if i.online and serves(i, agent_type) and (instance is None or i.instance_id == instance)
    ]
    lagging = unconverged(after, agent_type, instance)
    state = "converged" if not lagging else ("timeout" if args.wait else "pending")
    if nothing_scales and not serving:
        state = "unscalable"
    notes = {i.instance_id: i.scale_note for i in after.instances if i.scale_note}
    if args.json:
        print_json(
            {
                "type": agent_type,
                "instance": instance,
                "count": args.count,
                "updated_at": result.updated_at,
                "plan": [
                    {"instance": p.instance_id, "running": p.running, "quota": p.after}
                    for p in steps
                ],
                "state": state,
                **({"unscalable": nothing_scales} if state == "unscalable" else {}),
                "latency_s": latency,
                "quotas": {i.instance_id: i.quota.get(agent_type) for i in serving},
                "replicas": {i.instance_id: i.replicas.get(agent_type, 0) for i in serving},
                "notes": notes,
            }
        )
    else:
        where = f" on {safe_text(instance, 80)}" if instance else ""
        head = f"scale {safe_text(agent_type, 80)}{where} to {args.count}: written"
        emit(session.out, head)
        emit(session.out, "  will:" if steps else "  will: no live instance serves it")
        for step in steps:
            emit(session.out, f"    {step.describe()}")
        for line in plan_outcomes(steps):
            emit(session.out, f"    {line}")
        if instance is not None:
            emit(session.out, "    other instances are left unchanged")
        if state == "unscalable":
            note = f"target written, nothing runs it: {nothing_scales}"
        elif state == "converged" and latency is not None:
            note = f"converged in {latency * 1000:.0f} ms"
        elif state == "converged":
            note = "already converged"
        elif state == "timeout":
            note = f"not converged within {args.timeout:g} s"
        else:
            note = verb(AdminAction.SCALE).underway_for(wait_hint=True)
        emit(
            session.out,
            [(f"  did: {note}", ansi_style("success") if state == "converged" else "")],
        )
        for i in serving:
            quota = i.quota.get(agent_type)
            emit(
                session.out,
                f"    {safe_text(i.instance_id, 80)}: {i.replicas.get(agent_type, 0)} running"
                + ("" if quota is None else f", quota {quota}")
                + (f" ({safe_text(notes[i.instance_id], 200)})" if i.instance_id in notes else ""),
            )
    if state == "timeout":
        fail(session, f"check failed: scale not converged within {args.timeout:g} s")
        return 1
    return 0


# -- metrics ------------------------------------------------------------------------------


async def metrics_snapshot(session: Session, args: argparse.Namespace) -> int:
    """``metrics snapshot``: live figures computed from the fleet."""
    reader = session.reader(history_limit=1, events_limit=1)
    snapshot = await reader.read()
    metrics = snapshot.metrics
    if args.json:
        from byconsole.headless.metrics_doc import metrics_document

        print_json(metrics_document(snapshot, await reader.read_observability(snapshot)))
    else:
        emit(session.out, metrics_summary(metrics))
        ex, slo = snapshot.executions, snapshot.slo
        lines = [
            f"  Tasks (last {slo.window}):    completed {ex.completed} · failed {ex.failed}"
            f" · cancelled {ex.cancelled} · success {ex.success_ratio:.2%}"
            f" (burn rate {slo.burn_rate})",
            f"  Latency p50/p95:    queue {ex.queue.p50_ms}/{ex.queue.p95_ms} ms"
            f" · run {ex.run.p50_ms}/{ex.run.p95_ms} ms"
            f" · total {ex.total.p50_ms}/{ex.total.p95_ms} ms",
            f"  Alerts:             {len(snapshot.alerts)}",
        ]
        lines += [
            f"    {a.severity} {a.code} {safe_text(a.subject, 80)}: {safe_text(a.message, 300)}"
            for a in snapshot.alerts
        ]
        emit(session.out, "\n".join(lines))
    return 0


async def metrics_history(session: Session, args: argparse.Namespace) -> int:
    """``metrics history [--range R] [--limit N]``: our points over the range, oldest
    first, and other collectors' points of the shared history apart (never mixed)."""
    limit = args.limit if args.limit is not None or args.history_range else 20
    read = await session.reader().read_metrics_history(
        limit, history_range=args.history_range or DEFAULT_RANGE
    )
    if args.json:
        print_json(read.model_dump(mode="json"))
        return 0
    where = f"tier {read.tier}" if read.tier else "the shared history"
    if read.points:
        emit(session.out, history_table(read.points))
        emit(
            session.out,
            f"{len(read.points)} point(s) over {read.history_range}, from {where}",
        )
    else:
        emit(
            session.out,
            f"no metrics history over {read.history_range} yet (the leader's collector writes it)",
        )
    for source in sorted({p.source or "unknown" for p in read.foreign}):
        theirs = [p for p in read.foreign if (p.source or "unknown") == source]
        title = (
            f"Written by another collector: {safe_text(source, 40)}"
            f" (depth = {depth_definition(source)})"
        )
        emit(session.out, history_table(theirs, title))
    return 0


# -- dead letters ----------------------------------------------------------------------------


def _dead(session: Session) -> DeadLetters:
    return DeadLetters(session.redis, session.keys, session.manager().operator)


def _dead_doc(dead: DeadLetter) -> dict[str, Any]:
    return {
        "source": dead.source,
        "id": dead.entry_id,
        "type": dead.agent_type,
        "task_id": dead.task_id,
        "error": dead.error,
        "attempts": dead.attempts,
        "worker_id": dead.worker_id,
        "buried_at": dead.buried_at,
        "payload": dead.payload,
        # A listing reads excerpts (README "Dead letters"): says when the payload is cut.
        "payload_cut": dead.payload_cut,
        "stored_bytes": dead.stored_bytes,
    }


async def dead_list(session: Session, args: argparse.Namespace) -> int:
    """``dead list T``: newest first, with the error and a payload excerpt."""
    if args.agent_type is None:
        return await _dead_list_all(session, args)
    dl = _dead(session)
    items = await dl.newest(args.agent_type, args.limit)
    total = await dl.count(args.agent_type)
    # No dead letters and a name nothing knows: a typo, refused as ``--type`` refuses it.
    if not total and not await session.manager().type_known(args.agent_type):
        raise NotFoundError(f"unknown agent type: {safe_text(args.agent_type, 120)}")
    if args.json:
        print_json({"type": args.agent_type, "total": total, "dead": [_dead_doc(d) for d in items]})
        return 0
    emit(session.out, dead_table(items, now_ms()))
    shown = f"{len(items)} of {total}" if total > len(items) else f"{total}"
    emit(session.out, f"{shown} dead letter(s) of {safe_text(args.agent_type, 80)}")
    return 0


async def _dead_list_all(session: Session, args: argparse.Namespace) -> int:
    """``dead list``: every type's newest ``--limit``, then by-framework's control plane.

    The types are the fleet snapshot's that have dead letters: the ones the console and
    ``--snapshot`` know (no keyspace scan).
    """
    dl = _dead(session)
    snapshot = await session.reader().read()
    by_type = await dl.newest_of(sorted(t.name for t in snapshot.types if t.dead), args.limit)
    cp_total, cp_items = await dl.control_plane(args.limit)
    if args.json:
        print_json(
            {
                "total": sum(total for total, _ in by_type.values()),
                "types": [
                    {"type": t, "total": total, "dead": [_dead_doc(d) for d in items]}
                    for t, (total, items) in sorted(by_type.items())
                ],
                "control_plane": {
                    "stream": session.keys.control_plane_dead_letters,
                    "read_only": True,
                    "total": cp_total,
                    "dead": [_dead_doc(d) for d in cp_items],
                },
            }
        )
        return 0
    now = now_ms()
    for agent_type, (total, items) in sorted(by_type.items()):
        shown = f"{len(items)} of {total}" if total > len(items) else f"{total}"
        emit(session.out, [(f"{safe_text(agent_type, 80)}: {shown} dead letter(s)", "bold")])
        emit(session.out, dead_table(items, now))
    if cp_total:
        shown = f"{len(cp_items)} of {cp_total}" if cp_total > len(cp_items) else f"{cp_total}"
        title = f"by-framework control plane (read-only): {shown} dead letter(s)"
        emit(session.out, [(title, "bold")])
        emit(session.out, dead_table(cp_items, now))
    total = sum(t for t, _ in by_type.values())
    emit(
        session.out,
        f"{total} dead letter(s) over {len(by_type)} type(s)"
        f" · {cp_total} in by-framework's control plane",
    )
    return 0


async def dead_show(session: Session, args: argparse.Namespace) -> int:
    """``dead show T ID``: one dead letter, every field (made safe)."""
    dead = await _dead(session).get(args.agent_type, args.entry_id)
    if dead is None:
        raise NotFoundError(f"no dead letter {args.entry_id} in {args.agent_type}")
    cut: int | None = getattr(args, "cut", None)
    if args.json:
        doc = {**_dead_doc(dead), "fields": dead.fields}
        if cut is not None and len(dead.payload) > cut:
            doc.update(
                payload=dead.payload[:cut], payload_cut=True, payload_chars=len(dead.payload)
            )
        print_json(doc)
        return 0
    emit(session.out, dead_detail(dead))
    # The payload whole unless --cut: written in pieces, escaped piece by piece, so a
    # 50 MB payload is never one renderable (README "Dead letters").
    write_payload(session.out.file, dead.payload, cut)
    return 0


async def dead_write(session: Session, args: argparse.Namespace) -> int:
    """``dead requeue|purge T (ID… | --all) --reason R``."""
    agent_type: str = args.agent_type
    if bool(args.entry_ids) == bool(args.all):
        raise RefusedError("name the dead letters (ID …) or pass --all, not both")
    reason = (args.reason or "").strip()
    if not reason:
        raise RefusedError("--reason must say why (it goes to the audit stream)")
    dl = _dead(session)
    ids: list[str] | None = None if args.all else list(args.entry_ids)
    if ids is not None:
        missing = await dl.missing(agent_type, ids)
        if missing:
            raise NotFoundError(f"no dead letter {', '.join(missing[:5])} in {agent_type}")
    if args.action == "requeue":
        done = await dl.requeue(agent_type, ids, reason)
        count = len(done)
        note = f"requeued {count} to {safe_text(agent_type, 80)}'s stream (attempts reset)"
    else:
        count = await dl.purge(agent_type, ids, reason)
        note = f"purged {count} dead letter(s) of {safe_text(agent_type, 80)}"
    left = await dl.count(agent_type)
    if args.json:
        print_json({"type": agent_type, "action": args.action, "count": count, "left": left})
    else:
        emit(session.out, f"{note} · {left} left · audited")
    return 0


# -- pending entries -------------------------------------------------------------------------


def _pending(session: Session) -> PendingEntries:
    return PendingEntries(session.redis, session.keys, session.manager().operator)


def _pending_doc(entry: PendingEntry) -> dict[str, Any]:
    return {
        "id": entry.entry_id,
        "group": entry.group,
        "consumer": entry.consumer,
        "owner_online": entry.owner_online,
        "idle_ms": entry.idle_ms,
        "deliveries": entry.deliveries,
        "kind": entry.kind,
        "task_id": entry.task_id,
        "session_id": entry.session_id,
        "action_type": entry.action_type,
        "attempt": entry.attempt,
        "payload": entry.payload,
        "payload_cut": entry.payload_cut,
    }


async def type_pending(session: Session, args: argparse.Namespace) -> int:
    """``type pending T``: the type's pending entries, longest idle first."""
    page = await _pending(session).page(args.agent_type, args.limit, args.cursor)
    entries = sorted(page.entries, key=lambda e: e.idle_ms, reverse=True)
    if args.json:
        print_json(
            {
                "type": page.agent_type,
                "groups": page.groups,
                "total": page.total,
                "next_cursor": page.next_cursor,
                "pending": [_pending_doc(e) for e in entries],
            }
        )
        return 0
    name = safe_text(args.agent_type, 80)
    if entries:
        emit(session.out, pending_table(entries))
    groups = ", ".join(safe_text(g, 60) for g in page.groups) or "none"
    shown = f"{len(entries)} of {page.total}" if page.total > len(entries) else f"{page.total}"
    noun = "entry" if page.total == 1 else "entries"
    emit(session.out, f"{shown} {noun} pending in {name} · group(s): {groups}")
    if page.next_cursor is not None:
        emit(session.out, f"next page: --cursor {safe_text(page.next_cursor, 200)!r}")
    return 0


async def type_dead_letter(session: Session, args: argparse.Namespace) -> int:
    """``type dead-letter T ENTRY_ID --reason R``: copy to the dead letters, then ack."""
    reason = (args.reason or "").strip()
    if not reason:
        raise RefusedError("--reason must say why (it goes to the dead letter and the audit)")
    try:
        done = await _pending(session).dead_letter(
            args.agent_type, args.entry_id, reason, args.group
        )
    except NotPendingError as exc:
        raise NotFoundError(str(exc)) from None
    if args.json:
        print_json(
            {
                "type": done.agent_type,
                "id": done.entry_id,
                "group": done.group,
                "consumer": done.consumer,
                "deliveries": done.deliveries,
                "dead_letter_id": done.dead_letter_id,
                "reason": reason,
            }
        )
        return 0
    emit(
        session.out,
        f"dead-lettered {safe_text(done.entry_id, 40)} of {safe_text(done.agent_type, 80)} "
        f"(group {safe_text(done.group, 60)}, owner {safe_text(done.consumer, 60)}, "
        f"{done.deliveries} deliveries) as {safe_text(done.dead_letter_id, 40)} · audited",
    )
    return 0


# -- contexts -------------------------------------------------------------------------------


# -- find / session -----------------------------------------------------------------------


async def find(session: Session, args: argparse.Namespace) -> int:
    """``find ID``: what the id is, where it was found, its state and timings."""
    result = await Lookup(session.redis, session.keys).find(args.lookup_id)
    if not result.found:
        raise NotFoundError(
            f"unknown id: {safe_text(args.lookup_id, 120)} (no task, execution, "
            "message, session or trace has it)"
        )
    if args.json:
        print_json(result.json_document())
        return 0
    emit(session.out, find_view(result, now_ms()))
    return 0


async def session_timeline(session: Session, args: argparse.Namespace) -> int:
    """``session ID``: the session's executions in order, with waits and traces."""
    timeline = await Lookup(session.redis, session.keys).session(args.session_id)
    if not timeline.found:
        raise NotFoundError(f"unknown session: {safe_text(args.session_id, 120)}")
    if args.json:
        print_json(timeline_document(timeline))
        return 0
    emit(session.out, session_view(timeline, now_ms()))
    return 0


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
        emit(out, f"no contexts defined ({path})")
        return 0
    emit(out, contexts_table(contexts, default))
    emit(out, f"{len(contexts)} context(s) in {path}")
    return 0
