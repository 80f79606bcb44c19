"""One worker-detail field list: the CLI's ``worker info`` and the TUI's detail screen agree."""

from __future__ import annotations

from rich.console import Console

from byconsole.formatting import admin_fields, worker_fields
from byconsole.headless.plain_table import Painter
from byconsole.headless.render_table import worker_detail_view
from byconsole.tui.screens.detail import render_detail
from worker_runtime.models import AdminState, Status
from worker_runtime.snapshot import CommandState, WorkerDetail, WorkerView

NOW = 1_780_000_000_000


def _detail(admin: AdminState) -> WorkerDetail:
    worker = WorkerView(
        worker_id="w-1",
        status=Status.ONLINE,
        lifecycle="suspended",
        command_state=CommandState.PENDING,
        instance_id="host-a:42",
        hostname="host-a",
        pid=42,
        ip_address="10.0.0.7",
        agent_types=["chat", "embed"],
        last_seen=NOW - 3_000,
        lease_age_ms=3_000,
        started_at=NOW - 90_000,
    )
    return WorkerDetail(
        worker_id="w-1",
        known=True,
        worker=worker,
        lease={"worker_id": "w-1"},
        admin=admin,
        declared_types=["chat", "embed"],
        denied_types=["embed"],
    )


def _text(*parts: object) -> str:
    console = Console(width=160, record=True, color_system=None)
    for part in parts:
        console.print(part)
    return console.export_text()


def test_the_cli_and_the_tui_show_the_same_fields_and_values() -> None:
    admin = AdminState(lifecycle="suspended", reason="disk", updated_at=NOW - 1_000)
    for detail in (_detail(admin), _detail(AdminState())):
        fields = worker_fields(detail, NOW) + admin_fields(detail, NOW)
        cli = "\n".join(worker_detail_view(detail, NOW).lines(160, Painter(False)))
        tui = _text(*render_detail(detail, NOW))
        for label, value in fields:
            assert label in cli and label in tui, label
            assert value in cli and value in tui, (label, value)


def test_the_fields_say_what_the_operator_needs() -> None:
    detail = _detail(AdminState(lifecycle="suspended", reason="disk", updated_at=NOW - 1_000))
    fields = dict(worker_fields(detail, NOW))
    assert fields["command"] == "pending" and fields["status"] == "online"
    assert fields["host / pid"] == "host-a / 42" and fields["denied types"] == "embed"
    assert fields["last seen"] == "3.0s ago (20:26:37 UTC)"
    admin = dict(admin_fields(detail, NOW))
    assert admin["reason"] == "disk" and admin["updated"] == "20:26:39 UTC"
    assert dict(admin_fields(_detail(AdminState()), NOW)) == {"lifecycle": "none (default: active)"}
