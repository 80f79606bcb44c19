"""The main screen: header, the views as tabs, footer.

:class:`MonitorScreen` only looks (``--read-only``); :class:`OperatorScreen` adds the
action keys. Read-only mode uses the first class, so the action bindings do not exist
at all rather than being disabled.

Action keys run as: key -> prompts/confirmation (modal screens, awaited in a worker) ->
:class:`OperatorScreen.ActionRequested` message up to the app, which owns Redis.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from typing import Literal, overload

from rich.text import Text
from textual import events, getters, on, work
from textual.actions import SkipAction
from textual.app import ComposeResult
from textual.binding import Binding
from textual.message import Message
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static, TabbedContent, TabPane

from byconsole.outcomes import plan_outcomes, plan_scale, unscalable
from byconsole.text import safe_text
from byconsole.tui.actions import (
    ACTIONS,
    BY_BINDING,
    DEAD_ACTIONS,
    FORM_SPECS,
    ROLLING_VIEWS,
    SPECS,
    TYPE_ACTIONS,
    Action,
    ActionRequest,
    form_binding,
    verb_binding,
)
from byconsole.tui.screens.confirm import ConfirmScreen, RollingConfirmScreen
from byconsole.tui.screens.detail import DetailLoader, DetailScreen
from byconsole.tui.screens.find import FindLoaders, FindPromptScreen, FindScreen
from byconsole.tui.screens.help import HelpScreen
from byconsole.tui.screens.pending import OperatorPendingScreen, PendingLoader, PendingScreen
from byconsole.tui.screens.prompt import ChoiceScreen, CountScreen
from byconsole.tui.views.dead import LIMIT as DEAD_LIMIT
from byconsole.tui.views.dead import DeadView, row_key
from byconsole.tui.views.events import EventsView
from byconsole.tui.views.health import HealthView, Jump, jump_target
from byconsole.tui.views.instances import InstancesView
from byconsole.tui.views.metrics import MetricsView
from byconsole.tui.views.types import TypesView
from byconsole.tui.views.workers import WorkersView
from byconsole.tui.widgets.header import FleetHeader
from byconsole.tui.widgets.keyed_table import KeyedTable
from byconsole.verbs import STOP, Args
from worker_runtime.dead_letters import DeadLetter
from worker_runtime.snapshot import FleetSnapshot, TypeView

VIEWS: tuple[tuple[str, str], ...] = (
    ("workers", "Workers"),
    ("instances", "Instances"),
    ("types", "Types"),
    ("metrics", "Metrics"),
    ("events", "Events"),
    ("dead", "Dead"),
    ("health", "Health"),
)
"""Tab ids and titles, in key order (``1``-``7``)."""

PICKS: dict[str, tuple[str, str]] = {
    "workers": ("workers", "worker"),
    "instances": ("an instance", "instance"),
    "types": ("a type", "type"),
    "dead": ("dead letters", "dead letter"),
}
"""View id -> what an action's key picks there, and the thing it needs: the words of
the one guard every request builder starts with (:meth:`OperatorScreen._picked`)."""

DeadLoader = Callable[[list[str], int], Awaitable[list[DeadLetter]]]
"""Reads the newest N dead letters of some types."""

FIND_KEYS = ("g", "colon")
"""Open the find prompt (an id: task, execution, message, session or trace)."""

PALETTE_HINT_WIDTH = 90
"""Terminal columns from which the footer also shows the ``^p palette`` hint: the
footer's keys and their labels take 72 columns, the hint 12 more."""

_ACTION_KEYS: dict[str, str] = {spec.key: spec.label.lower() for spec in ACTIONS}
"""Action key -> what it would do (for the read-only notice)."""


class MonitorScreen(Screen[None]):
    """Look at the fleet; no action keys.

    Args:
        endpoint: the Redis endpoint, password masked.
        context: the named context, if any.
        detail_loader: reads one worker's detail for the detail screen.
        refresh: seconds between refreshes (the detail screen reuses it).
        describe: turns an error into one display-safe line.
        clock: monotonic seconds (tests freeze it).
        dead_loader: reads the dead letters of some types (the Dead view).
        read_only_reason: why the console is read-only (a flag or the context), for the
            warning an action key gets.
        pending_loader: reads a type's pending entries (the pending screen, ``p``).
        find_loaders: what the find prompt (``g`` / ``:``) and its screens read through.
    """

    read_only = True

    # The parts, looked up when used (each view is composed once and never replaced).
    header = getters.query_one(FleetHeader)
    tabs = getters.query_one("#views", TabbedContent)
    workers_view = getters.query_one(WorkersView)
    instances_view = getters.query_one(InstancesView)
    types_view = getters.query_one(TypesView)
    metrics_view = getters.query_one(MetricsView)
    events_view = getters.query_one(EventsView)
    dead_view = getters.query_one(DeadView)
    health_view = getters.query_one(HealthView)
    jump_crumb = getters.query_one("#jump-crumb", Static)
    """Above the views after a jump from the Health view: where Escape goes back to."""

    class Resumed(Message):
        """The screen is showing again (started, or back from a modal): polling may run."""

    BINDINGS = [
        *(
            Binding(str(i), f"show_view('{view}')", title, show=False)
            for i, (view, title) in enumerate(VIEWS, start=1)
        ),
        # Priority: it runs as the key is read, so the keys typed behind the / reach
        # the filter it opens (a binding otherwise waits until the key has bubbled up,
        # and they would have gone to the table, where e or d are actions).
        Binding("slash", "filter", "Filter", key_display="/", priority=True),
        Binding("escape", "jump_back", "Back", show=False),
        Binding("p", "pending", "Pending", show=False),
        Binding("left_square_bracket", "history_range(-1)", "Shorter range", show=False),
        Binding("right_square_bracket", "history_range(1)", "Longer range", show=False),
        Binding("question_mark", "help", "Help", key_display="?"),
        Binding("q", "app.quit", "Quit"),
        Binding(",".join(FIND_KEYS), "find", "Find id", key_display="g", show=False),
    ]

    def __init__(
        self,
        endpoint: str,
        *,
        context: str | None,
        detail_loader: DetailLoader,
        refresh: float,
        describe: Callable[[BaseException], str],
        clock: Callable[[], float] = time.monotonic,
        dead_loader: DeadLoader | None = None,
        read_only_reason: str = "--read-only",
        pending_loader: PendingLoader | None = None,
        find_loaders: FindLoaders | None = None,
    ) -> None:
        super().__init__()
        self.find_loaders = find_loaders
        self._find_prompt: FindPromptScreen | None = None
        """The open find prompt: keys still reaching this screen are passed to it."""
        self.read_only_why = read_only_reason
        self.dead_loader = dead_loader
        self.pending_loader = pending_loader
        self.endpoint = endpoint
        self.context = context
        self.detail_loader = detail_loader
        self.refresh_interval = refresh
        self.describe = describe
        self.clock = clock
        self.snapshot: FleetSnapshot | None = None
        self.back_to: str | None = None
        """The view Escape returns to after a jump from the Health view (not from a
        Workers drill-down: that one has its own breadcrumb)."""
        self._dead_focus: str | None = None
        """A type whose newest dead letter the cursor goes to once the letters are read."""
        self._jumped_to: str | None = None
        """The view the last jump from the Health view opened."""

    def compose(self) -> ComposeResult:
        """Header, tabs, footer."""
        yield FleetHeader(
            self.endpoint, context=self.context, read_only=self.read_only, clock=self.clock
        )
        yield Static(id="jump-crumb")
        with TabbedContent(id="views"):
            with TabPane(f"1 {VIEWS[0][1]}", id="workers"):
                yield WorkersView(id="workers-view")
            with TabPane(f"2 {VIEWS[1][1]}", id="instances"):
                yield InstancesView(id="instances-view")
            with TabPane(f"3 {VIEWS[2][1]}", id="types"):
                yield TypesView(id="types-view")
            with TabPane(f"4 {VIEWS[3][1]}", id="metrics"):
                yield MetricsView(id="metrics-view")
            with TabPane(f"5 {VIEWS[4][1]}", id="events"):
                yield EventsView(id="events-view")
            with TabPane(f"6 {VIEWS[5][1]}", id="dead"):
                yield DeadView(id="dead-view", actions=not self.read_only)
            with TabPane(f"7 {VIEWS[6][1]}", id="health"):
                yield HealthView(id="health-view")
        yield Footer(compact=True)

    def on_resize(self, event: events.Resize) -> None:
        """Below :data:`PALETTE_HINT_WIDTH` the footer drops its palette hint.

        At 80 columns the hint took the room of the last key's label, leaving a bare
        ``x``; ctrl+p still opens the palette and help lists it.
        """
        self.query_one(Footer).show_command_palette = event.size.width >= PALETTE_HINT_WIDTH

    def on_key(self, event: events.Key) -> None:
        """An action key on a read-only console says why nothing happens."""
        prompt = self._find_prompt
        if prompt is not None and prompt.take_key(event):
            # Typed right after g, before the prompt took over: it belongs to the id.
            event.stop()
            event.prevent_default()
            return
        if prompt is None and event.key in FIND_KEYS:
            # Here, not by the binding alone: a binding runs once the key has bubbled
            # to the app, after the keys typed behind it have reached this screen.
            event.stop()
            event.prevent_default()
            self.action_find()
            return
        if self.read_only and event.key in _ACTION_KEYS:
            event.stop()
            self.notify(
                f"read-only: {_ACTION_KEYS[event.key]} is disabled ({self.read_only_why})",
                severity="warning",
                markup=False,
                timeout=4,
            )

    def on_mount(self) -> None:
        """Start on the workers table; the first refresh starts once the views exist."""
        self.workers_view.table.focus()
        self.on_screen_resume()

    # -- parts ---------------------------------------------------------------------------

    @property
    def active_view(self) -> str:
        """The id of the visible view."""
        return self.tabs.active or VIEWS[0][0]

    # -- data in (attributes down) ---------------------------------------------------------

    def show_snapshot(self, snapshot: FleetSnapshot) -> None:
        """A fresh snapshot: every view diffs itself against it."""
        self.snapshot = snapshot
        header = self.header
        header.snapshot = snapshot
        header.received_at = self.clock()
        header.connected = True
        header.error = ""
        self.tabs.remove_class("-stale")
        self.workers_view.stale = False
        self.workers_view.show_snapshot(snapshot)
        self.instances_view.show_snapshot(snapshot)
        self.types_view.show_snapshot(snapshot)
        self.metrics_view.show_snapshot(snapshot)
        self.events_view.show_snapshot(snapshot)
        self.health_view.show_snapshot(snapshot)
        if self.active_view == "dead":
            self.load_dead()

    @work(exclusive=True, group="dead", exit_on_error=False)
    async def load_dead(self) -> None:
        """Read the dead letters of every type that has some (only while shown)."""
        snapshot, loader = self.snapshot, self.dead_loader
        if snapshot is None or loader is None:
            return
        totals = {t.name: t.dead for t in snapshot.types if t.dead}
        view = self.dead_view
        try:
            # Always read: by-framework's control-plane dead letters belong to no type.
            items = await loader(sorted(totals), DEAD_LIMIT)
        except Exception as exc:  # an outage: the view says so, the console carries on
            view.show_error(self.describe(exc))
            return
        view.show_dead(items, totals, snapshot.generated_at)
        focus, self._dead_focus = self._dead_focus, None
        if focus is not None:
            # Newest first: the first letter of the type is its newest.
            first = next((d for d in items if d.agent_type == focus), None)
            if first is not None:
                view.table.move_to(row_key(first))

    def show_failure(self, error: str, retry_in: float) -> None:
        """A failed refresh: say so, keep the last data and mark it stale."""
        header = self.header
        header.connected = False
        header.error = error
        header.retry_in = retry_in
        if self.snapshot is not None:
            self.tabs.add_class("-stale")
            self.workers_view.stale = True

    def reset(self, endpoint: str, context: str | None) -> None:
        """Another fleet was selected: forget everything shown."""
        self.snapshot = None
        header = self.header
        header.endpoint = endpoint
        header.context = context
        header.snapshot = None
        header.received_at = None
        header.connected = None
        self.workers_view.reset()
        for table in self.query(KeyedTable):
            table.reset()

    def on_screen_resume(self) -> None:
        """Shown, or back from a modal: polling (re)starts (it pauses while one is open)."""
        self.post_message(self.Resumed())

    # -- navigation --------------------------------------------------------------------------

    def action_show_view(self, view: str) -> None:
        """Switch to a view and focus its table."""
        if view not in dict(VIEWS):
            return
        self.show_jump_crumb(None)
        self.tabs.active = view
        tables = self.query_one(f"#{view}-view").query(KeyedTable)
        # set_focus, not focus(): focus() is deferred, and would land after whatever
        # the next key (already queued) focuses, e.g. the filter input.
        self.set_focus(tables.first() if tables else None)
        self.refresh_bindings()
        if view == "dead":
            self.load_dead()

    @on(TabbedContent.TabActivated)
    def _tab_changed(self) -> None:
        self.refresh_bindings()
        if self.back_to is not None and self.active_view != self._jumped_to:
            self.show_jump_crumb(None)  # left the jump's view another way (a click)

    def action_history_range(self, step: int) -> None:
        """``[`` / ``]``: the Metrics view's previous / next time range."""
        if self.active_view != "metrics":
            self.notify("Time ranges are in the Metrics view (4).", severity="warning")
            return
        self.metrics_view.cycle_range(step)

    def action_filter(self) -> None:
        """Open the workers filter."""
        self.tabs.active = "workers"
        self.workers_view.open_filter()

    def action_help(self) -> None:
        """Show the keys."""
        self.app.push_screen(HelpScreen(self.read_only))

    def action_pending(self) -> None:
        """``p`` on the Types view: the selected type's pending entries."""
        selected = self.types_view.selected() if self.active_view == "types" else None
        if selected is None or self.pending_loader is None:
            self.notify(
                "Pending entries: select a type in the Types view (3), then p.",
                severity="warning",
            )
            return
        self.app.push_screen(self.pending_screen(selected.name, self.pending_loader))

    def pending_screen(self, agent_type: str, loader: PendingLoader) -> PendingScreen:
        """The pending screen of ``agent_type`` (read-only here)."""
        return PendingScreen(
            agent_type,
            loader,
            refresh=self.refresh_interval,
            describe=self.describe,
            read_only_reason=self.read_only_why,
        )

    def action_find(self) -> None:
        """Ask for an id (``g`` / ``:``), then show what it is."""
        loaders = self.find_loaders
        if loaders is None:
            self.notify("finding ids is not available here", markup=False)
            return

        def found(lookup_id: str | None) -> None:
            self._find_prompt = None
            if lookup_id:
                self.app.push_screen(FindScreen(lookup_id, loaders, self.describe))

        self._find_prompt = FindPromptScreen()
        self.app.push_screen(self._find_prompt, found)

    @on(DataTable.RowSelected, "#types-table")
    def _drill_type(self, event: DataTable.RowSelected) -> None:
        event.stop()
        selected = self.types_view.selected()
        if selected is not None:
            self.drill_down(("type", selected.name), "types")

    @on(DataTable.RowSelected, "#instances-table")
    def _drill_instance(self, event: DataTable.RowSelected) -> None:
        event.stop()
        selected = self.instances_view.selected()
        if selected is not None:
            self.drill_down(("instance", selected[0]), "instances")

    def drill_down(self, scope: tuple[str, str], origin: str) -> None:
        """Open the Workers view on the workers of one type or instance (k9s style)."""
        self.workers_view.set_scope(scope, origin)
        self.action_show_view("workers")

    @on(WorkersView.ScopeClosed)
    def _drill_back(self, event: WorkersView.ScopeClosed) -> None:
        if event.origin:
            self.action_show_view(event.origin)

    @on(WorkersView.DetailRequested)
    def _open_detail(self, event: WorkersView.DetailRequested) -> None:
        self.open_detail(event.worker_id)

    def open_detail(self, worker_id: str) -> None:
        """Open one worker's detail screen (Escape closes it)."""
        self.app.push_screen(
            DetailScreen(
                worker_id,
                self.detail_loader,
                refresh=self.refresh_interval,
                describe=self.describe,
            )
        )

    # -- from an alert to what it concerns -----------------------------------------------

    @on(DataTable.RowSelected, "#health-table")
    def _jump_from_alert(self, event: DataTable.RowSelected) -> None:
        event.stop()
        alert = self.health_view.selected()
        if alert is not None:
            self.jump(jump_target(alert))

    def jump(self, target: Jump) -> None:
        """Go where an alert leads; Escape comes back to the Health view.

        A type's workers reuse the Types view's drill-down (its breadcrumb, its Escape);
        a worker's detail and a type's pending entries are modal screens (Escape closes
        them); any other view gets the
        crumb above the views and the screen's Escape.
        """
        if target.view == "detail" and target.name:
            self.open_detail(target.name)
        elif target.view == "pending" and target.name and self.pending_loader is not None:
            self.app.push_screen(self.pending_screen(target.name, self.pending_loader))
        elif target.view == "workers" and target.name:
            self.drill_down(("type", target.name), "health")
        else:
            self._dead_focus = target.name if target.view == "dead" else None
            self.action_show_view(target.view)
            self.back_to, self._jumped_to = "health", target.view
            self.show_jump_crumb(target)

    def show_jump_crumb(self, target: Jump | None) -> None:
        """Show where a jump led and that Escape goes back (``None``: hide it)."""
        if target is None:
            self.back_to = None
        crumb = self.jump_crumb
        crumb.set_class(target is not None, "-open")
        if target is None:
            crumb.update("")
            return
        text = Text(" Health \u203a ", style="bold")
        text.append(target.describe())
        text.append("   esc: back", style="dim")
        crumb.update(text)

    def action_jump_back(self) -> None:
        """Escape after a jump: back to the Health view (else the key goes on)."""
        if self.back_to is None:
            raise SkipAction()
        self.action_show_view(self.back_to)


class OperatorScreen(MonitorScreen):
    """The main screen with the action keys bound.

    Args:
        max_scale: the largest replica count the scale prompt accepts.
        **kwargs: as :class:`MonitorScreen`.
    """

    read_only = False

    BINDINGS = [
        *(
            Binding(spec.key, verb_binding(spec.action), spec.label, show=spec.footer)
            for spec in ACTIONS
        ),
        *(Binding(f.key, form_binding(f.form), f.label, show=False) for f in FORM_SPECS),
        Binding("space", "mark", "Mark", show=False),
    ]

    class ActionRequested(Message):
        """The operator chose and confirmed an action; the app carries it out."""

        def __init__(self, request: ActionRequest) -> None:
            super().__init__()
            self.request = request

    def __init__(
        self,
        endpoint: str,
        *,
        max_scale: int,
        context: str | None,
        detail_loader: DetailLoader,
        refresh: float,
        describe: Callable[[BaseException], str],
        clock: Callable[[], float] = time.monotonic,
        dead_loader: DeadLoader | None = None,
        pending_loader: PendingLoader | None = None,
        find_loaders: FindLoaders | None = None,
    ) -> None:
        super().__init__(
            endpoint,
            context=context,
            detail_loader=detail_loader,
            refresh=refresh,
            describe=describe,
            clock=clock,
            dead_loader=dead_loader,
            read_only_reason="",
            pending_loader=pending_loader,
            find_loaders=find_loaders,
        )
        self.max_scale = max_scale

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Worker actions are greyed out away from the Workers view."""
        spec = BY_BINDING.get(action)
        if action == "verb" and parameters and isinstance(parameters[0], str):
            spec = SPECS.get(Action(parameters[0]))
        if action == "form":
            views = ("workers", *ROLLING_VIEWS)
            return True if not self.is_mounted or self.active_view in views else None
        if spec is None:
            return True
        if spec.per_worker and self.is_mounted and self.active_view == "dead":
            return False  # hidden: the Dead view's keys are R and P
        if spec.action is Action.RESTART and self.is_mounted:
            return True if self.active_view in ("workers", *ROLLING_VIEWS) else None
        if spec.action is Action.CONFIG_SET:
            return True if not self.is_mounted or self.active_view == "types" else None
        if spec.per_worker and self.is_mounted and self.active_view != "workers":
            return None
        if spec.action in TYPE_ACTIONS:
            return True if not self.is_mounted or self.active_view == "types" else None
        dead_action = spec.action in DEAD_ACTIONS
        if self.is_mounted and dead_action != (self.active_view == "dead"):
            return not dead_action  # R and P: shown in the Dead view only
        return True

    # -- the action keys ------------------------------------------------------------------------

    def action_mark(self) -> None:
        """Mark the worker under the cursor for a bulk action."""
        if self.active_view == "workers":
            self.workers_view.toggle_mark()

    def action_verb(self, name: str) -> None:
        """A verb's key (bound from :data:`ACTIONS`, so every verb of the table has one)."""
        action = Action(name)
        if action is Action.DEAD_LETTER:
            self.action_dead_letter()
            return
        self.request_action(action)

    def action_form(self, name: str) -> None:
        """A form's key (``K``: stop), bound from :data:`FORM_SPECS`."""
        if name == STOP.name:
            self.request_stop()

    def action_dead_letter(self) -> None:
        """``D``: acts on the pending screen; here, on Types, it opens that screen."""
        if self.active_view == "types":
            self.action_pending()
            return
        self.notify(
            "D dead-letters a pending entry: open a type's pending entries (p on Types).",
            severity="warning",
        )

    def hand_up(self, request: ActionRequest) -> None:
        """Post a request confirmed elsewhere (the pending screen) to the app."""
        self.post_message(self.ActionRequested(request))

    def pending_screen(self, agent_type: str, loader: PendingLoader) -> PendingScreen:
        """The pending screen of ``agent_type``, with ``D``."""
        return OperatorPendingScreen(
            agent_type,
            loader,
            request=self.hand_up,
            refresh=self.refresh_interval,
            describe=self.describe,
        )

    @work(exclusive=True, group="operator")
    async def request_action(self, action: Action) -> None:
        """Ask what is needed (type, count, confirmation), then hand the request up."""
        # What to ask for follows the verb's argument shape (byconsole/verbs.py).
        args = SPECS[action].verb.args
        if action is Action.RESTART and self.active_view in ROLLING_VIEWS:
            request = await self._rolling_request()
        elif args is Args.TYPE_CONFIG:
            request = self._config_request()
        elif args is Args.TYPE_COUNT:
            request = await self._scale_request()
        elif args is Args.DEAD_ENTRIES:
            request = await self._dead_request(action)
        elif args is Args.TYPE:
            request = await self._type_request(action)
        else:
            request = await self._worker_request(action)
        if request is not None:
            self.post_message(self.ActionRequested(request))
            if request.action is not Action.SCALE and self.workers_view.marks:
                # The marks were the targets (one or many): done with them.
                self.workers_view.clear_marks()

    @overload
    def _picked(self, view: Literal["workers"]) -> tuple[str, ...] | None: ...
    @overload
    def _picked(self, view: Literal["instances"]) -> tuple[str, str | None] | None: ...
    @overload
    def _picked(self, view: Literal["types"]) -> TypeView | None: ...
    @overload
    def _picked(self, view: Literal["dead"]) -> DeadLetter | None: ...
    def _picked(self, view: str) -> object:
        """What the operator selected in ``view`` for an action: the marked workers
        (else the one under the cursor), the instance row ``(instance id, agent type)``,
        the type or the dead letter under the cursor.

        Returns:
            ``None`` after one warning when the operator is in another view (``Pick a
            type in the Types view (3).``) or has nothing selected there (``No type
            selected.``).
        """
        what = PICKS[view][0]
        if self.active_view != view:
            key, title = next((i, t) for i, (v, t) in enumerate(VIEWS, start=1) if v == view)
            self.notify(f"Pick {what} in the {title} view ({key}).", severity="warning")
            return None
        selected: object
        if view == "workers":
            selected = self.workers_view.target_ids() or None
        elif view == "instances":
            selected = self.instances_view.selected()
        elif view == "types":
            selected = self.types_view.selected()
        else:
            selected = self.dead_view.selected()
        if selected is None:
            self._nothing_selected(view)
        return selected

    def _nothing_selected(self, view: str) -> None:
        self.notify(f"No {PICKS[view][1]} selected.", severity="warning")

    def _picked_scope(self) -> tuple[str | None, str | None] | None:
        """``(agent type, instance id)`` of the Instances view's row, else of the Types
        view's; ``None`` after :meth:`_picked`'s warning."""
        if self.active_view == "instances":
            row = self._picked("instances")
            return (row[1], row[0]) if row is not None else None
        view = self._picked("types")
        return (view.name, None) if view is not None else None

    def replicas_of(self, agent_type: str | None, instance_id: str | None) -> list[str]:
        """Live replicas serving the scope, as the last snapshot lists them."""
        workers = self.snapshot.workers if self.snapshot else []
        return sorted(
            w.worker_id
            for w in workers
            if w.runtime is not None
            and (agent_type is None or agent_type in w.agent_types)
            and (instance_id is None or w.instance_id == instance_id)
        )

    async def _rolling_request(self) -> ActionRequest | None:
        """``t`` on Types / Instances: a rolling restart of the selection's replicas."""
        scope = self._picked_scope()
        if scope is None:
            return None
        agent_type, instance_id = scope
        ids = self.replicas_of(agent_type, instance_id)
        if not ids:
            self.notify("No live replica serves it.", severity="warning")
            return None
        what = safe_text(agent_type or "every type", 40)
        where = f" on {safe_text(instance_id, 40)}" if instance_id else ""
        warning = (
            f"Rolling restart of {what}{where}: one replica at a time per instance, each "
            "replacement online (a new worker id) before the next goes; a replica that is "
            "not replaced halts its instance. "
            + SPECS[Action.RESTART].verb.warning_for(
                [w.runtime for w in self.workers_view.workers_by_id(ids)]
            )
        )
        per_instance = Counter(
            w.instance_id for w in self.workers_view.workers_by_id(ids) if w.instance_id
        )
        dialog = RollingConfirmScreen(
            f"Restart {what}{where}",
            ids,
            largest=max(per_instance.values(), default=1),
            warning=warning,
        )
        reason = await self.app.push_screen_wait(dialog)
        if reason is None:
            return None
        return ActionRequest(
            Action.RESTART,
            agent_type=agent_type,
            instance_id=instance_id,
            reason=reason or None,
            max_unavailable=dialog.max_unavailable,
        )

    def _config_request(self) -> ActionRequest | None:
        """``c`` on Types: the app opens the type's configuration editor."""
        view = self._picked("types")
        if view is None:
            return None
        return ActionRequest(Action.CONFIG_SET, agent_type=view.name)

    @work(exclusive=True, group="operator")
    async def request_stop(self) -> None:
        """``K``: stop the selection for good (README, "Restart, stop and pinned calls"),
        written as the verb the stop form maps to (a drain, or a scale to 0)."""
        request = await self._stop_request()
        if request is not None:
            self.post_message(self.ActionRequested(request))
            if self.workers_view.marks and request.action is Action.DRAIN:
                self.workers_view.clear_marks()

    async def _stop_request(self) -> ActionRequest | None:
        view = self.active_view
        if view == "workers":
            ids = self._picked("workers") or ()
            if not ids:
                return None
            scope, targets = "replica", list(ids)
            what = f"{len(ids)} replica(s): each drains (finishes its tasks, exits)"
            agent_type: str | None = None
            instance_id: str | None = None
        else:
            selected = self._picked_scope()
            if selected is None:
                return None
            agent_type, instance_id = selected
            if agent_type is None:  # an instance's row without a type: stop scales a type
                self._nothing_selected("types")
                return None
            nothing_scales = (
                unscalable(self.snapshot, agent_type, instance_id) if self.snapshot else None
            )
            if nothing_scales:
                # Stopping a type is scale T 0, which nothing here would run.
                self.notify(nothing_scales, severity="warning", markup=False, timeout=10)
                return None
            scope = "instance" if instance_id else "type"
            targets = self.replicas_of(agent_type, instance_id) or [agent_type]
            where = f"on {safe_text(instance_id, 40)}" if instance_id else "fleet-wide"
            what = (
                f"every replica of {safe_text(agent_type, 40)} {where}: "
                f"scale {safe_text(agent_type, 40)} 0"
                + (f" --instance {safe_text(instance_id, 40)}" if instance_id else "")
            )
            ids = ()
        reason = await self.app.push_screen_wait(
            ConfirmScreen(
                f"{STOP.label} {'replica' if scope == 'replica' else safe_text(agent_type, 40)}",
                targets,
                warning=f"Stops {what}. {STOP.warning}",
                destructive=True,
            )
        )
        if reason is None:
            return None
        written = STOP.writes_for(scope)
        if written is Action.DRAIN:
            return ActionRequest(written, tuple(ids), reason=reason or None)
        steps = plan_scale(self.snapshot, agent_type or "", instance_id, 0) if self.snapshot else []
        return ActionRequest(
            written,
            agent_type=agent_type,
            instance_id=instance_id,
            count=0,
            reason=reason or None,
            plan="; ".join(s.describe() for s in steps) or "no live instance serves it",
        )

    async def _worker_request(self, action: Action) -> ActionRequest | None:
        spec = SPECS[action]
        ids = self._picked("workers")
        if ids is None:
            return None
        agent_type: str | None = None
        if action in (Action.DENY, Action.ALLOW):
            views = self.workers_view.workers_by_id(ids)
            if action is Action.DENY:
                choices = {t for w in views for t in w.agent_types if t not in w.denied_types}
            else:
                choices = {t for w in views for t in w.denied_types}
            agent_type = await self._choose(f"{spec.label} for which type?", sorted(choices))
            if agent_type is None:
                return None
        reason: str | None = None
        if spec.destructive or len(ids) > 1:
            verb = spec.label if agent_type is None else f"{spec.label} {agent_type} for"
            # By what each target's lease says (a forced eviction cancels on some only).
            targets = self.workers_view.workers_by_id(ids)
            warning = spec.verb.warning_for(
                [w.runtime for w in targets], [w.force_evict for w in targets]
            )
            reason = await self.app.push_screen_wait(
                ConfirmScreen(
                    safe_text(verb, 60),
                    ids,
                    warning=warning,
                    destructive=spec.destructive,
                )
            )
            if reason is None:
                return None
        return ActionRequest(action, ids, agent_type=agent_type, reason=reason or None)

    async def _dead_request(self, action: Action) -> ActionRequest | None:
        spec = SPECS[action]
        dead = self._picked("dead")
        if dead is None:
            return None
        if dead.read_only:
            self.notify(
                "by-framework's control-plane dead letters are read-only here "
                "(its control plane owns them).",
                severity="warning",
            )
            return None
        agent_type = dead.agent_type
        known = self.snapshot.type(agent_type) if self.snapshot else None
        # "All" is frozen now, at what the operator is shown: the rows' ids when the view
        # holds every letter of the type, else the newest row as the bound (stream ids
        # only grow). Letters that die while the dialog is open are left alone.
        rows = sorted(
            (d.entry_id for d in self.dead_view.items.values() if d.agent_type == agent_type),
            key=_entry_order,
        )
        whole = len(rows) >= (known.dead if known else 0)
        total = len(rows) if whole else (known.dead if known else 0)
        one = f"this dead letter ({safe_text(dead.entry_id, 30)})"
        every = f"all {total:,} dead letters of {safe_text(agent_type, 30)}"
        scope = await self._choose(f"{spec.label} what?", [one, every]) if total > 1 else one
        if scope is None:
            return None
        ids = (dead.entry_id,) if scope == one else (tuple(rows) if whole else ())
        upto = None if scope == one else rows[-1]
        where = (
            "back on its stream, attempts reset" if action is Action.DEAD_REQUEUE else "for good"
        )
        listed = [f"{total:,} dead letters of {agent_type} (up to {upto})"] if upto else list(ids)
        later = " Dead letters that arrive meanwhile are left alone." if upto else ""
        reason = await self.app.push_screen_wait(
            ConfirmScreen(
                spec.label,
                listed,
                warning=f"{spec.label} {scope} {where}. Written to the audit log.{later}",
                destructive=spec.destructive,
            )
        )
        if reason is None:
            return None
        return ActionRequest(
            action,
            agent_type=agent_type,
            entry_ids=ids,
            reason=reason or None,
            upto=upto,
            shown=total if upto else len(ids),
        )

    async def _type_request(self, action: Action) -> ActionRequest | None:
        """Pause (confirm + reason) or resume the type under the cursor."""
        spec = SPECS[action]
        view = self._picked("types")
        if view is None:
            return None
        if action is Action.RESUME_TYPE:
            if not view.paused:
                self.notify(f"{safe_text(view.name, 40)} is not paused.", severity="warning")
                return None
            return ActionRequest(action, agent_type=view.name)
        lines = ["Every worker of the type stops taking its tasks; running ones finish."]
        workers = self.snapshot.workers if self.snapshot else []
        theirs = [
            w.worker_id
            for w in workers
            if view.name in w.agent_types and w.runtime == "by-framework"
        ]
        if theirs:
            lines.append(
                f"{len(theirs)} by-framework worker(s) cannot apply a pause: they are put "
                "on the type's denylist instead (resume takes exactly those off)."
            )
        reason = await self.app.push_screen_wait(
            ConfirmScreen(
                f"{spec.label} type",
                [view.name],
                warning="\n".join(lines),
                destructive=spec.destructive,
            )
        )
        if reason is None:
            return None
        return ActionRequest(action, agent_type=view.name, reason=reason or None)

    async def _choose(self, title: str, choices: Sequence[str]) -> str | None:
        if not choices:
            self.notify("No type to choose from.", severity="warning")
            return None
        if len(choices) == 1:
            return choices[0]
        return await self.app.push_screen_wait(ChoiceScreen(title, choices))

    async def _scale_request(self) -> ActionRequest | None:
        snapshot = self.snapshot
        if snapshot is None:
            self.notify("No data yet.", severity="warning")
            return None
        all_types = [t.name for t in snapshot.types]
        instance_id: str | None = None
        agent_type: str | None = None
        view = self.active_view
        if view == "instances":
            selected = self._picked("instances")
            if selected is None:
                return None
            instance_id, agent_type = selected
        elif view == "types":
            type_view = self.types_view.selected()
            agent_type = type_view.name if type_view else None
        elif view == "workers":
            worker = self.workers_view.cursor_worker
            if worker is not None:
                agent_type = await self._choose("Scale which type?", worker.agent_types)
                if agent_type is None:
                    return None
        if agent_type is None:
            agent_type = await self._choose("Scale which type?", all_types)
            if agent_type is None:
                return None
        current = _current_count(snapshot, agent_type, instance_id)
        where = f" on {safe_text(instance_id, 40)}" if instance_id else " (all instances)"
        nothing_scales = unscalable(snapshot, agent_type, instance_id)
        if nothing_scales:
            self.notify(nothing_scales, severity="warning", markup=False, timeout=10)
            return None
        count = await self.app.push_screen_wait(
            CountScreen(f"Scale {safe_text(agent_type, 30)}{where}", current, self.max_scale)
        )
        if count is None:
            return None
        reason: str | None = None
        steps = plan_scale(snapshot, agent_type, instance_id, count)
        plan = "; ".join(step.describe() for step in steps) or "no live instance serves it"
        shrinks = any(step.after < step.running for step in steps)
        if shrinks or (current is not None and count < current):
            target = f"{agent_type}@{instance_id}" if instance_id else agent_type
            lines = [step.describe() for step in steps[:6]]
            lines += plan_outcomes(steps[:6])
            if instance_id:
                lines.append("other instances are left unchanged")
            reason = await self.app.push_screen_wait(
                ConfirmScreen(
                    "Scale down",
                    [target],
                    warning="\n".join(lines) or "no live instance serves it",
                )
            )
            if reason is None:
                return None
        return ActionRequest(
            Action.SCALE,
            agent_type=agent_type,
            instance_id=instance_id,
            count=count,
            reason=reason or None,
            plan=plan,
        )


def _entry_order(entry_id: str) -> tuple[int, int]:
    """A stream entry id's place in its stream (``ms-seq``, compared as numbers)."""
    ms, _, seq = entry_id.partition("-")
    return (int(ms) if ms.isdigit() else 0, int(seq) if seq.isdigit() else 0)


def _current_count(snapshot: FleetSnapshot, agent_type: str, instance_id: str | None) -> int | None:
    """What a scale replaces: the instance's quota (or replicas), else the type's target
    (or its live replicas when no target is set)."""
    if instance_id is not None:
        for instance in snapshot.instances:
            if instance.instance_id == instance_id:
                quota = instance.quota.get(agent_type)
                return quota if quota is not None else instance.replicas.get(agent_type)
        return None
    for type_view in snapshot.types:
        if type_view.name == agent_type and type_view.target is not None:
            return type_view.target
    live = sum(i.replicas.get(agent_type, 0) for i in snapshot.instances if i.online)
    return live or None
