"""At 80x24: every footer key keeps its label, the Types view keeps dead and target
whatever the routable list holds, and the Events view keeps the details column."""

from __future__ import annotations

import re
from html import unescape

from byconsole.tui.app import ConsoleApp
from byconsole.tui.backend import StaticBackend
from tests.tui.conftest import until
from tests.tui.fleet_data import sample_dead, sample_snapshot
from worker_runtime.models import AuditEvent
from worker_runtime.snapshot import FleetSnapshot


def _screen_text(app: ConsoleApp) -> str:
    """What the terminal shows: the screenshot's text, one string."""
    svg = app.export_screenshot()
    return unescape(" ".join(re.findall(r">([^<>]*)</text>", svg))).replace("\xa0", " ")


def _crowded() -> FleetSnapshot:
    snapshot = sample_snapshot()
    ids = [f"gpu-worker-eu-west-1a-{i:02}" for i in range(12)]
    types = [t.model_copy(update={"workers": ids}) for t in snapshot.types]
    deny = AuditEvent(
        id="9-0",
        ts=snapshot.generated_at,
        operator="someone-with-a-long-name@bastion-eu-west-1",
        action="deny",
        target="gpu-worker-eu-west-1a-07",
        reason="it keeps failing every embed task it takes " * 3,
        details="type=embed",
    )
    return snapshot.model_copy(update={"types": types, "events": [deny, *snapshot.events]})


async def test_footer_types_and_events_keep_what_matters_at_80x24() -> None:
    app = ConsoleApp(
        StaticBackend(_crowded(), dead=sample_dead()), refresh=3600, clock=lambda: 1000.0
    )
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: app.main_screen.snapshot is not None)
        await pilot.pause()
        footer = _screen_text(app)
        assert "x Deny" in re.sub(r"\s+", " ", footer)
        await pilot.press("3")
        await pilot.pause()
        types = _screen_text(app)
        assert re.search(r"\bdead\b", types) and re.search(r"\btarget\b", types)
        await pilot.press("5")
        await pilot.pause()
        events = _screen_text(app)
        assert "details" in events and "type=embed" in events
