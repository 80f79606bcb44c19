"""Small prompts: a replica count, a choice among agent types."""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, OptionList, Static
from textual.widgets.option_list import Option

from byconsole.text import safe_text
from byconsole.tui.widgets.ordered_input import OrderedInput


class CountScreen(ModalScreen[int | None]):
    """Ask for a replica count; dismisses with the count or ``None`` (Escape).

    Args:
        title: what is being scaled, shown literally.
        current: the value to start from (the current target).
        maximum: the largest count accepted.
    """

    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, title: str, current: int | None, maximum: int) -> None:
        super().__init__()
        self.title_text = title
        self.current = current
        self.maximum = maximum

    def compose(self) -> ComposeResult:
        """Title, the number input, an error line."""
        with Vertical(id="dialog"):
            yield Static(Text(self.title_text, style="bold"), id="dialog-title")
            # Keys applied in the order typed: Backspace then a digit in one read.
            yield OrderedInput(
                value="" if self.current is None else str(self.current),
                placeholder=f"replicas (0-{self.maximum})",
                type="integer",
                id="count",
            )
            yield Static(Text(f"Enter to apply, Escape to cancel (0-{self.maximum})"), id="hint")

    def on_mount(self) -> None:
        """Focus the number."""
        self.query_one("#count", Input).focus()

    @on(Input.Submitted, "#count")
    def _submitted(self, event: Input.Submitted) -> None:
        try:
            count = int(event.value)
        except ValueError:
            count = -1
        if not 0 <= count <= self.maximum:
            self.query_one("#hint", Static).update(
                Text(f"enter a whole number from 0 to {self.maximum}", style="bold")
            )
            return
        self.dismiss(count)

    def action_cancel(self) -> None:
        """Close without a count."""
        self.dismiss(None)


class ChoiceScreen(ModalScreen[str | None]):
    """Pick one of a few values (agent types); dismisses with it or ``None``.

    Args:
        title: the question, shown literally.
        choices: the values; shown escaped, returned as given.
    """

    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, title: str, choices: Sequence[str]) -> None:
        super().__init__()
        self.title_text = title
        self.choices = list(choices)

    def compose(self) -> ComposeResult:
        """Title and the list."""
        with Vertical(id="dialog"):
            yield Static(Text(self.title_text, style="bold"), id="dialog-title")
            yield OptionList(
                *(Option(Text(safe_text(c, 60)), id=str(i)) for i, c in enumerate(self.choices)),
                id="choices",
            )

    def on_mount(self) -> None:
        """Focus the list."""
        self.query_one("#choices", OptionList).focus()

    @on(OptionList.OptionSelected, "#choices")
    def _selected(self, event: OptionList.OptionSelected) -> None:
        index = int(event.option.id or 0)
        self.dismiss(self.choices[index])

    def action_cancel(self) -> None:
        """Close without a choice."""
        self.dismiss(None)
