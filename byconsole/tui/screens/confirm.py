"""The confirmation dialog for destructive and bulk actions: a reason, default Cancel."""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual import getters, on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Static

from byconsole.text import safe_text
from byconsole.tui.widgets.ordered_input import OrderedInput
from byconsole.verbs import MAX_UNAVAILABLE_HELP, check_max_unavailable

MAX_LISTED = 6


class ConfirmScreen(ModalScreen[str | None]):
    """Ask before acting; dismisses with the reason (``""`` when none) or ``None``.

    Focus starts on *Cancel*, so a stray Enter never confirms. A printable key typed
    anywhere in the dialog goes to the reason field (the reason is usually typed first),
    so no keystroke is lost; Enter in the reason field moves to the confirm button rather
    than confirming. Keys are applied in the order typed, however fast
    (:mod:`byconsole.tui.widgets.ordered_input`). A hint line shows these keys.

    Args:
        verb: the action (``Evict``), used for the title and the button.
        targets: what it acts on (worker ids, ``type@instance``), shown literally.
        warning: one more line about the consequences.
        destructive: style the confirm button as an error.
    """

    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    reason_input = getters.query_one("#reason", OrderedInput)
    cancel_button = getters.query_one("#cancel", Button)
    confirm_button = getters.query_one("#confirm", Button)

    def __init__(
        self,
        verb: str,
        targets: Sequence[str],
        *,
        warning: str = "",
        destructive: bool = True,
    ) -> None:
        super().__init__()
        self.verb = verb
        self.targets = list(targets)
        self.warning = warning
        self.destructive = destructive

    def compose(self) -> ComposeResult:
        """Title, targets, consequence, reason input, buttons."""
        count = len(self.targets)
        noun = "target" if count == 1 else f"{count} targets"
        listed = "\n".join(f"  {safe_text(t, 60)}" for t in self.targets[:MAX_LISTED])
        if count > MAX_LISTED:
            listed += f"\n  … and {count - MAX_LISTED} more"
        with Vertical(id="dialog", classes="-destructive" if self.destructive else ""):
            yield Static(Text(f"{self.verb} {noun}?", style="bold"), id="dialog-title")
            yield Static(Text(listed), id="dialog-targets")
            if self.warning:
                yield Static(Text(self.warning), id="dialog-warning")
            yield from self.fields()
            # No select-on-focus: the first key typed moves focus here, and a selection
            # would let the second key replace the first. Enter moves to the confirm
            # button at once, so an Enter typed right behind it presses the button.
            yield OrderedInput(
                placeholder="reason (recorded in the audit log)",
                id="reason",
                select_on_focus=False,
                enter_focuses="confirm",
            )
            yield Static(
                Text(
                    f"type: reason · enter in reason: go to {self.verb} · "
                    "tab: next · enter: press focused · esc: cancel"
                ),
                id="dialog-keys",
            )
            with Horizontal(id="dialog-buttons"):
                yield Button("Cancel", id="cancel", variant="primary")
                yield Button(
                    self.verb, id="confirm", variant="error" if self.destructive else "warning"
                )

    def fields(self) -> ComposeResult:
        """Fields the action needs besides the reason (a subclass adds them)."""
        yield from ()

    def check(self) -> bool:
        """Whether :meth:`fields` hold what the action needs; a subclass that says no
        shows why and keeps the dialog open."""
        return True

    def on_mount(self) -> None:
        """Default to Cancel."""
        self.cancel_button.focus()

    @property
    def typing_field(self) -> OrderedInput | None:
        """Where a printable key typed while a button has focus goes: the reason."""
        return self.reason_input if self.is_mounted else None

    @on(Button.Pressed, "#confirm")
    def _confirmed(self) -> None:
        if self.check():
            self.dismiss(self.reason_input.value.strip())

    @on(Button.Pressed, "#cancel")
    def action_cancel(self) -> None:
        """Close without acting."""
        self.dismiss(None)


class RollingConfirmScreen(ConfirmScreen):
    """A rolling restart's confirmation, which also asks how many replicas of one
    instance restart at a time (README, "Restart, stop and pinned calls").

    Confirmed only with a whole number from 1 to ``largest`` (the replicas of the
    largest instance it rolls); anything else says why in one line and stays open.
    :attr:`max_unavailable` holds the accepted value once dismissed.
    """

    def __init__(
        self, verb: str, targets: Sequence[str], *, largest: int, warning: str = ""
    ) -> None:
        super().__init__(verb, targets, warning=warning, destructive=True)
        self.largest = max(1, largest)
        self.max_unavailable = 1

    def fields(self) -> ComposeResult:
        """The max-unavailable field (default 1) and its one-line reason when refused."""
        yield Static(
            Text(f"{MAX_UNAVAILABLE_HELP}: 1 to {self.largest}"), id="max-unavailable-label"
        )
        yield OrderedInput(value="1", id="max-unavailable", select_on_focus=False)
        yield Static("", id="max-unavailable-error")

    def check(self) -> bool:
        """Accept the field's value, or show why not and focus it."""
        field = self.query_one("#max-unavailable", Input)
        error = self.query_one("#max-unavailable-error", Static)
        try:
            self.max_unavailable = check_max_unavailable(field.value, self.largest)
        except ValueError as exc:
            error.update(Text(safe_text(str(exc), 120)))
            self.set_focus(field)
            return False
        error.update("")
        return True

    @on(Input.Submitted, "#max-unavailable")
    def _max_entered(self) -> None:
        if self.check():
            self.set_focus(self.reason_input)
