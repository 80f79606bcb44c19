"""Everything the console does with Redis, behind one small interface.

The app's poll worker calls :meth:`Backend.read`; the action worker calls
:meth:`Backend.send` and :meth:`Backend.confirm`. Views, widgets and screens never see a
Redis client: they get :class:`~worker_runtime.snapshot.FleetSnapshot` objects.

:class:`StaticBackend` serves a fixed snapshot (snapshot tests, screenshots of a frozen
fleet); it has no Redis and refuses actions.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any, Protocol

from byconsole import memory
from byconsole.outcomes import running_line, wait_converged
from byconsole.text import safe_text
from byconsole.tui.actions import (
    DEAD_ACTIONS,
    PENDING_ACTIONS,
    TYPE_ACTIONS,
    Action,
    ActionOutcome,
    ActionRequest,
)
from byconsole.web.identity import web_user
from worker_runtime.admin import (
    ActionResult,
    IncompleteRequestError,
    TypePauseResult,
    UnknownWorkerError,
    UnsupportedCommandError,
    WorkerManager,
)
from worker_runtime.connection import (
    LOOP_ERRORS,
    create_redis,
    not_redis_server,
    sentinel_detail,
)
from worker_runtime.dead_letters import DeadLetter, DeadLetters
from worker_runtime.fleet import FleetReader
from worker_runtime.health import HealthPolicy
from worker_runtime.lookup import Lookup, LookupResult, SessionTimeline
from worker_runtime.models import TypeConfig
from worker_runtime.pending import NotPendingError, PendingEntries, PendingPage
from worker_runtime.redact import redact
from worker_runtime.restarts import RestartOutcome, RestartResult, RestartState
from worker_runtime.settings import RedisSettings
from worker_runtime.snapshot import FleetSnapshot, MetricsView, WorkerDetail, WorkerView
from worker_runtime.type_config import ConfigChange, ConfigOutcome

# redis-py's cluster client can raise more than RedisError mid-failover (see
# worker_runtime.connection.LOOP_ERRORS); an action must report it, not vanish.
ROLLING_STEP_TIMEOUT = 60.0
"""How long a rolling restart waits for one replica's replacement before it halts that
instance (the replica finishes its tasks first)."""

_WAIT_ERRORS: tuple[type[Exception], ...] = (*LOOP_ERRORS, TimeoutError)
_ACTION_ERRORS: tuple[type[Exception], ...] = (*_WAIT_ERRORS, ValueError)

READ_TIMEOUT = 8.0
"""Seconds a refresh may take before the console calls Redis slow and shows it."""

SEND_DEADLINE = 8.0
"""Seconds an action's writes may take, all targets together (they go concurrently):
then the console reports every target, the unanswered ones as ``timeout`` (their writes
go on, and each is reported when Redis answers it)."""

Progress = Callable[[int, int], None]
"""Called as targets' writes end: ``(ended, total)``."""


class Backend(Protocol):
    """What the console needs from a fleet."""

    endpoint: str
    """Where the data comes from, safe to show (password masked)."""

    async def read(self) -> FleetSnapshot:
        """One snapshot of the fleet; raises on outage."""
        ...

    async def read_detail(self, worker_id: str) -> WorkerDetail:
        """One worker in depth; raises on outage."""
        ...

    async def send(
        self, request: ActionRequest, progress: Progress | None = None
    ) -> list[ActionOutcome]:
        """Write an action for every target; never raises (errors are outcomes).

        The targets are written concurrently and the whole action is bounded
        (:data:`SEND_DEADLINE`); ``progress`` hears of each target's write ending.
        """
        ...

    async def confirm(self, outcome: ActionOutcome, timeout: float) -> ActionOutcome:
        """Wait until the worker confirms a sent action (``latency`` set) or time out."""
        ...

    async def read_dead(self, agent_types: list[str], limit: int) -> list[DeadLetter]:
        """The newest ``limit`` dead letters of each type, newest first, and as many of
        by-framework's control-plane dead letters (read-only); raises on outage."""
        ...

    async def read_pending(self, agent_type: str, limit: int) -> PendingPage:
        """The first ``limit`` pending entries of a type over every group; raises on outage."""
        ...

    async def find(self, lookup_id: str) -> LookupResult:
        """What an id is (task, execution, message, session, trace); raises on outage."""
        ...

    async def read_session(self, session_id: str) -> SessionTimeline:
        """A session's executions in order and its traces; raises on outage."""
        ...

    def rolling_restart(self, request: ActionRequest) -> AsyncIterator[RestartOutcome]:
        """A rolling restart's progress events (:meth:`WorkerManager.rolling_restart`,
        the ones the CLI prints); raises on outage or a refused request."""
        ...

    async def read_config(self, agent_type: str) -> TypeConfig:
        """A type's stored runtime configuration; raises on outage."""
        ...

    async def set_config(
        self,
        agent_type: str,
        values: Mapping[str, Any],
        unset: Sequence[str],
        reason: str | None,
    ) -> ConfigChange:
        """Write keys of a type's configuration through :meth:`WorkerManager.apply`;
        raises ``TypeConfigError`` (refused, nothing written) or on outage."""
        ...

    async def config_reports(self, change: ConfigChange) -> dict[str, ConfigOutcome]:
        """Each live replica's report on ``change`` now (one read, no wait)."""
        ...

    def set_history_range(self, history_range: str) -> None:
        """The metrics range the next reads carry (a name of ``history.RANGES``)."""
        ...

    def describe(self, exc: BaseException) -> str:
        """One display-safe line for an error, never containing a password."""
        ...

    async def aclose(self) -> None:
        """Release connections."""
        ...


def _describe(exc: BaseException, url: str | None) -> str:
    if not_redis_server(exc):
        return "that URL is not a Redis server (it does not answer in the Redis protocol)"
    # A Sentinel lookup's message is the repr of every sentinel client: its gist instead.
    text = sentinel_detail(exc) or str(exc) or type(exc).__name__
    if isinstance(exc, TimeoutError) and not str(exc):
        text = "timed out"
    return safe_text(f"{type(exc).__name__}: {redact(text, url)}", limit=160)


async def send_each(
    targets: list[str],
    send_one: Callable[[str], Awaitable[ActionOutcome]],
    deadline: float,
    progress: Progress | None = None,
) -> list[ActionOutcome]:
    """Send to every target at once and return, in order, what each came to by ``deadline``.

    ``send_one`` never raises (an error is its outcome). A target Redis has not
    answered by then is ``timeout``: its write is not cancelled (it may be in Redis's
    socket already, and would apply unseen), it goes on as the outcome's ``later`` task,
    whose own outcome the console reports when Redis answers or the socket times out.
    """
    tasks = [asyncio.ensure_future(send_one(target)) for target in targets]
    ended = 0
    open_ = True

    def tick(_: object) -> None:
        nonlocal ended
        ended += 1
        if progress is not None and open_:
            progress(ended, len(tasks))

    if progress is not None:
        progress(0, len(tasks))
    for task in tasks:
        task.add_done_callback(tick)
    started = time.monotonic()
    if tasks:
        await asyncio.wait(tasks, timeout=deadline)
    open_ = False
    waited = time.monotonic() - started
    outcomes: list[ActionOutcome] = []
    for target, task in zip(targets, tasks, strict=True):
        if task.done():
            outcomes.append(task.result())
            continue
        outcomes.append(
            ActionOutcome(
                target,
                sent=False,
                error=f"no reply from Redis within {waited:.0f} s (still trying)",
                later=task,
            )
        )
    return outcomes


class RedisBackend:
    """A live fleet behind one Redis (or cluster) connection.

    Args:
        settings: the endpoint; the client does not retry internally (``retries=0``)
            so an outage surfaces at once and the app's backoff decides when to retry.
        read_timeout: seconds before a slow refresh is abandoned and reported.
        policy: alert thresholds (the context's); by-framework's defaults when None.
        deadline: seconds an action's writes may take together (:data:`SEND_DEADLINE`).
    """

    def __init__(
        self,
        settings: RedisSettings,
        *,
        read_timeout: float = READ_TIMEOUT,
        policy: HealthPolicy | None = None,
        deadline: float = SEND_DEADLINE,
    ) -> None:
        self.settings = settings
        self.endpoint = settings.endpoint
        self.read_timeout = read_timeout
        self.deadline = deadline
        self.redis = create_redis(settings, retries=0)
        self.reader = FleetReader(
            self.redis,
            settings.keys,
            endpoint=settings.endpoint,
            freeze_from=memory.FREEZE_FROM,
            policy=policy,
        )
        # A browser session's console names its web user in the audit (byconsole serve).
        self.manager = WorkerManager(self.redis, settings.keys, web_user=web_user())

    async def read(self) -> FleetSnapshot:
        """One snapshot; raises ``RedisError`` / ``OSError`` / ``TimeoutError``."""
        async with asyncio.timeout(self.read_timeout):
            return await self.reader.read()

    async def read_detail(self, worker_id: str) -> WorkerDetail:
        """One worker in depth."""
        async with asyncio.timeout(self.read_timeout):
            return await self.reader.read_worker_detail(worker_id)

    def set_history_range(self, history_range: str) -> None:
        """The next read fetches that range of our history whole, later ones its news."""
        self.reader.set_history_range(history_range)

    async def read_dead(self, agent_types: list[str], limit: int) -> list[DeadLetter]:
        """The newest ``limit`` dead letters of each type, newest first."""
        dead = DeadLetters(self.redis, self.settings.keys, self.manager.operator)
        async with asyncio.timeout(self.read_timeout):
            found = [d for t in agent_types for d in await dead.newest(t, limit)]
            found += (await dead.control_plane(limit))[1]
        return sorted(found, key=lambda d: d.buried_at or 0, reverse=True)

    async def read_pending(self, agent_type: str, limit: int) -> PendingPage:
        """The first ``limit`` pending entries of a type (four round trips: excerpts)."""
        pending = PendingEntries(self.redis, self.settings.keys, self.manager.operator)
        async with asyncio.timeout(self.read_timeout):
            return await pending.page(agent_type, limit)

    async def find(self, lookup_id: str) -> LookupResult:
        """What an id is, in a constant number of round trips (:class:`Lookup`)."""
        async with asyncio.timeout(self.read_timeout):
            return await Lookup(self.redis, self.settings.keys).find(lookup_id)

    async def read_session(self, session_id: str) -> SessionTimeline:
        """A session's timeline."""
        async with asyncio.timeout(self.read_timeout):
            return await Lookup(self.redis, self.settings.keys).session(session_id)

    async def send(
        self, request: ActionRequest, progress: Progress | None = None
    ) -> list[ActionOutcome]:
        """Write the action for each target through :class:`WorkerManager`.

        Workers are written concurrently, under one deadline for them all
        (:func:`send_each`): five targets behind a partition take one deadline, not five
        socket timeouts in a row.
        """
        if request.action is Action.SCALE:
            return await send_each(
                list(request.targets[:1]),
                lambda _: self._send_scale(request),
                self.deadline,
                progress,
            )
        if request.action in TYPE_ACTIONS:
            return await self._send_type(request)
        if request.action in PENDING_ACTIONS:
            return [await self._send_dead_letter(request)]
        if request.action in DEAD_ACTIONS:
            return [await self._send_dead(request)]
        if request.action is Action.RESTART:
            return await send_each(
                list(request.worker_ids),
                lambda w: self._send_restart(request, w),
                self.deadline,
                progress,
            )
        return await send_each(
            list(request.worker_ids),
            lambda w: self._send_one(request, w),
            self.deadline,
            progress,
        )

    async def _send_restart(self, request: ActionRequest, worker_id: str) -> ActionOutcome:
        """Restart one replica (README, "Restart, stop and pinned calls"); refused before
        anything is written for a worker that cannot restart (the reason is the error)."""
        try:
            result = await self.manager.apply(Action.RESTART, worker_id, reason=request.reason)
        except (UnknownWorkerError, UnsupportedCommandError) as exc:
            return ActionOutcome(
                worker_id, sent=False, error=safe_text(str(exc), limit=200), refused=True
            )
        except _ACTION_ERRORS as exc:
            return ActionOutcome(worker_id, sent=False, error=self.describe(exc))
        assert isinstance(result, RestartResult)  # a restart writes one replica
        return ActionOutcome(worker_id, sent=True, restart=result)

    async def confirm_restart(self, outcome: ActionOutcome, timeout: float) -> ActionOutcome:
        """Wait until the restarted replica's replacement holds a lease; ``note`` is the
        outcome's line (``w: replaced as w2 in 1.2 s``, or what is still missing)."""
        if outcome.restart is None:
            return outcome
        try:
            done = await self.manager.wait_restarted(outcome.restart, timeout=timeout)
        except _WAIT_ERRORS as exc:
            return replace(outcome, error=self.describe(exc))
        line = safe_text(done.line, limit=300)
        if done.state is RestartState.REPLACED:
            return replace(outcome, latency=done.latency or 0.0, note=line)
        return replace(outcome, note=line)

    async def rolling_restart(self, request: ActionRequest) -> AsyncIterator[RestartOutcome]:
        """The progress events of a rolling restart of the request's type / instance."""
        async for outcome in self.manager.rolling_restart(
            request.agent_type,
            instance_id=request.instance_id,
            max_unavailable=request.max_unavailable,
            reason=request.reason,
            timeout=ROLLING_STEP_TIMEOUT,
        ):
            yield outcome

    async def read_config(self, agent_type: str) -> TypeConfig:
        """The stored configuration (version 0 and empty when never set)."""
        return await self.manager.get_type_config(agent_type)

    async def set_config(
        self,
        agent_type: str,
        values: Mapping[str, Any],
        unset: Sequence[str],
        reason: str | None,
    ) -> ConfigChange:
        """The one dispatch writes it (validated by the runtime, audited with the diff)."""
        change = await self.manager.apply(
            Action.CONFIG_SET, agent_type=agent_type, values=values, unset=unset, reason=reason
        )
        assert isinstance(change, ConfigChange)  # a config set writes the type's configuration
        return change

    async def config_reports(self, change: ConfigChange) -> dict[str, ConfigOutcome]:
        """One read of the replicas' reports (``wait_config`` with no wait)."""
        return await self.manager.wait_config(change, timeout=0)

    async def _send_scale(self, request: ActionRequest) -> ActionOutcome:
        target = request.targets[0]
        if request.agent_type is None or request.count is None:
            return ActionOutcome(target, sent=False, error="scale needs a type and a count")
        try:
            result = await self.manager.apply(
                Action.SCALE,
                agent_type=request.agent_type,
                instance_id=request.instance_id,
                count=request.count,
                reason=request.reason,
            )
        except _ACTION_ERRORS as exc:
            return ActionOutcome(target, sent=False, error=self.describe(exc))
        assert isinstance(result, ActionResult)  # a scale writes one target
        return ActionOutcome(
            target,
            sent=True,
            result=result,
            agent_type=request.agent_type,
            instance_id=request.instance_id,
        )

    async def _send_dead(self, request: ActionRequest) -> ActionOutcome:
        agent_type = request.agent_type
        target = request.targets[0]
        if agent_type is None:
            return ActionOutcome(target, sent=False, error="no type")
        dead = DeadLetters(self.redis, self.settings.keys, self.manager.operator)
        # Exactly the letters the dialog named: its frozen ids, or all up to its bound.
        ids = list(request.entry_ids) or None
        upto = request.upto
        try:
            if request.action is Action.DEAD_REQUEUE:
                count = len(await dead.requeue(agent_type, ids, request.reason, upto))
                note = f"{count} requeued to the {safe_text(agent_type, 30)} stream"
            else:
                count = await dead.purge(agent_type, ids, request.reason, upto)
                note = f"{count} dead letter(s) of {safe_text(agent_type, 30)} purged"
            left = await dead.count(agent_type)
            late = await dead.count_newer(agent_type, upto) if upto else 0
        except _ACTION_ERRORS as exc:
            return ActionOutcome(target, sent=False, error=self.describe(exc))
        if upto and count < request.shown:
            note += f" (of the {request.shown:,} shown: the rest were already gone)"
        if late:
            note += f"; {late:,} arrived after the dialog opened, left untouched"
        return ActionOutcome(
            target,
            sent=True,
            agent_type=agent_type,
            note=f"{note}; {left} left",
        )

    async def _send_type(self, request: ActionRequest) -> list[ActionOutcome]:
        """Pause / resume a type: one outcome per live worker, each confirmed on its own.

        A worker_runtime worker confirms by its lease's ``paused_types``; a by-framework
        one was denylisted instead and confirms nothing. With no live worker, one
        outcome for the type says so.
        """
        agent_type = request.agent_type or ""
        try:
            result = await self.manager.apply(
                request.action, agent_type=agent_type, reason=request.reason
            )
        except _ACTION_ERRORS as exc:
            return [ActionOutcome(agent_type, sent=False, error=self.describe(exc))]
        assert isinstance(result, TypePauseResult)  # a type verb writes every worker of it
        outcomes = [
            ActionOutcome(r.worker_id, sent=True, result=r, agent_type=agent_type)
            for r in result.results
        ]
        if not outcomes:
            verb = "paused" if request.action is Action.PAUSE_TYPE else "resumed"
            note = f"{verb}; no live worker serves it (new workers read it when they start)"
            return [ActionOutcome(agent_type, sent=True, agent_type=agent_type, note=note)]
        return outcomes

    async def _send_dead_letter(self, request: ActionRequest) -> ActionOutcome:
        agent_type = request.agent_type
        target = request.targets[0]
        if agent_type is None or len(request.entry_ids) != 1 or not request.reason:
            return ActionOutcome(target, sent=False, error="needs a type, one entry and a reason")
        pending = PendingEntries(self.redis, self.settings.keys, self.manager.operator)
        try:
            done = await pending.dead_letter(
                agent_type, request.entry_ids[0], request.reason, request.group
            )
        except NotPendingError as exc:
            return ActionOutcome(target, sent=False, error=safe_text(str(exc), limit=200))
        except _ACTION_ERRORS as exc:
            return ActionOutcome(target, sent=False, error=self.describe(exc))
        return ActionOutcome(
            target,
            sent=True,
            agent_type=agent_type,
            note=(
                f"moved to the {safe_text(agent_type, 30)} dead letters as "
                f"{safe_text(done.dead_letter_id, 30)} ({done.deliveries} deliveries, "
                f"owner {safe_text(done.consumer, 30)}); audited"
            ),
        )

    async def _send_one(self, request: ActionRequest, worker_id: str) -> ActionOutcome:
        try:
            result = await self.manager.apply(
                request.action, worker_id, agent_type=request.agent_type, reason=request.reason
            )
            if not isinstance(result, ActionResult):
                return ActionOutcome(worker_id, sent=False, error="incomplete request")
        except IncompleteRequestError:
            return ActionOutcome(worker_id, sent=False, error="incomplete request")
        except UnknownWorkerError:
            return ActionOutcome(worker_id, sent=False, error="unknown worker", refused=True)
        except UnsupportedCommandError as exc:  # drain to a by-framework worker
            return ActionOutcome(
                worker_id, sent=False, error=safe_text(str(exc), limit=160), refused=True
            )
        except _ACTION_ERRORS as exc:
            return ActionOutcome(worker_id, sent=False, error=self.describe(exc))
        return ActionOutcome(worker_id, sent=True, result=result, agent_type=request.agent_type)

    async def confirm(self, outcome: ActionOutcome, timeout: float) -> ActionOutcome:
        """Wait for the worker's confirmation in its lease.

        Lifecycle changes are confirmed by ``admin_applied_at`` (evictions by the lease
        disappearing); deny / allow by the lease's applied ``denied_types``; a scale by
        every instance serving the type running its quota (``note`` then says how many
        run where).
        """
        if outcome.restart is not None:
            return await self.confirm_restart(outcome, timeout)
        result = outcome.result
        if not outcome.sent or result is None or not result.online:
            return outcome
        if not result.confirmable:
            return outcome  # a by-framework worker never reports what it applied
        try:
            if result.action is Action.SCALE and outcome.agent_type is not None:
                latency, snapshot = await wait_converged(
                    self.read, outcome.agent_type, outcome.instance_id, result.updated_at, timeout
                )
                note = (
                    running_line(snapshot, outcome.agent_type, outcome.instance_id)
                    if snapshot is not None
                    else ""
                )
                return replace(outcome, latency=latency, note=note)
            waited = await self.manager.wait_outcome(result, timeout=timeout)
        except _WAIT_ERRORS as exc:
            return replace(outcome, error=self.describe(exc))
        if waited.superseded_line is not None:
            # Overtaken by a later write: never applied, so never reported as such.
            return replace(outcome, superseded=waited.superseded_line)
        if waited.latency is None and waited.progress:
            # An eviction not done in time: how far it got (applied · finishing 3 …).
            return replace(outcome, note=waited.progress)
        return replace(outcome, latency=waited.latency)

    def describe(self, exc: BaseException) -> str:
        """One display-safe line for an error (password replaced)."""
        return _describe(exc, self.settings.url)

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self.redis.aclose()


class StaticBackend:
    """A fixed fleet: every read returns the same snapshot; actions are refused.

    Args:
        snapshot: what :meth:`read` returns.
        details: what :meth:`read_detail` returns per worker id; a worker without an
            entry gets a detail built from its row in ``snapshot``.
        dead: the dead letters :meth:`read_dead` serves (by-framework's control-plane
            ones whatever the types asked).
        pending: the pending pages :meth:`read_pending` serves, by type.
        lookups: what :meth:`find` answers per id (others: not found).
        sessions: what :meth:`read_session` answers per session id (others: empty).
        histories: the metrics served per range (others: the snapshot's own).
    """

    def __init__(
        self,
        snapshot: FleetSnapshot,
        details: dict[str, WorkerDetail] | None = None,
        dead: list[DeadLetter] | None = None,
        pending: dict[str, PendingPage] | None = None,
        lookups: dict[str, LookupResult] | None = None,
        sessions: dict[str, SessionTimeline] | None = None,
        histories: dict[str, MetricsView] | None = None,
    ) -> None:
        self.snapshot = snapshot
        self.details = details or {}
        self.dead = list(dead or [])
        self.pending = dict(pending or {})
        self.lookups = lookups or {}
        self.sessions = sessions or {}
        self.histories = dict(histories or {})
        self.history_range = snapshot.metrics.history_range
        self.endpoint = snapshot.redis.endpoint or "static snapshot"

    async def read(self) -> FleetSnapshot:
        """The fixed snapshot (with the metrics of the range asked for, if given)."""
        metrics = self.histories.get(self.history_range)
        if metrics is None:
            return self.snapshot
        return self.snapshot.model_copy(update={"metrics": metrics})

    def set_history_range(self, history_range: str) -> None:
        """Serve that range's metrics from now on."""
        self.history_range = history_range

    async def read_detail(self, worker_id: str) -> WorkerDetail:
        """The fixed detail, or one made from the snapshot row."""
        if worker_id in self.details:
            return self.details[worker_id]
        view = self.snapshot.worker(worker_id)
        return WorkerDetail(
            worker_id=worker_id,
            known=view is not None,
            worker=view or WorkerView(worker_id=worker_id),
            declared_types=list(view.agent_types) if view else [],
            denied_types=list(view.denied_types) if view else [],
        )

    async def read_dead(self, agent_types: list[str], limit: int) -> list[DeadLetter]:
        """The fixed dead letters of those types, and the control plane's."""
        ours = [d for d in self.dead if not d.read_only and d.agent_type in agent_types]
        theirs = [d for d in self.dead if d.read_only][:limit]
        found = ours[: limit * len(agent_types)] + theirs
        return sorted(found, key=lambda d: d.buried_at or 0, reverse=True)

    async def read_pending(self, agent_type: str, limit: int) -> PendingPage:
        """The fixed page of the type (empty when none was given)."""
        page = self.pending.get(agent_type, PendingPage(agent_type=agent_type))
        return page.model_copy(update={"entries": page.entries[:limit]})

    async def find(self, lookup_id: str) -> LookupResult:
        """The fixed answer for the id, or not found."""
        return self.lookups.get(lookup_id) or LookupResult(query=lookup_id)

    async def read_session(self, session_id: str) -> SessionTimeline:
        """The fixed timeline, or an empty one."""
        return self.sessions.get(session_id) or SessionTimeline(session_id=session_id)

    async def send(
        self, request: ActionRequest, progress: Progress | None = None
    ) -> list[ActionOutcome]:
        """Refuse: a static snapshot has nothing to act on."""
        return [ActionOutcome(t, sent=False, error="static snapshot") for t in request.targets]

    async def confirm(self, outcome: ActionOutcome, timeout: float) -> ActionOutcome:
        """Nothing to wait for."""
        return outcome

    async def rolling_restart(self, request: ActionRequest) -> AsyncIterator[RestartOutcome]:
        """Refuse: a static snapshot has nothing to restart."""
        raise UnsupportedCommandError("static snapshot: nothing to restart")
        yield  # pragma: no cover  (an async generator, like the live one)

    async def read_config(self, agent_type: str) -> TypeConfig:
        """No configuration is stored in a static snapshot."""
        return TypeConfig()

    async def set_config(
        self,
        agent_type: str,
        values: Mapping[str, Any],
        unset: Sequence[str],
        reason: str | None,
    ) -> ConfigChange:
        """Refuse: a static snapshot has nothing to configure."""
        raise UnsupportedCommandError("static snapshot: nothing to configure")

    async def config_reports(self, change: ConfigChange) -> dict[str, ConfigOutcome]:
        """No replica reports."""
        return {}

    def describe(self, exc: BaseException) -> str:
        """One display-safe line for an error."""
        return _describe(exc, None)

    async def aclose(self) -> None:
        """Nothing to close."""
