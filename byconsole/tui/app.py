"""The console app: the poll loop, the action runner, and ``run_tui``.

Data flows one way: an exclusive poll worker reads a :class:`FleetSnapshot` and posts
it as a message; the main screen hands it to the views, which diff their rows. The next
poll is scheduled only once the previous one has been applied (never an interval), and
not at all while a modal screen is open. A failed read keeps the last snapshot on
screen, marked stale, and retries with exponential backoff.

Actions flow the other way: the main screen posts an ``ActionRequested``; the app sends
it through the backend in a worker and reports the outcome (and the worker's
confirmation latency) in toasts.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections import Counter
from collections.abc import Callable, Mapping
from pathlib import Path

from textual import events, on, work
from textual.app import App
from textual.css.query import QueryError
from textual.message import Message
from textual.screen import ModalScreen, Screen
from textual.timer import Timer
from textual.widgets import Footer

from byconsole import memory
from byconsole.config import Context, health_policy, load_contexts, resolve_settings
from byconsole.outcomes import DRAIN_AS_EVICT
from byconsole.text import safe_text
from byconsole.tui.actions import (
    ENTRY_ACTIONS,
    SPECS,
    TYPE_ACTIONS,
    Action,
    ActionOutcome,
    ActionRequest,
)
from byconsole.tui.backend import SEND_DEADLINE, Backend, RedisBackend
from byconsole.tui.palette import ConsoleCommands
from byconsole.tui.release import release_after_paint
from byconsole.tui.screens.config_editor import ConfigEditorScreen
from byconsole.tui.screens.find import FindLoaders
from byconsole.tui.screens.main import MonitorScreen, OperatorScreen
from byconsole.tui.views.metrics import MetricsView
from byconsole.tui.widgets.header import FleetHeader
from byconsole.tui.widgets.ordered_input import (
    keep_escape_before_symbols,
    key_target,
    split_escape,
)
from byconsole.tui.widgets.restart_progress import RestartProgress
from byconsole.verbs import BY_ACTION
from byconsole.web.identity import web_role, web_user
from worker_runtime.admin import verdict_of
from worker_runtime.dead_letters import DeadLetter
from worker_runtime.lookup import LookupResult, SessionTimeline
from worker_runtime.models import Verdict
from worker_runtime.pending import PendingPage
from worker_runtime.quota import MAX_SCALE
from worker_runtime.settings import ConfigError, RedisSettings
from worker_runtime.snapshot import FleetSnapshot, WorkerDetail

_HERE = Path(__file__).parent

keep_escape_before_symbols()

BACKOFF_CAP = 10.0
"""Longest wait between two attempts while Redis is down (seconds)."""

CONFIRM_TIMEOUT = 10.0
"""How long a toast waits for a worker to confirm an action."""

RESTART_TIMEOUT = 60.0
"""How long a restart's toast waits for the replacement (the replica finishes its tasks
first, so longer than a confirmation)."""

BackendFactory = Callable[[RedisSettings], Backend]


class ConsoleApp(App[int]):
    """The live operations console.

    Args:
        backend: where snapshots come from and actions go.
        refresh: seconds between the end of one refresh and the start of the next.
        read_only: bind no action keys at all.
        contexts: named contexts the palette can switch to.
        context_name: the context in use, if any.
        backend_factory: builds a backend for another context's settings.
        clock: monotonic seconds (tests freeze it for stable screenshots).
        notice: a message shown once the console is up (the demo's Redis URL).
    """

    # Absolute, so subclasses defined elsewhere (tests, embedding tools) keep the styles.
    CSS_PATH = [_HERE / "app.tcss", _HERE / "views" / "views.tcss"]
    TITLE = "byconsole"
    COMMANDS = App.COMMANDS | {ConsoleCommands}

    class FleetUpdated(Message):
        """A refresh succeeded."""

        def __init__(self, snapshot: FleetSnapshot) -> None:
            super().__init__()
            self.snapshot = snapshot

    class PollFailed(Message):
        """A refresh failed; ``error`` is display-safe."""

        def __init__(self, error: str) -> None:
            super().__init__()
            self.error = error

    def __init__(
        self,
        backend: Backend,
        *,
        refresh: float = 2.0,
        read_only: bool = False,
        contexts: Mapping[str, Context] | None = None,
        context_name: str | None = None,
        backend_factory: BackendFactory = RedisBackend,
        clock: Callable[[], float] = time.monotonic,
        notice: str | None = None,
    ) -> None:
        super().__init__()
        self.notice = notice
        self.backend = backend
        self.refresh_interval = max(0.1, refresh)
        self.read_only_flag = read_only
        self.contexts = dict(contexts or {})
        self.context_name = context_name
        self.backend_factory = backend_factory
        self.clock = clock
        self.snapshot: FleetSnapshot | None = None
        self.failures = 0
        self.polls = 0
        self._rolling_runs = 0
        self._timer: Timer | None = None
        self._polling = False
        self._poll_again = False
        self._paused = True  # until the main screen is up (it calls resume_polling)
        self.main_screen = self._make_main_screen()

    # -- screens ---------------------------------------------------------------------------

    @property
    def read_only(self) -> bool:
        """The flag, or a context marked read-only."""
        context = self.contexts.get(self.context_name or "")
        return self.read_only_flag or bool(context and context.read_only)

    def _make_main_screen(self) -> MonitorScreen:
        if self.read_only:
            return MonitorScreen(
                self.backend.endpoint,
                context=self.context_name,
                detail_loader=self.read_detail,
                refresh=self.refresh_interval,
                describe=self.describe_error,
                clock=self.clock,
                dead_loader=self.read_dead,
                read_only_reason=self.read_only_reason(),
                pending_loader=self.read_pending,
                find_loaders=self.find_loaders(),
            )
        return OperatorScreen(
            self.backend.endpoint,
            max_scale=MAX_SCALE,
            context=self.context_name,
            detail_loader=self.read_detail,
            refresh=self.refresh_interval,
            describe=self.describe_error,
            clock=self.clock,
            dead_loader=self.read_dead,
            pending_loader=self.read_pending,
            find_loaders=self.find_loaders(),
        )

    def read_only_reason(self) -> str:
        """Why the console is read-only: the web viewer role, the context, or the flag.

        ``byconsole serve`` passes ``--read-only`` to a viewer's console, and to every
        console when its context is read-only: the role or the context is the reason.
        """
        context = self.contexts.get(self.context_name or "")
        if self.read_only_flag:
            user = web_user()
            if user and web_role() == "viewer":  # byconsole serve made it read-only
                return f"signed in as {safe_text(user, 40)}, a viewer"
        if context is not None and context.read_only:
            return f"context {safe_text(self.context_name, 40)} is marked read-only"
        return "started with --read-only"

    async def on_event(self, event: events.Event) -> None:
        """A key for a text input is applied as it arrives, before the next key is routed.

        See :mod:`byconsole.tui.widgets.ordered_input`: otherwise a bound key (Backspace,
        Escape) acts after the characters typed behind it.
        """
        if isinstance(event, events.Key) and not event.is_forwarded:
            for key in split_escape(self.screen, event):
                target = key_target(self.screen, key)
                if target is None or not await target.apply_key(key):
                    await super().on_event(key)
            return
        await super().on_event(event)

    def on_mount(self) -> None:
        """Show the start-up notice, if any."""
        if self.notice:
            self.notify(self.notice, markup=False, timeout=15)

    def get_default_screen(self) -> Screen[None]:
        """The main screen (read-only or operator)."""
        return self.main_screen

    def describe_error(self, exc: BaseException) -> str:
        """One display-safe line for an error, by the current backend (its password)."""
        return self.backend.describe(exc)

    async def read_dead(self, agent_types: list[str], limit: int) -> list[DeadLetter]:
        """The Dead view's loader."""
        return await self.backend.read_dead(agent_types, limit)

    async def read_pending(self, agent_type: str, limit: int) -> PendingPage:
        """The pending screen's loader."""
        return await self.backend.read_pending(agent_type, limit)

    async def read_detail(self, worker_id: str) -> WorkerDetail:
        """The detail screen's loader."""
        return await self.backend.read_detail(worker_id)

    def find_loaders(self) -> FindLoaders:
        """What the find screens read through: the current backend (contexts switch it)."""

        async def find(lookup_id: str) -> LookupResult:
            return await self.backend.find(lookup_id)

        async def session(session_id: str) -> SessionTimeline:
            return await self.backend.read_session(session_id)

        return FindLoaders(find, session)

    # -- the poll loop -----------------------------------------------------------------------

    def request_poll(self, delay: float = 0.0) -> None:
        """Refresh after ``delay`` seconds; while a refresh runs, right after it."""
        if self._polling:
            self._poll_again = True
            return
        if self._timer is not None:
            self._timer.stop()
            self._timer = None
        if delay > 0:
            self._timer = self.set_timer(delay, self._start_poll)
        else:
            self.call_later(self._start_poll)  # a zero-delay Timer divides by zero

    @on(MonitorScreen.Resumed)
    def _main_screen_resumed(self) -> None:
        self.resume_polling()

    def resume_polling(self) -> None:
        """The main screen is showing: refresh now if polling waits for it."""
        if self._paused:
            self._paused = False
            self.request_poll()

    def _modal_open(self) -> bool:
        stack = self.screen_stack
        return bool(stack) and isinstance(stack[-1], ModalScreen)

    def _start_poll(self) -> None:
        self._timer = None
        if self._polling or not self.screen_stack:  # busy, or shutting down
            return
        if self._modal_open():
            self._paused = True  # resumed by the main screen's ScreenResume
            return
        self._polling = True
        self.poll()

    @work(exclusive=True, group="poll", exit_on_error=False)
    async def poll(self) -> None:
        """Read one snapshot and post it (or the failure) to the app."""
        self.polls += 1
        try:
            header: FleetHeader | None = self.main_screen.header
        except QueryError:  # not mounted yet, or shutting down
            header = None
        if header is not None:  # how long Redis is silent, while it is (FleetHeader)
            header.reading_since = header.clock()
        try:
            snapshot = await self.backend.read()
            if header is not None:  # Redis answered: what follows is ours, not its
                header.reading_since = None
            # A large fleet's rows are built and counted now, in threads, not when it
            # is shown.
            await self.main_screen.workers_view.prepare_ahead(snapshot)
            await self.main_screen.header.count_ahead(snapshot)
        except asyncio.CancelledError:
            self._polling = False
            raise
        except Exception as exc:  # outage, timeout, or a reader bug: shown, never fatal
            self.post_message(self.PollFailed(self.backend.describe(exc)))
        else:
            self.post_message(self.FleetUpdated(snapshot))
        finally:
            if header is not None:
                header.reading_since = None

    def _schedule_next(self, delay: float) -> None:
        self._polling = False
        if self._poll_again:
            self._poll_again = False
            delay = 0.0
        self.request_poll(delay)

    @on(FleetUpdated)
    def _fleet_updated(self, message: FleetUpdated) -> None:
        self.failures = 0
        previous = [self.snapshot]
        self.snapshot = message.snapshot
        try:
            self.main_screen.show_snapshot(message.snapshot)
        except QueryError:  # the app is shutting down and its widgets are gone
            return
        if previous[0] is not None and len(previous[0].workers) >= memory.RELEASE_AFTER_PAINT_FROM:
            release_after_paint(self, previous)
        self._schedule_next(self.refresh_interval)

    @on(MetricsView.RangeChanged)
    def _history_range_changed(self, message: MetricsView.RangeChanged) -> None:
        # Only now is a long range read whole; later refreshes read its newest buckets.
        self.backend.set_history_range(message.history_range)
        self.request_poll()

    @on(PollFailed)
    def _poll_failed(self, message: PollFailed) -> None:
        self.failures += 1
        delay = min(BACKOFF_CAP, self.refresh_interval * 2 ** (self.failures - 1))
        try:
            self.main_screen.show_failure(message.error, delay)
        except QueryError:  # shutting down
            return
        self._schedule_next(delay)

    # -- actions -----------------------------------------------------------------------------

    @on(OperatorScreen.ActionRequested)
    def _action_requested(self, message: OperatorScreen.ActionRequested) -> None:
        if self.read_only:  # a request can only come from an operator screen; belt and braces
            return
        self.perform(message.request)

    @work(group="actions", exit_on_error=False)
    async def perform(self, request: ActionRequest) -> list[ActionOutcome]:
        """Send an action, report it, then report the workers' confirmations."""
        if request.action is Action.CONFIG_SET and request.agent_type:
            self.push_screen(
                ConfigEditorScreen(
                    request.agent_type,
                    self.backend.read_config,
                    self.backend.set_config,
                    self.backend.config_reports,
                )
            )
            return []
        if request.rolling:
            await self.rolling_restart(request)
            self.request_poll()
            return []
        label = SPECS[request.action].label
        if request.agent_type and request.action in (Action.DENY, Action.ALLOW, *TYPE_ACTIONS):
            label = f"{label} {safe_text(request.agent_type, 30)}"
        outcomes = await self._send_with_progress(label, request)
        failed = [o for o in outcomes if not o.sent and o.later is None]
        sent = [o for o in outcomes if o.sent]
        if failed:
            lines = "\n".join(f"{safe_text(o.target, 40)}: {o.sentence()}" for o in failed[:5])
            self.notify(f"{label} failed:\n{lines}", severity="error", markup=False, timeout=8)
        self._report_unanswered(label, outcomes)
        # An entry action, or a type action no live worker can confirm: its note.
        noted = request.action in TYPE_ACTIONS and all(o.result is None for o in sent)
        if sent and (request.action in ENTRY_ACTIONS or noted):
            for o in sent:
                self.notify(f"{label} {safe_text(o.target, 40)}: {o.note}", markup=False)
            self.request_poll()
            return outcomes
        said = SPECS[request.action].verb  # the verb table's words for its outcome
        if sent and request.action is Action.RESTART:
            self.notify(
                f"{label} sent to {_names(sent)}: {said.underway_for(wait_hint=False)}",
                markup=False,
                timeout=4,
            )
            self.request_poll()
            restarted = await asyncio.gather(
                *(self.backend.confirm(o, RESTART_TIMEOUT) for o in sent)
            )
            for o in restarted:
                done = o.verdict is Verdict.APPLIED
                self.notify(
                    f"{label} {o.note or safe_text(o.target, 40)}"
                    + (f" ({o.error})" if o.error else ""),
                    severity="information" if done else "warning",
                    markup=False,
                    timeout=6 if done else 10,
                )
            self.request_poll()
            return list(restarted) + failed
        if sent:
            if request.action is Action.SCALE:
                plan = f": {request.plan}" if request.plan else ""
                self.notify(
                    f"{label} {_names(sent)} to {request.count} written{plan}; "
                    f"{said.underway_for(wait_hint=False)}",
                    markup=False,
                    timeout=4,
                )
            else:
                self._report_written(label, sent, said.underway_for(wait_hint=False))
            self.request_poll()
            confirmed = await asyncio.gather(
                *(self.backend.confirm(o, CONFIRM_TIMEOUT) for o in sent)
            )
            self._report_confirmations(label, list(confirmed))
            self.request_poll()
            return list(confirmed) + failed
        return outcomes

    async def _send_with_progress(self, label: str, request: ActionRequest) -> list[ActionOutcome]:
        """Send, saying so at once (``sending…``) and counting the targets' writes in
        the header (``suspend: 3/5 sent``) until every one ended or the deadline came."""
        total = len(request.targets)
        self.notify(
            f"{label}: sending to {_names_of(list(request.targets))}…", markup=False, timeout=3
        )
        try:
            header: FleetHeader | None = self.main_screen.header
        except QueryError:  # shutting down
            header = None

        def progress(ended: int, of: int) -> None:
            if header is not None:
                header.activity = f"{label}: {ended}/{of} sent"

        try:
            outcomes = await self.backend.send(request, progress=progress)
        finally:
            if header is not None:
                header.activity = ""
        if total > 1:
            counts = Counter(
                "sent" if o.sent else "timeout" if o.later is not None else "failed"
                for o in outcomes
            )
            done = ", ".join(f"{counts[k]} {k}" for k in ("sent", "failed", "timeout") if counts[k])
            self.notify(f"{label} {total} targets: {done}", markup=False, timeout=5)
        return outcomes

    def _report_unanswered(self, label: str, outcomes: list[ActionOutcome]) -> None:
        """Targets Redis did not answer by the deadline: said now, each followed up."""
        late = [o for o in outcomes if o.later is not None]
        if not late:
            return
        self.notify(
            f"{label}: no reply from Redis for {_names(late)} (timeout: {late[0].error}); "
            "each is reported when Redis answers",
            severity="warning",
            markup=False,
            timeout=8,
        )
        for o in late:
            self._follow_late(label, o)

    @work(group="late-actions", exit_on_error=False)
    async def _follow_late(self, label: str, outcome: ActionOutcome) -> None:
        """A write that outlived the action's deadline: its real outcome, when it comes."""
        assert outcome.later is not None
        started = time.monotonic()
        done = await outcome.later
        target = safe_text(done.target, 40)
        after = f"{time.monotonic() - started + self.backend_deadline:.0f}"
        if not done.sent:
            self.notify(
                f"{label} {target} failed after {after} s: {done.sentence()}",
                severity="error",
                markup=False,
                timeout=8,
            )
            return
        self.notify(
            f"{label} {target}: Redis answered after {after} s; the command is written",
            markup=False,
            timeout=6,
        )
        self.request_poll()
        timeout = RESTART_TIMEOUT if done.restart is not None else CONFIRM_TIMEOUT
        confirmed = await self.backend.confirm(done, timeout)
        self._report_confirmations(label, [confirmed])
        self.request_poll()

    @property
    def backend_deadline(self) -> float:
        """The backend's deadline for an action's writes (a static one has none)."""
        return float(getattr(self.backend, "deadline", SEND_DEADLINE))

    async def rolling_restart(self, request: ActionRequest) -> None:
        """Follow a rolling restart in a panel above the footer (README, "Restart, stop
        and pinned calls"), fed the runtime's progress events; the operator keeps
        working meanwhile. A toast says how it ended."""
        title = f"Restart {request.targets[0]}"
        main = self.main_screen
        if not isinstance(main, OperatorScreen):
            return
        total = len(main.replicas_of(request.agent_type, request.instance_id))
        self._rolling_runs += 1
        panel = RestartProgress(title, total, id=f"restart-progress-{self._rolling_runs}")
        for old in main.query(RestartProgress):
            if old.ended is not None:
                await old.remove()  # a finished run makes way for the new one
        await main.mount(panel, before=main.query_one(Footer))
        error: str | None = None
        try:
            async for outcome in self.backend.rolling_restart(request):
                panel.add(outcome)
                self.request_poll()
        except Exception as exc:  # an outage or a refusal ends the run, shown
            error = self.backend.describe(exc)
        summary = panel.finish(error)
        failed = error is not None or bool(panel.progress.failed)
        self.notify(
            f"{title}: {summary}",
            severity="warning" if failed else "information",
            markup=False,
            timeout=10 if failed else 6,
        )

    def _report_written(self, label: str, sent: list[ActionOutcome], underway: str) -> None:
        """What the writes alone say of the targets the console now waits for, in the
        CLI's words without ``--wait`` (``pending until the worker confirms …``, an
        eviction's ``sent; confirmed when …``; a pending target of a verb with its own
        ``underway`` sentence, that one: a type pause's); the others are told once, by
        :meth:`_report_confirmations`."""
        said: dict[str, list[ActionOutcome]] = {}
        for o in sent:
            if o.result is None:
                continue
            verdict = verdict_of(o.result, None)
            if verdict is Verdict.PENDING and underway:
                said.setdefault(underway, []).append(o)
            elif verdict in (Verdict.PENDING, Verdict.SENT):
                said.setdefault(o.sentence(verdict=verdict), []).append(o)
        for sentence, same in said.items():
            self.notify(f"{label} {_names(same)}: {sentence}", markup=False, timeout=3)

    def _report_confirmations(self, label: str, outcomes: list[ActionOutcome]) -> None:
        scaled = [o for o in outcomes if o.command == "scale"]
        for o in scaled:
            target = safe_text(o.target, 40)
            if o.latency is not None:
                self.notify(
                    f"{label} {target} converged in {o.latency * 1000:.0f} ms: {o.note}",
                    markup=False,
                    timeout=6,
                )
            else:
                why = f" ({o.error})" if o.error else ""
                self.notify(
                    f"{label} {target} not converged within {CONFIRM_TIMEOUT:.0f} s: "
                    f"{o.note or 'no data'} (running/quota){why}",
                    severity="warning",
                    markup=False,
                    timeout=10,
                )
        outcomes = [o for o in outcomes if o.command != "scale"]
        mapped = [o for o in outcomes if o.result is not None and o.result.requested]
        if mapped:
            self.notify(f"{label} {_names(mapped)}: {DRAIN_AS_EVICT}", markup=False, timeout=8)
        by_verdict: dict[Verdict, list[ActionOutcome]] = {v: [] for v in Verdict}
        for o in outcomes:
            by_verdict[o.verdict].append(o)
        applied = by_verdict.pop(Verdict.APPLIED)
        waiting = by_verdict.pop(Verdict.TIMEOUT)
        if applied:
            slowest = max(applied, key=lambda o: o.latency or 0.0)
            self.notify(f"{label} {_names(applied)}: {slowest.sentence()}", markup=False, timeout=5)
        # Targets that cannot apply the verb and got another write instead (a type
        # pause's denylist): the verb table's sentence for that write.
        stood_in: dict[str, list[ActionOutcome]] = {}
        others: list[ActionOutcome] = []
        for o in by_verdict[Verdict.UNCONFIRMABLE]:
            row = BY_ACTION.get(o.result.action) if o.result is not None else None
            if row is not None and row.stand_in:
                stood_in.setdefault(row.stand_in, []).append(o)
            else:
                others.append(o)
        by_verdict[Verdict.UNCONFIRMABLE] = others
        for sentence, same in stood_in.items():
            self.notify(f"{label} {_names(same)}: {sentence}", markup=False, timeout=8)
        for verdict, group in by_verdict.items():
            # The CLI's sentence for each; targets told apart only where it differs.
            said: dict[str, list[ActionOutcome]] = {}
            for o in group:
                said.setdefault(o.sentence(), []).append(o)
            for sentence, same in said.items():
                warn = verdict in (Verdict.OFFLINE, Verdict.SUPERSEDED)
                self.notify(
                    f"{label} {_names(same)}: {sentence}",
                    severity="warning" if warn else "information",
                    markup=False,
                    timeout=8 if warn else 6,
                )
        told: dict[tuple[str, bool], list[ActionOutcome]] = {}
        for o in waiting:
            # How far it got, as the CLI's --wait says it (``applied · finishing 3``:
            # the worker applied the eviction and exits once its tasks finish).
            detail = o.error or o.note
            text = o.sentence(CONFIRM_TIMEOUT) + (f" ({detail})" if detail else "")
            if "finishing" in o.note:
                text += " — it exits once they finish"
            finishing = o.note.startswith("applied") and not o.error
            told.setdefault((text, finishing), []).append(o)
        for (text, finishing), same in told.items():
            self.notify(
                f"{label} {_names(same)}: {text}",
                severity="information" if finishing else "warning",
                markup=False,
                timeout=8,
            )

    # -- contexts ----------------------------------------------------------------------------

    async def switch_context(self, name: str) -> None:
        """Point the console at another named context (from the palette)."""
        context = self.contexts.get(name)
        if context is None:
            return
        try:
            # An explicit switch means this context's endpoint, whatever the environment.
            settings = resolve_settings(None, context, env={})
        except ConfigError as exc:
            self.notify(safe_text(exc), severity="error", markup=False)
            return
        old = self.backend
        self.workers.cancel_group(self, "poll")
        self.backend = self.backend_factory(settings)
        self.context_name = name
        self.snapshot = None
        self.failures = 0
        self._polling = self._poll_again = self._paused = False
        wanted = MonitorScreen if self.read_only else OperatorScreen
        default = self.screen_stack[0]
        if type(self.main_screen) is wanted:
            self.main_screen.reset(self.backend.endpoint, name)
            self.request_poll()
        elif type(default) is wanted and isinstance(default, MonitorScreen):
            # Back to the mode the app started in: drop the screen pushed for the other.
            await self.pop_screen()
            self.main_screen = default
            default.reset(self.backend.endpoint, name)
            self.request_poll()
        else:
            # The default screen cannot be replaced: the other mode's screen goes on top
            # of it; polling starts when it is mounted.
            self._paused = True
            self.main_screen = self._make_main_screen()
            await self.push_screen(self.main_screen)
        await old.aclose()
        if self.read_only:  # the reason may have changed with the context
            self.main_screen.read_only_why = self.read_only_reason()
        mode = f" (read-only: {self.read_only_reason()})" if self.read_only else ""
        self.notify(f"context {safe_text(name, 40)}: {self.backend.endpoint}{mode}", markup=False)

    async def on_unmount(self) -> None:
        """Close the connection pool."""
        await self.backend.aclose()


def _names_of(targets: list[str], limit: int = 3) -> str:
    names = ", ".join(safe_text(t, 32) for t in targets[:limit])
    return names + (f" +{len(targets) - limit}" if len(targets) > limit else "")


def _names(outcomes: list[ActionOutcome], limit: int = 3) -> str:
    names = ", ".join(safe_text(o.target, 32) for o in outcomes[:limit])
    return names + (f" +{len(outcomes) - limit}" if len(outcomes) > limit else "")


def run_tui(
    redis_settings: RedisSettings,
    *,
    refresh: float,
    read_only: bool,
    context: str | None,
    config_path: str | None,
) -> int:
    """Run the console until the operator quits.

    Args:
        redis_settings: the endpoint to open (already resolved by the CLI).
        refresh: seconds between refreshes.
        read_only: ``--read-only`` was given: no action keys in any context (without
            it, a context marked read-only is read-only and a writable one is not).
        context: the named context in use, if any.
        config_path: the config file holding the contexts (default path when None).

    Returns:
        The exit code: 0, or 2 when the config file cannot be read.
    """
    try:
        contexts = load_contexts(Path(config_path) if config_path else None)
    except ConfigError as exc:
        print(f"byconsole: {exc}", file=sys.stderr)
        return 2
    if not refresh > 0:
        print("byconsole: --refresh must be a positive number of seconds", file=sys.stderr)
        return 2
    app = ConsoleApp(
        RedisBackend(redis_settings, policy=health_policy(contexts.get(context or ""))),
        refresh=refresh,
        read_only=read_only,
        contexts=contexts,
        context_name=context,
    )
    app.run()
    return app.return_code or 0
