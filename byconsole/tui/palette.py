"""Command palette (``ctrl+p``): every action, every view, and the named contexts."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

from textual.command import DiscoveryHit, Hit, Hits, Provider
from textual.content import Content

from byconsole.text import safe_text
from byconsole.tui.actions import ACTIONS, FORM_SPECS
from byconsole.tui.screens.main import VIEWS, OperatorScreen

if TYPE_CHECKING:
    from byconsole.tui.app import ConsoleApp


@dataclass(frozen=True, slots=True)
class PaletteCommand:
    """One palette entry."""

    title: str
    run: Callable[[], object]
    help: str


class ConsoleCommands(Provider):
    """The console's commands; action entries exist only when actions are bound."""

    def _console(self) -> ConsoleApp | None:
        # Imported here: the app module lists this provider in its COMMANDS.
        from byconsole.tui.app import ConsoleApp

        return self.app if isinstance(self.app, ConsoleApp) else None

    def commands(self) -> list[PaletteCommand]:
        """The entries for the app's current mode and contexts."""
        console = self._console()
        out: list[PaletteCommand] = []
        if console is None:
            return out
        main = console.main_screen
        if isinstance(main, OperatorScreen):
            for spec in ACTIONS:
                out.append(
                    PaletteCommand(
                        f"{spec.label} ({spec.key_display})",
                        partial(main.request_action, spec.action),
                        spec.help,
                    )
                )
            for form in FORM_SPECS:
                out.append(
                    PaletteCommand(
                        f"{form.label} ({form.key_display})",
                        partial(main.action_form, form.form.name),
                        form.help,
                    )
                )
            out.append(
                PaletteCommand("Mark worker (space)", main.action_mark, "Mark for a bulk action")
            )
        for i, (view, title) in enumerate(VIEWS, start=1):
            out.append(
                PaletteCommand(
                    f"Show {title.lower()} ({i})",
                    partial(main.action_show_view, view),
                    f"Switch to the {title} view",
                )
            )
        out.append(PaletteCommand("Filter workers (/)", main.action_filter, "Filter the table"))
        out.append(PaletteCommand("Keys (?)", main.action_help, "Every key binding"))
        out.append(
            PaletteCommand(
                "Find an id (g)",
                main.action_find,
                "What a task, execution, message, session or trace id is",
            )
        )
        for name, context in sorted(console.contexts.items()):
            if name == console.context_name:
                continue
            out.append(
                PaletteCommand(
                    f"Switch context: {safe_text(name, 40)}",
                    partial(console.switch_context, name),
                    safe_text(context.endpoint, 80),
                )
            )
        return out

    async def discover(self) -> Hits:
        """Everything, before the operator types."""
        for command in self.commands():
            yield DiscoveryHit(Content(command.title), command.run, help=command.help)

    async def search(self, query: str) -> Hits:
        """Fuzzy-matched entries, best first."""
        matcher = self.matcher(query)
        for command in self.commands():
            score = matcher.match(command.title)
            if score > 0:
                # Content(title), not matcher.highlight(): that parses the title as
                # markup, and context names come from a file.
                yield Hit(score, Content(command.title), command.run, help=command.help)
