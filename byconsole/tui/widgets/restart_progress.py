"""A rolling restart's progress, shown above the footer while it runs.

It renders :class:`~worker_runtime.restarts.RollingProgress`, fed the progress events
the runtime yields (the ones the CLI prints), so the console and ``byconsole type
restart`` say the same thing. It never blocks: the app's worker feeds it, the operator
keeps working, and the panel says ``done`` or ``failed`` at the end. A finished run
goes away :data:`DONE_SHOWN_FOR` seconds after ``done`` (a failed one stays, saying
what was not replaced) or when the next restart starts.
"""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from byconsole.styles import ansi_style
from byconsole.text import safe_text
from worker_runtime.restarts import RestartOutcome, RestartState, RollingProgress

DONE_SHOWN_FOR = 30.0
"""Seconds a successful run's panel stays after ``done``."""

SHOWN = 6
"""Replica lines shown at most (the restarting ones first); the rest are counted."""


def progress_text(title: str, progress: RollingProgress, ended: str | None) -> Text:
    """The panel's text: a head line (i/n replaced, restarting now) and replica lines."""
    head = Text(safe_text(title, 80), style="bold")
    head.append(f"  {progress.replaced}/{progress.total} replaced")
    if progress.restarting:
        head.append(f" · restarting: {', '.join(safe_text(w, 40) for w in progress.restarting)}")
    if ended is not None:
        head.append(f" · {safe_text(ended, 200)}", style="bold")
    lines = [head]
    ordered = progress.order
    if len(ordered) > SHOWN:  # the ones restarting now first, when not all fit
        ordered = sorted(ordered, key=lambda w: progress.latest[w].state is not RestartState.SENT)
    for wid in ordered[:SHOWN]:
        state = progress.latest[wid].state
        role = {RestartState.REPLACED: "success", RestartState.SENT: ""}.get(state, "alert")
        style = ansi_style(role) if role else ""
        lines.append(Text(safe_text(progress.line(wid), 200), style=style))
    if len(ordered) > SHOWN:
        lines.append(Text(f"… {len(ordered) - SHOWN} more"))
    return Text("\n").join(lines)


class RestartProgress(Static):
    """One rolling restart's progress (see the module docstring)."""

    DEFAULT_CSS = """
    RestartProgress {
        height: auto;
        max-height: 9;
        border: round $primary;
        padding: 0 1;
    }
    RestartProgress.-done { border: round $success; }
    RestartProgress.-failed { border: round $error; }
    """

    def __init__(self, title: str, total: int, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.title_text = title
        self.progress = RollingProgress(total=total)
        self.ended: str | None = None

    def on_mount(self) -> None:
        """Show the head line before the first event."""
        self._show()

    def add(self, outcome: RestartOutcome) -> str:
        """One progress event; its line."""
        line = self.progress.add(outcome)
        self._show()
        return line

    def finish(self, error: str | None = None) -> str:
        """The restart ended (``error``: it stopped on one); the summary line."""
        summary = self.progress.summary()
        failed = error is not None or bool(self.progress.failed)
        self.ended = f"failed: {error}" if error else ("failed" if failed else "done")
        self.set_class(failed, "-failed")
        self.set_class(not failed, "-done")
        self._show()
        if not failed:
            self.set_timer(DONE_SHOWN_FOR, self.remove)
        return summary if error is None else f"{summary}; {error}"

    def _show(self) -> None:
        self.update(progress_text(self.title_text, self.progress, self.ended))
