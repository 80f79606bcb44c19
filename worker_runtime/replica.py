"""One worker replica: its lifecycle state machine and the tasks it runs.

The replica holds state only; the loops that feed it (``consumer``, ``control``,
``heartbeat``) and the Redis side of its presence (``registry``) live in their own
modules.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import logging
import os
import time
from collections.abc import Iterator
from typing import Any

from worker_runtime.connection import LOOP_ERRORS
from worker_runtime.context import RUNTIME_VERSION, RuntimeContext
from worker_runtime.envelope import (
    ATTEMPT_FIELD,
    Envelope,
    answer_item,
    client_record,
    is_terminal,
    new_execution_id,
)
from worker_runtime.health import enqueued_at
from worker_runtime.jsontext import safe_text
from worker_runtime.messages import entry_time_ms
from worker_runtime.models import (
    WORKER_RUNTIME_CAPABILITIES,
    AdminState,
    Command,
    CommandAction,
    ConfigReport,
    Execution,
    ExecutionState,
    Lease,
    Lifecycle,
    RuntimeStatus,
    Task,
    now_ms,
)
from worker_runtime.records import RecordReader

log = logging.getLogger(__name__)


class Replica:
    """A consumer with its own ``worker_id`` serving one or more agent types.

    Args:
        ctx: the instance's shared context.
        worker_id: stable id (``{instance}-r{n}``), so admin state survives restarts.
        agent_types: the types this replica declares.
    """

    def __init__(self, ctx: RuntimeContext, worker_id: str, agent_types: tuple[str, ...]) -> None:
        self.ctx = ctx
        self.worker_id = worker_id
        self.agent_types = agent_types
        self.lifecycle = Lifecycle.ACTIVE
        self.reason: str | None = None
        self.admin_applied_at = 0
        self.force_evicted = False
        self.scaled_down = False
        """Draining because the instance scaled down (not an operator's command)."""
        self.config_reports: dict[str, ConfigReport] = {}
        """agent type -> what the handler did with its latest configuration version."""
        self.restarting = False
        """An operator asked for a restart: once idle it exits and the instance starts a
        replacement under a new id (``WorkerInstance._end``)."""
        self.denied: set[str] = set()
        self.scaled_off: set[str] = set()
        """Types this replica stopped serving because their quota is below its rank."""
        self.paused: set[str] = set()
        """Declared types an operator paused fleet-wide (``type pause``): their streams
        are not read, their running tasks finish; routing and direct tasks are kept."""
        self.last_pause_push_at = 0.0
        """Monotonic time a pushed pause or resume last changed :attr:`paused`."""
        self.inflight: dict[str, asyncio.Task[None]] = {}
        self.reserved = 0
        """Slots held by a read in flight (see :meth:`reserving`)."""
        self.processed = 0
        self.failed = 0
        self.started_at = now_ms()
        self.last_tick = time.monotonic()
        self.stopping = False
        """The process is shutting down: no new reads."""
        self.ended = asyncio.Event()
        """Set once the replica is gone (evicted, drained or stopped)."""
        self.lock_token = os.urandom(8).hex()
        self.lock_lost = False
        """Another process took this id's start-up lock: this replica must stop."""
        self.ctrl_last_id = "0-0"
        self.last_push_at = 0.0
        """Monotonic time a pushed command last changed state (orders pull reads)."""
        self._changed = asyncio.Event()
        self._records = RecordReader(ctx.redis, ctx.keys)
        """Reads the execution records of envelope tasks, batched per loop turn."""
        self._slot_waiters: collections.deque[asyncio.Future[None]] = collections.deque()
        """Readers waiting for a slot, longest first (see :meth:`wait_capacity`)."""

    # -- derived state ---------------------------------------------------------------

    @property
    def accepting(self) -> bool:
        """Whether the replica may read new tasks."""
        return self.lifecycle is Lifecycle.ACTIVE and not self.stopping and not self.ended.is_set()

    def allowed_types(self) -> list[str]:
        """Declared types that are neither denied nor scaled off."""
        return [t for t in self.agent_types if t not in self.denied and t not in self.scaled_off]

    def serves(self, agent_type: str) -> bool:
        """Whether a task of ``agent_type`` read from its type stream may run here.

        The types of :meth:`allowed_types`, except paused ones: an entry a read already
        in flight delivers after a pause is handed back, not run.
        """
        return (
            agent_type in self.agent_types
            and agent_type not in self.denied
            and agent_type not in self.scaled_off
            and agent_type not in self.paused
        )

    def set_paused(self, paused: set[str]) -> bool:
        """Replace the paused types (of those this replica declares); True when changed."""
        paused = paused & set(self.agent_types)
        if paused == self.paused:
            return False
        log.info(
            "%s: paused types %s",
            self.worker_id,
            ",".join(sorted(paused)) or "none (every type resumed)",
        )
        self.paused = paused
        self.notify()
        return True

    def apply_pause_command(self, command: Command) -> bool:
        """Apply a pushed ``pause-type`` / ``resume-type``; True when the lease must change."""
        if not command.agent_type:
            return False
        if command.action is CommandAction.PAUSE_TYPE:
            changed = self.set_paused(self.paused | {command.agent_type})
        elif command.action is CommandAction.RESUME_TYPE:
            changed = self.set_paused(self.paused - {command.agent_type})
        else:
            return False
        if changed:
            self.last_pause_push_at = time.monotonic()
        return changed

    def apply_pause_pull(self, paused: set[str], read_at: float) -> bool:
        """Apply the pause hash a heartbeat read (sent at monotonic ``read_at``).

        The hash is the truth, but a read sent before a pushed pause or resume was
        applied may be older than it: skipped, the next beat reads again.
        """
        if read_at < self.last_pause_push_at:
            return False
        return self.set_paused(paused)

    def set_scaled_off(self, types: set[str]) -> bool:
        """Stop (or resume) serving ``types`` for scale; True when it changed.

        Leaving a type works like a drain of that type alone: no new reads of it, its
        running tasks finish.
        """
        types = types & set(self.agent_types)
        if types == self.scaled_off:
            return False
        log.info(
            "%s: serving %s (per-type scale)",
            self.worker_id,
            ",".join(t for t in self.agent_types if t not in types) or "nothing",
        )
        self.scaled_off = types
        self.notify()
        return True

    def readable_streams(self) -> list[str]:
        """Streams the consumer may read right now (empty when not accepting)."""
        if not self.accepting:
            return []
        keys = self.ctx.keys
        return [keys.type_stream(t) for t in self.allowed_types() if t not in self.paused] + [
            keys.worker_stream(self.worker_id)
        ]

    def keeps_lease(self) -> bool:
        """Whether the heartbeat renews this replica's lease.

        A graceful eviction keeps the lease until the running tasks have finished: the
        lease is what tells other workers those tasks are alive, so without it they
        would reclaim and run them a second time. Only a forced eviction (which cancels
        the tasks) gives the lease up at once.
        """
        if self.lock_lost or self.ended.is_set():
            return False
        if self.lifecycle is Lifecycle.EVICTED:
            return not self.force_evicted and bool(self.inflight)
        return True

    def routable_types(self) -> list[str]:
        """Types whose routing set should hold this replica."""
        return self.allowed_types() if self.accepting else []

    def free_slots(self) -> int:
        """How many more tasks may start now (slots held by a read in flight excluded)."""
        return self.ctx.settings.concurrency - len(self.inflight) - self.reserved

    @contextlib.contextmanager
    def reserving(self, slots: int) -> Iterator[None]:
        """Hold ``slots`` for one read while its reply is on the way.

        A replica can have several readers (one per slot on a cluster, one per
        consumer group); without this, each would ask for every free slot at once.
        """
        self.reserved += slots
        try:
            yield
        finally:
            self.reserved -= slots
            # No reader is woken here: the reader dispatches what it read first, then
            # offers what is still free (offer_slots); woken now, the next reader
            # would find the slots taken and lose its place in the queue.

    @property
    def runtime_status(self) -> RuntimeStatus:
        """idle / busy / suspended / draining, for the status key and the lease."""
        if self.lifecycle is Lifecycle.SUSPENDED:
            return RuntimeStatus.SUSPENDED
        if self.lifecycle is Lifecycle.DRAINING:
            return RuntimeStatus.DRAINING
        return RuntimeStatus.BUSY if self.inflight else RuntimeStatus.IDLE

    def lease(self) -> Lease:
        """The lease as of now."""
        ctx = self.ctx
        return Lease(
            worker_id=self.worker_id,
            instance_id=ctx.instance_id,
            hostname=ctx.hostname,
            ip_address=ctx.ip_address,
            pid=ctx.pid,
            role=ctx.role.value,
            agent_types=list(self.agent_types),
            lifecycle=self.lifecycle.value,
            status=self.runtime_status.value,
            denied_types=sorted(self.denied & set(self.agent_types)),
            concurrency=ctx.settings.concurrency,
            active_jobs=len(self.inflight),
            processed=self.processed,
            failed=self.failed,
            started_at=self.started_at,
            last_seen=now_ms(),
            app_version=ctx.settings.app_version or None,
            runtime_version=RUNTIME_VERSION,
            heartbeat_interval=ctx.settings.heartbeat_interval,
            lease_ttl=ctx.settings.lease_ttl,
            admin_applied_at=self.admin_applied_at or None,
            capabilities=[c.value for c in WORKER_RUNTIME_CAPABILITIES],
            paused_types=sorted(self.paused & set(self.agent_types)) or None,
            config_reports=dict(self.config_reports) or None,
        )

    # -- health ----------------------------------------------------------------------

    def tick(self) -> None:
        """The consumer loop is alive (read by the health check)."""
        self.last_tick = time.monotonic()

    def healthy(self) -> bool:
        """False when the consumer loop has not ticked within the stall timeout."""
        return time.monotonic() - self.last_tick < self.ctx.settings.stall_timeout

    # -- waiting -----------------------------------------------------------------------

    async def wait_change(self, timeout: float) -> None:
        """Sleep until the lifecycle/denylist changes, or ``timeout``."""
        self._changed.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._changed.wait(), timeout)

    async def wait_capacity(self, timeout: float) -> None:
        """Sleep until a slot is this reader's turn, or ``timeout``.

        Readers are woken one per freed slot, the one that has waited longest first:
        woken all at once, the reader that had just read would come back first every
        time (the others' wake-ups take a few more loop turns), and with a backlog on
        its streams the others' tasks (a worker's own stream on a cluster) would wait.
        """
        if self.free_slots() > 0:
            return
        turn = asyncio.get_running_loop().create_future()
        self._slot_waiters.append(turn)
        try:
            # asyncio.wait: a timeout is no exception, and a cancellation is never
            # taken for one (the reader must end when the instance stops).
            await asyncio.wait((turn,), timeout=timeout)
        except asyncio.CancelledError:
            if turn.done() and not turn.cancelled():
                self.offer_slots()  # woken, then cancelled: the turn goes to the next
            raise
        finally:
            if not turn.done():
                turn.cancel()  # skipped by offer_slots

    def offer_slots(self) -> None:
        """Wake one waiting reader per free slot, those that have waited longest first."""
        room = self.free_slots()
        while room > 0 and self._slot_waiters:
            turn = self._slot_waiters.popleft()
            if not turn.done():
                turn.set_result(None)
                room -= 1

    def notify(self) -> None:
        """Wake loops waiting on a state change."""
        self._changed.set()

    # -- applying operator state -------------------------------------------------------

    def apply_admin(self, state: AdminState) -> bool:
        """Converge to the admin hash (pull channel). Returns True when anything changed.

        The hash is state, not an event: whatever it holds now is what the operator
        wants now, whoever wrote it and whatever clock stamped it (by-framework's admins
        stamp ``updated_at`` with their host's clock, ours with Redis's). So its stamp
        never orders it against what was applied before; it is only reported back
        (``admin_applied_at``), so the console can tell which write the lease shows.
        """
        if not state.lifecycle:
            # Cleared admin state means the default, active.
            if self.lifecycle is Lifecycle.EVICTED:
                return False
            if self.lifecycle is Lifecycle.ACTIVE and not self.admin_applied_at:
                return False
            return self._transition(Lifecycle.ACTIVE, 0, None, False)
        wanted = state.known_lifecycle
        if wanted is None:
            log.warning("%s: ignoring unknown lifecycle %r", self.worker_id, state.lifecycle)
            return False
        ts = state.updated_at or 0
        if wanted is self.lifecycle and ts == self.admin_applied_at:
            return False  # already applied
        return self._transition(wanted, ts, state.reason, False)

    def apply_pull(self, admin: AdminState, denied: set[str], read_at: float) -> bool:
        """Apply what a heartbeat read (admin hash and denylists).

        A read sent before the last pushed command was applied may be older than the
        hash that push was checked against (:meth:`apply_pushed`): it is skipped, and
        the next beat converges again.

        Args:
            admin: the admin hash.
            denied: the types this worker is denied for.
            read_at: monotonic time the read was sent.
        """
        if read_at < self.last_push_at:
            return False
        changed = self.apply_admin(admin)
        return self.set_denied(denied) or changed

    def apply_command(self, command: Command) -> bool:
        """Apply a pushed deny / allow. Returns True when the lease should be rewritten.

        A pushed lifecycle command goes through :meth:`apply_pushed`, with the admin
        hash read after it.
        """
        changed = self._apply_command(command)
        if changed:
            self.last_push_at = time.monotonic()
        return changed

    def _apply_command(self, command: Command) -> bool:
        if command.action in (CommandAction.DENY, CommandAction.ALLOW) and command.agent_type:
            if command.agent_type not in self.agent_types:
                return False
            return self.set_denied(
                self.denied | {command.agent_type}
                if command.action is CommandAction.DENY
                else self.denied - {command.agent_type}
            )
        if command.action is CommandAction.RESTART:
            return self.request_restart(command.reason)
        return False

    def request_restart(self, reason: str | None) -> bool:
        """Leave routing, finish in-flight tasks, exit, and be replaced (a new id).

        Only an active or suspended replica restarts: one already draining, scaled down
        or evicted is leaving anyway, and is not replaced.
        """
        if self.restarting or self.scaled_down or self.ended.is_set() or self.stopping:
            return False
        if self.lifecycle not in (Lifecycle.ACTIVE, Lifecycle.SUSPENDED):
            return False
        self.restarting = True
        self.lifecycle = Lifecycle.DRAINING
        self.reason = f"restart: {reason}" if reason else "restart"
        log.info("%s: restarting (%s)", self.worker_id, self.reason)
        self.notify()
        return True

    def apply_pushed(self, command: Command, admin: AdminState) -> bool:
        """Apply a pushed lifecycle command against the admin hash read after it.

        Both admins write the hash, then push. When the hash still holds this command
        (same lifecycle; ours: same stamp too) it is applied with what only the push
        carries (``force``). Otherwise a newer write overtook it: a push never wins over
        a newer hash, so the worker converges to the hash instead.
        """
        current = admin.known_lifecycle is command.lifecycle and admin.updated_at
        if current and command.updated_at and admin.updated_at != command.updated_at:
            current = False
        if current and command.lifecycle is not None:
            ts = admin.updated_at or 0
            escalates = command.force and command.lifecycle is Lifecycle.EVICTED
            if (
                command.lifecycle is self.lifecycle
                and ts == self.admin_applied_at
                and not escalates
            ):
                return False
            # The hash's reason: the push may be unsigned (README, "Security").
            reason = admin.reason if admin.reason is not None else command.reason
            changed = self._transition(command.lifecycle, ts, reason, command.force)
        else:
            changed = self.apply_admin(admin)
        if changed:
            self.last_push_at = time.monotonic()
        return changed

    def set_denied(self, denied: set[str]) -> bool:
        """Replace the denylist (pull channel truth). Returns True when it changed."""
        denied = denied & set(self.agent_types)
        if denied == self.denied:
            return False
        self.denied = denied
        self.notify()
        return True

    def drain_for_scale_down(self) -> None:
        """Leave routing, finish in-flight tasks, then exit (never killed)."""
        self.scaled_down = True
        self.lifecycle = Lifecycle.DRAINING
        self.reason = "scale down"
        log.info("%s: draining (scale down)", self.worker_id)
        self.notify()

    def _transition(self, new: Lifecycle, ts: int, reason: str | None, force: bool) -> bool:
        if self.lifecycle is Lifecycle.EVICTED:
            if new is Lifecycle.EVICTED and force and not self.force_evicted:
                # A graceful eviction still finishing, escalated to --force: cancel now
                # (the entries stay pending and are reclaimed once the lease is gone).
                self.admin_applied_at = ts
                self.force_evicted = True
                log.info("%s: eviction forced; cancelling running tasks", self.worker_id)
                for task in list(self.inflight.values()):
                    task.cancel()
                self.notify()
                return True
            return False  # an evicted replica is gone; a restart picks up later state
        if (self.scaled_down or self.restarting) and new is not Lifecycle.EVICTED:
            return False  # leaving by scale-down or restart; only an eviction cuts it short
        # The stamp of the write now applied, not the largest seen: a stamp from a clock
        # ahead must not make later writes look applied (README, "How the runtime behaves").
        self.admin_applied_at = ts
        self.reason = reason or None
        old = self.lifecycle
        self.lifecycle = new
        if new is Lifecycle.EVICTED and force:
            self.force_evicted = True
            for task in list(self.inflight.values()):
                task.cancel()
        if old is not new:
            log.info(
                "%s: %s -> %s%s%s",
                self.worker_id,
                old.value,
                new.value,
                " [force]" if new is Lifecycle.EVICTED and force else "",
                f" ({reason})" if reason else "",
            )
        self.notify()
        return True

    # -- running tasks -----------------------------------------------------------------

    def start_task(
        self,
        stream: str,
        entry_id: str,
        task: Task,
        fields: dict[str, str] | None = None,
        envelope: Envelope | None = None,
        first_run: bool = False,
    ) -> None:
        """Run the handler for one delivered entry.

        Args:
            stream: the stream it was delivered from.
            entry_id: its entry id.
            task: the task the handler sees.
            fields: the entry as delivered (handed back as it was when cut short).
            envelope: the entry's by-framework envelope (every task submitted now).
            first_run: the envelope is ours and delivered for the first time, so no
                record of it can exist: its record is not read (a replay is).
        """
        key = f"{stream} {entry_id}"
        if key in self.inflight:
            return  # already running (e.g. seen again while recovering our own PEL)
        if self.ctx.batcher.awaiting_ack(stream, entry_id):
            # Finished while Redis was away: the ack is queued, not lost. Re-reading our
            # PEL after the outage returns the entry; running it again would duplicate it.
            return
        log.debug(
            "%s: running %s (task %s, attempt %d)", self.worker_id, key, task.task_id, task.attempt
        )
        self.inflight[key] = asyncio.create_task(
            self._execute(
                key, stream, entry_id, task, fields, envelope, first_run, time.monotonic()
            )
        )

    async def _execute(
        self,
        key: str,
        stream: str,
        entry_id: str,
        task: Task,
        fields: dict[str, str] | None,
        envelope: Envelope | None,
        first_run: bool,
        scheduled: float,
    ) -> None:
        ctx = self.ctx
        if await self._lost_in_stall(stream, entry_id, scheduled):
            log.warning(
                "%s: %s was reclaimed by another worker while this process stalled; "
                "not running it here",
                self.worker_id,
                key,
            )
            self.inflight.pop(key, None)
            self.offer_slots()
            return
        began = time.monotonic()
        record: dict[str, Any] | None = None
        if envelope is not None and (first_run or not task.session_id):
            # Nothing to read: our first delivery has no record yet, and a task
            # without a session keeps none. The record starts as a client's would.
            record = client_record(envelope, entry_time_ms(entry_id) or now_ms())
        elif envelope is not None:
            try:
                # The client's record: its execution id, and whether this is a replay.
                record = await self._records.load(task.session_id or "", task.task_id)
            except LOOP_ERRORS as exc:
                log.warning(
                    "%s: could not read %s's record (%s)", self.worker_id, task.task_id, exc
                )
                record = {}
            if is_terminal(record):
                log.info("%s: %s already finished; not running it again", self.worker_id, key)
                ctx.batcher.ack(stream, entry_id)
                self.inflight.pop(key, None)
                self.offer_slots()
                return
        created: int | None = None
        if record is None:
            execution_id = os.urandom(8).hex()
            # When this attempt was queued (the entry's XADD time): created -> started is
            # its queue wait, as by-framework's records measure it.
            created = entry_time_ms(entry_id)
        else:
            # A by-framework client's record names the execution and when it was made.
            execution_id = str(record.get("execution_id") or new_execution_id())
            stamp = record.get("created_at")
            if isinstance(stamp, int) and stamp > 0:
                created = stamp
        if created is None:
            created = enqueued_at(entry_id)
        execution = Execution(
            execution_id=execution_id,
            task_id=task.task_id,
            worker_id=self.worker_id,
            agent_type=task.agent_type,
            attempt=task.attempt,
            session_id=task.session_id,
            created_at=created,
            started_at=now_ms(),
        )
        ctx.batcher.started(execution, record)
        ack = True
        dropped = False
        retrying = False
        output: Any = None
        try:
            output = await ctx.handler(task)
            execution.state = ExecutionState.SUCCEEDED
            self.processed += 1
            dropped = await self._lost_in_stall(stream, entry_id, began)
        except asyncio.CancelledError:
            # Shutdown grace ran out or a forced eviction: hand the entry back so it
            # runs again at once, without counting as a delivery (a healthy long task
            # must survive rolling restarts).
            execution.state = ExecutionState.CANCELLED
            ack = False
            self.hand_back(stream, entry_id, task.agent_type, _handback_fields(task, fields))
        except Exception as exc:
            execution.state = ExecutionState.FAILED
            # The text may hold lone surrogates (os.fsdecode of a file name).
            execution.error = safe_text(f"{type(exc).__name__}: {exc}")[:500]
            self.failed += 1
            ours = envelope is None or envelope.ours
            if ours:
                ack = False  # the retry (or dead letter) below acknowledges it
            dropped = await self._lost_in_stall(stream, entry_id, began)
            if ours and not dropped:
                retrying = self._retry_or_bury(
                    stream, entry_id, task, execution.error, fields if envelope else None
                )
            # Other clients' tasks are not retried (a by-framework client expects
            # FAILED and the end of the stream, as by-framework's own workers do).
        finally:
            execution.finished_at = now_ms()
            if dropped:
                # The entry is a peer's now, running there: acknowledging it would end
                # the peer's delivery, and a second result would contradict the peer's.
                ack = False
                execution.state = ExecutionState.CANCELLED
                execution.error = _RECLAIMED_IN_STALL
                log.warning("%s: %s %s", self.worker_id, key, _RECLAIMED_IN_STALL)
            # A failed attempt that runs again must not look finished: its record
            # would make the next attempt a skipped replay, its end of stream would
            # end the client's wait.
            ctx.batcher.finished(stream, entry_id, execution, ack, record, retrying=retrying)
            if (
                task.session_id
                and execution.state is not ExecutionState.CANCELLED
                and not (retrying and envelope is not None)
            ):
                if envelope is None:
                    ctx.batcher.output(task.session_id, _output_fields(execution, output))
                else:
                    ctx.batcher.answer(task.session_id, answer_item(envelope, execution, output))
            self.inflight.pop(key, None)
            self.offer_slots()

    async def _lost_in_stall(self, stream: str, entry_id: str, since: float) -> bool:
        """Whether a peer took the entry while this process stalled after ``since``.

        Free unless a stall was detected (see ``worker_runtime.stall``): then one
        ownership check, which also resets the entry's idle time when it is still ours.
        When Redis cannot answer, the entry is taken as ours (at-least-once: the peer's
        reclaim, if any, has to wait for a missing lease too).
        """
        if not self.ctx.stalls.since(since):
            return False
        from worker_runtime.consumer import keep_own

        group = self.ctx.batcher.group_of(stream)
        try:
            kept = await keep_own(
                self.ctx.redis, stream, group, self.worker_id, [entry_id], count=False
            )
        except LOOP_ERRORS as exc:
            log.warning(
                "%s: could not check that %s %s is still ours after a stall (%s); "
                "taking it as ours",
                self.worker_id,
                stream,
                entry_id,
                exc,
            )
            return False
        return entry_id not in kept

    def _retry_or_bury(
        self,
        stream: str,
        entry_id: str,
        task: Task,
        error: str,
        entry: dict[str, str] | None = None,
    ) -> bool:
        """Queue the next attempt, or the dead letter after the last; True if retried.

        ``entry`` (the delivered fields) is kept as it is, with the attempt beside it
        (an envelope stays what by-framework's workers read); a legacy entry is
        written again from the task.
        """
        from worker_runtime.messages import encode_task

        fields = dict(entry) if entry and "kind" not in entry else encode_task(task)
        if task.attempt < self.ctx.settings.max_deliveries:
            fields[ATTEMPT_FIELD] = str(task.attempt + 1)
            self.ctx.batcher.move(stream, entry_id, self.worker_id, stream, fields)
            return True
        fields[ATTEMPT_FIELD] = str(task.attempt)  # the dead letter says how often it ran
        self.bury(task.agent_type, fields, error, stream, entry_id)
        return False

    def hand_back(
        self, stream: str, entry_id: str, agent_type: str, fields: dict[str, str]
    ) -> None:
        """Give a delivered entry back without running it (a new entry, delivery count 1).

        A direct task goes back to this worker's own stream, unless the worker id will
        not come back (the default ``hostname:pid`` changes with every start) and the
        process is stopping: then it goes to its type's stream, or nobody would ever
        read it.
        """
        keys = self.ctx.keys
        dest = stream
        if (
            stream == keys.worker_stream(self.worker_id)
            and self.stopping
            and not self.ctx.settings.instance_id
            and agent_type
        ):
            dest = keys.type_stream(agent_type)
            log.info(
                "%s: handing direct task entry %s to the %s stream (this worker id will "
                "not return)",
                self.worker_id,
                entry_id,
                agent_type,
            )
        self.ctx.batcher.move(stream, entry_id, self.worker_id, dest, fields)

    def bury(
        self, agent_type: str, fields: dict[str, str], error: str, stream: str, entry_id: str
    ) -> None:
        """Replace a delivered entry by a dead letter on its type's dead-letter stream."""
        from worker_runtime.batcher import DEAD_LETTER_MAXLEN

        dead = dict(fields)
        dead["error"] = safe_text(error)
        dead["worker_id"] = self.worker_id
        dead["buried_at"] = str(now_ms())
        log.warning("%s: dead-lettering a %s entry: %s", self.worker_id, agent_type, error)
        self.ctx.batcher.move(
            stream,
            entry_id,
            self.worker_id,
            self.ctx.keys.dead_letter_stream(agent_type),
            dead,
            maxlen=DEAD_LETTER_MAXLEN,
        )

    async def wait_idle(self, timeout: float | None) -> bool:
        """Wait for running tasks to finish. Returns False on timeout."""
        if not self.inflight:
            return True
        _done, pending = await asyncio.wait(list(self.inflight.values()), timeout=timeout)
        return not pending and not self.inflight

    def cancel_all(self) -> None:
        """Cancel every running task (their entries stay pending for reclaim)."""
        for task in list(self.inflight.values()):
            task.cancel()


_RECLAIMED_IN_STALL = (
    "reclaimed by another worker while this process was stalled: "
    "its outcome here is dropped (not acknowledged, no result)"
)


def _handback_fields(task: Task, fields: dict[str, str] | None) -> dict[str, str]:
    """The entry to hand back: as delivered, with the attempt it ran as."""
    from worker_runtime.messages import encode_task

    out = dict(fields) if fields else encode_task(task)
    out["attempt"] = str(task.attempt)
    return out


def _output_fields(execution: Execution, output: Any) -> dict[str, str]:
    fields = {
        "task_id": execution.task_id,
        "execution_id": execution.execution_id,
        "worker_id": execution.worker_id,
        "state": str(execution.state),
    }
    if execution.error:
        fields["error"] = execution.error
    else:
        try:
            fields["result"] = "null" if output is None else _RESULT_JSON.encode(output)
        except (TypeError, ValueError):
            fields["result"] = json.dumps(repr(output))
    return fields


_RESULT_JSON = json.JSONEncoder(default=str)
"""What ``json.dumps(output, default=str)`` uses, built once (dumps builds one per call)."""
