"""Lifecycle, status and marker colours: chosen here once, used by every renderer.

Each state names a *role* (``success``, ``warning``, ``error``, ``draining`` …). A role
resolves two ways:

* for plain Rich output (``--snapshot`` tables) to an ANSI style (:data:`ANSI_STYLES`);
* inside the Textual console to a *theme variable* (:data:`THEME_VARIABLES`), looked up
  in the running app's theme by :class:`CellStyles`, because table cells are Rich
  ``Text`` and cannot use TCSS variables. No colour value is spelled for the console.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from rich.style import Style

LIFECYCLE_ROLES: Mapping[str, str] = {
    "active": "success",
    "suspended": "warning",
    "draining": "draining",
    "evicted": "error",
}
"""Lifecycle -> role. Draining is neither green, yellow nor red on purpose."""

STATUS_ROLES: Mapping[str, str] = {
    "online": "success",
    "stale": "warning",
    "offline": "offline",
    "starting": "warning",
}
"""Status (liveness) -> role."""

SEVERITY_ROLES: Mapping[str, str] = {"critical": "error", "warning": "warning"}
"""Alert severity (by-framework's two grades) -> role."""

ANSI_STYLES: Mapping[str, str] = {
    "success": "green",
    "warning": "yellow",
    "error": "red",
    "offline": "red dim",
    "draining": "magenta",
    "pending": "italic cyan",
    "applied": "green dim",
    "on start": "dim",
    "unknown": "bold red",
    "alert": "bold red",
    "backlog": "bold yellow",
    "running": "cyan",
    "heading": "bold",
    "leader": "bold",
    "muted": "dim",
}
"""Role -> Rich style for output outside the console (no theme there).

``alert``: something failed or is stuck (dead letters, a timed-out wait); ``backlog``:
work waiting; ``running``: an execution in progress; ``heading``: titles and the names
an operator looks for; ``muted``: "none" placeholders.
"""

THEME_VARIABLES: Mapping[str, str] = {
    "success": "success",
    "warning": "warning",
    "error": "error",
    "offline": "error",
    "draining": "primary-lighten-2",
    "pending": "warning",
    "applied": "success-darken-2",
    "on start": "foreground-darken-3",
    "marked": "primary-lighten-3",
    "denied": "error",
    "leader": "accent",
    "short": "warning",
    "muted": "foreground-darken-3",
}
"""Role -> theme variable for the console (resolved against the active theme)."""

LIFECYCLE_STYLES: dict[str, str] = {k: ANSI_STYLES[r] for k, r in LIFECYCLE_ROLES.items()}
"""Lifecycle -> Rich style (draining distinct from suspended and evicted)."""

STATUS_STYLES: dict[str, str] = {k: ANSI_STYLES[r] for k, r in STATUS_ROLES.items()}
"""Status -> Rich style."""

PENDING_STYLE = ANSI_STYLES["pending"]
"""A command the worker has not confirmed yet."""

UNKNOWN_STYLE = ANSI_STYLES["unknown"]
"""A value no runtime should write (shown, flagged)."""

LIFECYCLE_ORDER: Mapping[str, int] = {"evicted": 0, "draining": 1, "suspended": 2, "active": 3}
"""Sort rank: the states that need attention first."""

STATUS_ORDER: Mapping[str, int] = {"offline": 0, "stale": 1, "starting": 1, "online": 2}
"""Sort rank: the unhealthy first."""

SEVERITY_ORDER: Mapping[str, int] = {"critical": 0, "warning": 1}
"""Sort rank: the worst alert first (an unknown grade after both)."""


def ansi_style(role: str) -> str:
    """The Rich style of ``role`` for plain output (``--snapshot`` and the admin CLI).

    Raises:
        KeyError: ``role`` is not one of :data:`ANSI_STYLES` (a typo is a bug).
    """
    return ANSI_STYLES[role]


def lifecycle_style(lifecycle: str | None) -> str:
    """The style of a lifecycle value; unknown values stand out."""
    return LIFECYCLE_STYLES.get(lifecycle or "", UNKNOWN_STYLE)


def status_style(status: str | None) -> str:
    """The style of a status value."""
    return STATUS_STYLES.get(status or "", UNKNOWN_STYLE)


@dataclass(frozen=True)
class CellStyles:
    """Console cell styles, resolved from one theme's variables.

    Build with :meth:`from_variables` (``app.theme_variables``); a state no runtime
    should write (a hostile lifecycle) gets the plain style.
    """

    roles: Mapping[str, Style] = field(default_factory=dict)

    @classmethod
    def from_variables(cls, variables: Mapping[str, str]) -> CellStyles:
        """Resolve every role's theme variable to a Rich style."""
        roles: dict[str, Style] = {}
        for role, name in THEME_VARIABLES.items():
            colour = variables.get(name)
            try:
                roles[role] = Style(color=colour) if colour else Style()
            except Exception:  # a theme value Rich cannot parse ("auto 60%"): plain
                roles[role] = Style()
        return cls(roles=roles)

    def lifecycle(self, value: str) -> Style:
        """Style of a lifecycle cell (bold: it is what the operator scans for)."""
        role = LIFECYCLE_ROLES.get(value)
        return self.roles.get(role, Style()) + Style(bold=True) if role else Style()

    def status(self, value: str) -> Style:
        """Style of a status cell."""
        role = STATUS_ROLES.get(value)
        return self.roles.get(role, Style()) if role else Style()

    def severity(self, value: str) -> Style:
        """Style of an alert severity (bold: the header and the Health view lead with it)."""
        role = SEVERITY_ROLES.get(value)
        return self.roles.get(role, Style()) + Style(bold=True) if role else Style()

    def marker(self, role: str) -> Style:
        """Style of a marker role (``pending``, ``applied``, ``marked``, ``denied`` …)."""
        return self.roles.get(role, Style())


_COLOURS = ("black", "red", "green", "yellow", "blue", "magenta", "cyan", "white")

SGR_CODES: dict[str, str] = {
    "bold": "1",
    "dim": "2",
    "italic": "3",
    "underline": "4",
    "reverse": "7",
    **{name: str(30 + i) for i, name in enumerate(_COLOURS)},
    **{f"bright_{name}": str(90 + i) for i, name in enumerate(_COLOURS)},
}
"""The words of :data:`ANSI_STYLES` as SGR parameters (the eight
standard colours every terminal has; a word not listed is left out)."""
