"""The main screen: header, the five views as tabs, footer.

:class:`MonitorScreen` only looks (``--read-only``); :class:`OperatorScreen` adds the
action keys. Read-only mode uses the first class, so the action bindings do not exist
at all rather than being disabled.

Action keys run as: key -> prompts/confirmation (modal screens, awaited in a worker) ->
:class:`OperatorScreen.ActionRequested` message up to the app, which owns Redis.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence

from textual import events, getters, on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.message import Message
from textual.screen import Screen
from textual.widgets import DataTable, Footer, TabbedContent, TabPane

from byconsole.outcomes import plan_scale
from byconsole.text import safe_text
from byconsole.tui.actions import (
    ACTIONS,
    BY_BINDING,
    DEAD_ACTIONS,
    SPECS,
    Action,
    ActionRequest,
    binding_name,
)
from byconsole.tui.screens.confirm import ConfirmScreen
from byconsole.tui.screens.detail import DetailLoader, DetailScreen
from byconsole.tui.screens.help import HelpScreen
from byconsole.tui.screens.prompt import ChoiceScreen, CountScreen
from byconsole.tui.views.dead import LIMIT as DEAD_LIMIT
from byconsole.tui.views.dead import DeadView
from byconsole.tui.views.events import EventsView
from byconsole.tui.views.instances import InstancesView
from byconsole.tui.views.metrics import MetricsView
from byconsole.tui.views.types import TypesView
from byconsole.tui.views.workers import WorkersView
from byconsole.tui.widgets.header import FleetHeader
from byconsole.tui.widgets.keyed_table import KeyedTable
from worker_runtime.dead_letters import DeadLetter
from worker_runtime.snapshot import FleetSnapshot

VIEWS: tuple[tuple[str, str], ...] = (
    ("workers", "Workers"),
    ("instances", "Instances"),
    ("types", "Types"),
    ("metrics", "Metrics"),
    ("events", "Events"),
    ("dead", "Dead"),
)
"""Tab ids and titles, in key order (``1``-``6``)."""

DeadLoader = Callable[[list[str], int], Awaitable[list[DeadLetter]]]
"""Reads the newest N dead letters of some types."""

_ACTION_KEYS: dict[str, str] = {spec.key: spec.label.lower() for spec in ACTIONS}
"""Action key -> what it would do (for the read-only notice)."""

WARNINGS: dict[Action, str] = {
    Action.EVICT: "Leaves routing and drops its lease; it takes no new tasks.",
    Action.FORCE_EVICT: "Also cancels running tasks: their entries stay un-acked and "
    "another worker reclaims them.",
    Action.DRAIN: "Leaves routing, finishes in-flight tasks, then exits (not restarted).",
}


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

    class Resumed(Message):
        """The screen is showing again (started, or back from a modal): polling may run."""

    BINDINGS = [
        *(
            Binding(str(i), f"show_view('{view}')", title, show=False)
            for i, (view, title) in enumerate(VIEWS, start=1)
        ),
        Binding("slash", "filter", "Filter", key_display="/"),
        Binding("left_square_bracket", "history_range(-1)", "Shorter range", show=False),
        Binding("right_square_bracket", "history_range(1)", "Longer range", show=False),
        Binding("question_mark", "help", "Help", key_display="?"),
        Binding("q", "app.quit", "Quit"),
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
    ) -> None:
        super().__init__()
        self.read_only_why = read_only_reason
        self.dead_loader = dead_loader
        self.endpoint = endpoint
        self.context = context
        self.detail_loader = detail_loader
        self.refresh_interval = refresh
        self.describe = describe
        self.clock = clock
        self.snapshot: FleetSnapshot | None = None

    def compose(self) -> ComposeResult:
        """Header, tabs, footer."""
        yield FleetHeader(
            self.endpoint, context=self.context, read_only=self.read_only, clock=self.clock
        )
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
                yield DeadView(id="dead-view")
        yield Footer(compact=True)

    def on_key(self, event: events.Key) -> None:
        """An action key on a read-only console says why nothing happens."""
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
            items = await loader(sorted(totals), DEAD_LIMIT) if totals else []
        except Exception as exc:  # an outage: the view says so, the console carries on
            view.show_error(self.describe(exc))
            return
        view.show_dead(items, totals, snapshot.generated_at)

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
        self.app.push_screen(
            DetailScreen(
                event.worker_id,
                self.detail_loader,
                refresh=self.refresh_interval,
                describe=self.describe,
            )
        )


class OperatorScreen(MonitorScreen):
    """The main screen with the action keys bound.

    Args:
        max_scale: the largest replica count the scale prompt accepts.
        **kwargs: as :class:`MonitorScreen`.
    """

    read_only = False

    BINDINGS = [
        *(
            Binding(spec.key, binding_name(spec.action), spec.label, show=spec.footer)
            for spec in ACTIONS
        ),
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
        )
        self.max_scale = max_scale

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Worker actions are greyed out away from the Workers view."""
        spec = BY_BINDING.get(action)
        if spec is None:
            return True
        if spec.per_worker and self.is_mounted and self.active_view != "workers":
            return None
        dead_action = spec.action in DEAD_ACTIONS
        if self.is_mounted and dead_action != (self.active_view == "dead"):
            return None if dead_action else True
        return True

    # -- the action keys ------------------------------------------------------------------------

    def action_mark(self) -> None:
        """Mark the worker under the cursor for a bulk action."""
        if self.active_view == "workers":
            self.workers_view.toggle_mark()

    def action_suspend(self) -> None:
        """``s``."""
        self.request_action(Action.SUSPEND)

    def action_resume(self) -> None:
        """``r``."""
        self.request_action(Action.RESUME)

    def action_evict(self) -> None:
        """``e``."""
        self.request_action(Action.EVICT)

    def action_force_evict(self) -> None:
        """``E``."""
        self.request_action(Action.FORCE_EVICT)

    def action_drain(self) -> None:
        """``d``."""
        self.request_action(Action.DRAIN)

    def action_deny(self) -> None:
        """``x``."""
        self.request_action(Action.DENY)

    def action_allow(self) -> None:
        """``a``."""
        self.request_action(Action.ALLOW)

    def action_scale(self) -> None:
        """``S``."""
        self.request_action(Action.SCALE)

    def action_dead_requeue(self) -> None:
        """``R`` (Dead view)."""
        self.request_action(Action.DEAD_REQUEUE)

    def action_dead_purge(self) -> None:
        """``P`` (Dead view)."""
        self.request_action(Action.DEAD_PURGE)

    @work(exclusive=True, group="operator")
    async def request_action(self, action: Action) -> None:
        """Ask what is needed (type, count, confirmation), then hand the request up."""
        if action is Action.SCALE:
            request = await self._scale_request()
        elif action in DEAD_ACTIONS:
            request = await self._dead_request(action)
        else:
            request = await self._worker_request(action)
        if request is not None:
            self.post_message(self.ActionRequested(request))
            if request.action is not Action.SCALE and self.workers_view.marks:
                # The marks were the targets (one or many): done with them.
                self.workers_view.clear_marks()

    async def _worker_request(self, action: Action) -> ActionRequest | None:
        spec = SPECS[action]
        if self.active_view != "workers":
            self.notify("Pick workers in the Workers view (1).", severity="warning")
            return None
        ids = self.workers_view.target_ids()
        if not ids:
            self.notify("No worker selected.", severity="warning")
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
            reason = await self.app.push_screen_wait(
                ConfirmScreen(
                    safe_text(verb, 60),
                    ids,
                    warning=WARNINGS.get(action, ""),
                    destructive=spec.destructive,
                )
            )
            if reason is None:
                return None
        return ActionRequest(action, ids, agent_type=agent_type, reason=reason or None)

    async def _dead_request(self, action: Action) -> ActionRequest | None:
        spec = SPECS[action]
        if self.active_view != "dead":
            self.notify("Pick dead letters in the Dead view (6).", severity="warning")
            return None
        dead = self.dead_view.selected()
        if dead is None:
            self.notify("No dead letter selected.", severity="warning")
            return None
        agent_type = dead.agent_type
        known = self.snapshot.type(agent_type) if self.snapshot else None
        total = known.dead if known else 0
        one = f"this dead letter ({safe_text(dead.entry_id, 30)})"
        every = f"all {total:,} dead letters of {safe_text(agent_type, 30)}"
        scope = await self._choose(f"{spec.label} what?", [one, every]) if total > 1 else one
        if scope is None:
            return None
        ids = (dead.entry_id,) if scope == one else ()
        where = (
            "back on its stream, attempts reset" if action is Action.DEAD_REQUEUE else "for good"
        )
        reason = await self.app.push_screen_wait(
            ConfirmScreen(
                spec.label,
                list(ids) or [f"every dead letter of {agent_type}"],
                warning=f"{spec.label} {scope} {where}. Written to the audit log.",
                destructive=spec.destructive,
            )
        )
        if reason is None:
            return None
        return ActionRequest(action, agent_type=agent_type, entry_ids=ids, reason=reason or None)

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
            selected = self.instances_view.selected()
            if selected is None:
                self.notify("No instance selected.", severity="warning")
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
