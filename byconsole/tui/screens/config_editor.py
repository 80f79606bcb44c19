"""A type's runtime configuration as JSON, edited, checked as it is typed, and saved
(README, "Type configuration").

The text is checked on every change by the runtime's own rule
(:func:`worker_runtime.type_config.check_config`: a JSON object, no reserved key, not
too large), so the editor refuses exactly what ``byconsole config set`` refuses, with the
same reason. Saving writes only the keys that changed (and unsets the removed ones)
through the loader the app hands in (``WorkerManager.apply``, audited with the diff);
then each replica's report (applied, or the hook's failure) is shown as it arrives,
for at most :data:`REPORT_TIMEOUT` seconds.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from rich.text import Text
from textual import getters, on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Static, TextArea

from byconsole.styles import ansi_style
from byconsole.text import safe_text
from worker_runtime.models import TypeConfig
from worker_runtime.type_config import (
    ConfigChange,
    ConfigOutcome,
    ConfigState,
    TypeConfigError,
    check_config,
    config_diff,
)

REPORT_TIMEOUT = 10.0
"""How long the editor waits for every replica to report a saved version."""

REPORT_POLL = 0.2
"""Seconds between two reads of the replicas' reports."""

ConfigLoader = Callable[[str], Awaitable[TypeConfig]]
ConfigSaver = Callable[[str, Mapping[str, Any], Sequence[str], str | None], Awaitable[ConfigChange]]
ReportLoader = Callable[[ConfigChange], Awaitable[dict[str, ConfigOutcome]]]


def parse_config(text: str) -> tuple[dict[str, Any] | None, str]:
    """``(config, "")`` when ``text`` may be stored, else ``(None, why)`` in one line."""
    try:
        value = json.loads(text) if text.strip() else {}
    except json.JSONDecodeError as exc:
        return None, f"not JSON: line {exc.lineno}, column {exc.colno}: {exc.msg}"
    try:
        check_config(value)  # the runtime's rule: an object, no reserved key, not too large
    except TypeConfigError as exc:
        return None, str(exc)
    return dict(value), ""


def changes(
    before: Mapping[str, Any], after: Mapping[str, Any]
) -> tuple[dict[str, Any], list[str]]:
    """The keys to set (new or changed) and to unset (removed) to go from one to the other."""
    values = {k: v for k, v in after.items() if k not in before or before[k] != v}
    return values, sorted(k for k in before if k not in after)


def report_line(outcome: ConfigOutcome) -> Text:
    """One replica's report (``w-1: applied`` / ``w-2: failed (ValueError: …)``)."""
    text = f"{safe_text(outcome.worker_id, 60)}: {outcome.state.value}"
    if outcome.state is ConfigState.PENDING:
        text += " (not reported yet)"
    if outcome.error:
        text += f" ({safe_text(outcome.error, 300)})"
    role = {ConfigState.APPLIED: "success", ConfigState.PENDING: ""}.get(outcome.state, "alert")
    return Text(text, style=ansi_style(role) if role else "")


class ConfigEditorScreen(ModalScreen[None]):
    """Edit a type's configuration (see the module docstring).

    Args:
        agent_type: the type.
        load: reads its stored configuration.
        save: writes keys of it (values, keys to unset, reason).
        reports: one read of every live replica's report on a saved version.
    """

    CSS_PATH = Path(__file__).with_name("config_editor.tcss")

    BINDINGS = [
        Binding("ctrl+s", "save", "Save", priority=True),
        Binding("escape", "close", "Close"),
    ]

    editor = getters.query_one("#config-text", TextArea)
    status = getters.query_one("#config-status", Static)
    reports_box = getters.query_one("#config-reports", Static)
    reason_input = getters.query_one("#config-reason", Input)

    def __init__(
        self, agent_type: str, load: ConfigLoader, save: ConfigSaver, reports: ReportLoader
    ) -> None:
        super().__init__()
        self.agent_type = agent_type
        self._load = load
        self._save = save
        self._reports = reports
        self.stored: TypeConfig | None = None
        """The configuration as read when the editor opened (or last saved)."""
        self.valid: dict[str, Any] | None = None
        """The text's configuration when it may be stored, else ``None``."""
        self.change: ConfigChange | None = None
        """The last version saved from here."""
        self.outcomes: dict[str, ConfigOutcome] = {}
        """Each replica's latest report on :attr:`change`."""

    def compose(self) -> ComposeResult:
        """Title, the JSON text, its check, a reason, buttons, the replicas' reports."""
        with Vertical(id="dialog", classes="config-editor"):
            yield Static(
                Text(f"Configuration of {safe_text(self.agent_type, 60)}", style="bold"),
                id="dialog-title",
            )
            yield Static("reading…", id="config-version")
            yield TextArea("", id="config-text", soft_wrap=True, show_line_numbers=True)
            yield Static("", id="config-status")
            yield Input(placeholder="reason (recorded in the audit log)", id="config-reason")
            yield Static(
                Text("ctrl+s: save (every replica applies it, no restart) · esc: close"),
                id="dialog-keys",
            )
            with Horizontal(id="dialog-buttons"):
                yield Button("Close", id="config-close")
                yield Button("Save", id="config-save", variant="primary")
            yield Static("", id="config-reports")

    def on_mount(self) -> None:
        """Read the stored configuration."""
        self.editor.read_only = True
        self.read_stored()

    @work(exclusive=True, group="config-read")
    async def read_stored(self) -> None:
        """Put the stored configuration in the editor."""
        try:
            stored = await self._load(self.agent_type)
        except Exception as exc:  # a read failure is shown, never raised
            self._show_status(f"cannot read it: {safe_text(str(exc), 200)}", error=True)
            return
        self.stored = stored
        self.editor.load_text(json.dumps(stored.config, indent=2, sort_keys=True))
        self.editor.read_only = False
        self.editor.focus()
        self._show_version(stored)
        self._check()

    def _show_version(self, stored: TypeConfig) -> None:
        by = f" by {safe_text(stored.updated_by, 60)}" if stored.updated_by else ""
        line = f"version {stored.version}{by}" if stored.version else "never set (version 0)"
        self.query_one("#config-version", Static).update(Text(line))

    @on(TextArea.Changed, "#config-text")
    def _changed(self) -> None:
        self._check()

    def _check(self) -> None:
        """Check the text as typed (the runtime's rule); say what a save would change."""
        if self.stored is None:
            return
        config, why = parse_config(self.editor.text)
        self.valid = config
        if config is None:
            self._show_status(why, error=True)
            return
        diff = config_diff(self.stored.config, config)
        self._show_status(f"valid JSON object, {len(config)} key(s) · {diff}", error=False)

    def _show_status(self, text: str, *, error: bool) -> None:
        self.status.update(Text(safe_text(text, 400)))
        self.status.set_class(error, "-invalid")

    @on(Button.Pressed, "#config-close")
    def action_close(self) -> None:
        """Close (a save in flight goes on; its outcome is in the audit log)."""
        self.dismiss(None)

    @on(Button.Pressed, "#config-save")
    def action_save(self) -> None:
        """Save the changed keys, then follow the replicas' reports."""
        if self.stored is None:
            return
        self._check()  # the text as it is now: its Changed message may not have run yet
        if self.valid is None:
            self.notify("Not saved: " + str(self.status.content), severity="error", markup=False)
            return
        values, unset = changes(self.stored.config, self.valid)
        if not values and not unset:
            self._show_status("nothing to change", error=False)
            return
        self.save(values, unset, self.reason_input.value.strip() or None)

    @work(exclusive=True, group="config-save")
    async def save(self, values: dict[str, Any], unset: list[str], reason: str | None) -> None:
        """Write, then show each replica's report as it arrives (bounded)."""
        try:
            change = await self._save(self.agent_type, values, unset, reason)
        except Exception as exc:  # a refusal or an outage is shown, not raised
            self._show_status(f"not saved: {safe_text(str(exc), 300)}", error=True)
            return
        self.change = change
        self.stored = TypeConfig(version=change.version, config=dict(change.after))
        self._show_version(self.stored)
        self._show_status(f"version {change.version} saved · {change.diff}", error=False)
        deadline = time.monotonic() + REPORT_TIMEOUT
        while True:
            try:
                self.outcomes = await self._reports(change)
            except Exception as exc:  # an outage is shown, not raised
                self._show_reports(f"cannot read the reports: {safe_text(str(exc), 200)}")
                return
            waiting = [o for o in self.outcomes.values() if o.state is ConfigState.PENDING]
            over = time.monotonic() >= deadline
            self._show_reports(
                None if not (over and waiting) else f"not reported within {REPORT_TIMEOUT:g} s"
            )
            if not waiting or over:
                return
            await asyncio.sleep(REPORT_POLL)

    def _show_reports(self, note: str | None) -> None:
        change = self.change
        if change is None:
            return
        head = Text(f"version {change.version} saved · ", style="bold")
        done = [o for o in self.outcomes.values() if o.state is not ConfigState.PENDING]
        head.append(f"{len(done)}/{len(self.outcomes)} replica(s) reported")
        if not self.outcomes:
            head.append(" · no live replica (each reads it when it starts)")
        if note:
            head.append(f" · {note}", style="bold")
        diff = Text(safe_text(change.diff, 300))
        lines = [head, diff] + [report_line(o) for _, o in sorted(self.outcomes.items())[:12]]
        if len(self.outcomes) > 12:
            lines.append(Text(f"… {len(self.outcomes) - 12} more"))
        self.reports_box.update(Text("\n").join(lines))
