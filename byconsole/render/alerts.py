"""The alerts table (the Health view, the ``--snapshot`` table): columns and one alert's row.

The alerts are computed by ``worker_runtime`` (:attr:`FleetSnapshot.alerts`); what a row
shows of one is defined here, for the console and the CLI alike. The subject is cut in
the console so the message stays on an 80-column screen (the pane under the table has
both whole); the CLI prints it whole.
"""

from __future__ import annotations

from typing import NamedTuple

from byconsole.render.columns import ColumnSpec, clean
from worker_runtime.models import Alert

SUBJECT_WIDTH = 24
"""Characters of subject a console row shows."""

COLUMNS: tuple[ColumnSpec, ...] = (
    ColumnSpec("severity", "severity", role="severity", width=8),
    ColumnSpec("code", "code", role="code", cut=32),
    ColumnSpec("subject", "subject", 1, cut=SUBJECT_WIDTH),
    ColumnSpec("message", "message", cut=160),
)
"""How bad, which check, about what, and what it measured. A narrow CLI drops the
subject before the message (the message names what it measured, and on what)."""


class AlertRow(NamedTuple):
    """One alert's display values (every string safe), addressed by field name."""

    severity: str
    code: str
    subject: str
    message: str


def fields(alert: Alert, now: int | None = None) -> AlertRow:
    """The display row of one alert.

    Args:
        alert: the alert.
        now: unused (kept so every renderer is called the same way).
    """
    return AlertRow(
        severity=clean(alert.severity, 12),
        code=clean(alert.code, 80),
        subject=clean(alert.subject, 200),
        message=clean(alert.message, 400),
    )
