"""An action's key with nothing to act on: one warning, in the same words in every view.

Every request builder of the operator screen starts with the one guard
(``OperatorScreen._picked``): away from the view its targets are picked in, ``Pick …
in the … view (n).``; there with nothing selected, ``No … selected.``. Nothing is
sent either way.
"""

from __future__ import annotations

import pytest

from byconsole.tui.actions import Action, ActionOutcome, ActionRequest
from byconsole.tui.app import ConsoleApp
from byconsole.tui.backend import Progress, StaticBackend
from byconsole.tui.screens.main import VIEWS, OperatorScreen
from byconsole.verbs import STOP
from tests.tui.conftest import toasts, until
from tests.tui.fleet_data import sample_snapshot

EMPTY = sample_snapshot().model_copy(update={"workers": [], "instances": [], "types": []})
"""A fleet with no rows: nothing can be selected in any view."""

STOPPED = STOP.name
"""The stop form's key (``K``), which is no verb of its own."""


class Records(StaticBackend):
    """Records what the app sends (nothing, here)."""

    def __init__(self, empty: bool) -> None:
        super().__init__(EMPTY if empty else sample_snapshot())
        self.sent: list[ActionRequest] = []

    async def send(
        self, request: ActionRequest, progress: Progress | None = None
    ) -> list[ActionOutcome]:
        self.sent.append(request)
        return []


async def _warned(view: str, verb: Action | str, *, empty: bool) -> list[str]:
    """The warnings of ``verb``'s key pressed in ``view`` (its builder run, its
    dialogs never reached)."""
    backend = Records(empty)
    app = ConsoleApp(backend, refresh=3600, clock=lambda: 1.0)
    async with app.run_test(size=(120, 36), notifications=True) as pilot:
        await until(pilot, lambda: app.snapshot is not None)
        main = app.main_screen
        assert isinstance(main, OperatorScreen)
        main.tabs.active = view
        await until(pilot, lambda: main.active_view == view)
        worker = main.request_stop() if verb == STOPPED else main.request_action(Action(verb))
        await until(pilot, lambda: worker.is_finished)
        await pilot.pause()
        assert backend.sent == []
        return toasts(app, severity="warning")


NOTHING_SELECTED = [
    ("workers", Action.SUSPEND, "No worker selected."),
    ("workers", STOPPED, "No worker selected."),
    ("instances", Action.SCALE, "No instance selected."),
    ("instances", Action.RESTART, "No instance selected."),
    ("instances", STOPPED, "No instance selected."),
    ("types", Action.PAUSE_TYPE, "No type selected."),
    ("types", Action.CONFIG_SET, "No type selected."),
    ("types", Action.RESTART, "No type selected."),
    ("types", STOPPED, "No type selected."),
    ("dead", Action.DEAD_REQUEUE, "No dead letter selected."),
]


@pytest.mark.parametrize(
    ("view", "verb", "said"), NOTHING_SELECTED, ids=[f"{v}-{a}" for v, a, _ in NOTHING_SELECTED]
)
async def test_nothing_selected_is_said_once_in_the_views_words(
    view: str, verb: Action | str, said: str
) -> None:
    assert await _warned(view, verb, empty=True) == [said]


ELSEWHERE = [
    ("types", Action.SUSPEND, "Pick workers in the Workers view (1)."),
    ("workers", Action.PAUSE_TYPE, "Pick a type in the Types view (3)."),
    ("workers", Action.CONFIG_SET, "Pick a type in the Types view (3)."),
    ("workers", Action.DEAD_PURGE, "Pick dead letters in the Dead view (6)."),
]


@pytest.mark.parametrize(
    ("view", "verb", "said"), ELSEWHERE, ids=[f"{v}-{a}" for v, a, _ in ELSEWHERE]
)
async def test_another_view_names_the_view_and_its_key(view: str, verb: Action, said: str) -> None:
    assert await _warned(view, verb, empty=False) == [said]
    # The view's key in the words is the key that shows it.
    title = said.split(" in the ")[1].split(" view")[0]
    assert f"({[t for _, t in VIEWS].index(title) + 1})" in said
