"""A text input that applies every key in the order it was typed.

Textual forwards a key to the focused widget's queue, and runs a key's binding only
once the key has bubbled back up to the app. A terminal delivers fast typing (or
``tmux send-keys BSpace 4``) in one read, so the characters typed behind a bound key
(Backspace, Escape, Enter) were inserted before that key acted: ``BSpace 4`` in a
prompt holding ``2`` left it empty, and Escape then ``/`` in the filter wiped what was
typed after the ``/``. The app (:meth:`byconsole.tui.app.ConsoleApp.on_event`) hands
every key for an :class:`OrderedInput` to :meth:`OrderedInput.apply_key` as it takes
the key from the terminal, so typing and bound keys are applied one after the other,
in one queue, and a key that moves the focus does so before the next key is routed.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from textual import events
from textual.screen import Screen
from textual.widgets import Input
from textual.widgets.input import Selection


class OrderedInput(Input):
    """An :class:`~textual.widgets.Input` whose keys are applied in arrival order.

    Args:
        enter_focuses: the id of the widget Enter moves the focus to, at once, as well
            as submitting (the confirmation dialog's reason: Enter goes to the button,
            so a second Enter typed with it presses the button; the filter: the keys
            typed after Enter reach the table).
        **kwargs: as :class:`~textual.widgets.Input`.
    """

    def __init__(self, *, enter_focuses: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.enter_focuses = enter_focuses
        self._focus_handled = False
        """Whether this input has handled the focus event of its current focus."""

    def _ahead_of_focus(self) -> None:
        """Before a key that arrived ahead of the focus event: what that event does now.

        The focus moves at once (``set_focus``), but the input handles its focus event
        later, after the keys read together with the one that focused it; on a loaded
        machine some of them are applied first, and the event's select-on-focus then
        selected them, so the next key replaced them (``keys-a`` typed after ``/``
        became ``s-a``). The selection is made now, before the first key, and the
        event leaves it alone.
        """
        self._focus_handled = True
        if self.select_on_focus:
            self.selection = Selection(0, len(self.value))
            self.select_on_focus = False
            self.call_next(setattr, self, "select_on_focus", True)

    def _on_focus(self, event: events.Focus) -> None:
        # Runs before Input's own handler of the same event (Textual calls each
        # class's in turn), which then sees select_on_focus as _ahead_of_focus left it.
        self._focus_handled = True

    def _on_blur(self, event: events.Blur) -> None:
        self._focus_handled = False

    async def apply_key(self, event: events.Key) -> bool:
        """Apply one key now, as the app receives it; ``False``: route it as usual.

        A printable key is typed (replacing the selection, as the input does); any
        other key runs the binding the focused chain has for it, this input's own
        (Backspace, arrows, Enter) first, then its containers' and the screen's.
        """
        if not self._focus_handled:
            self._ahead_of_focus()
        if event.is_printable and event.character:
            selection = self.selection
            if selection.is_empty:
                self.insert_text_at_cursor(event.character)
            else:
                self.replace(event.character, *selection)
            return True
        if event.key == "enter" and self.enter_focuses is not None:
            await self.action_submit()
            self.screen.set_focus(self.screen.query_one(f"#{self.enter_focuses}"))
            return True
        active = self.screen.active_bindings.get(event.key)
        if active is None or not active.enabled or active.binding.priority:
            return False
        # False when the action skipped itself: the app then tries the rest of the chain.
        return await self.app.run_action(active.binding.action, active.node)


def key_target(screen: Screen[Any], event: events.Key) -> OrderedInput | None:
    """The input a key just read from the terminal is applied to at once, if any.

    The focused :class:`OrderedInput`; or, for a printable key, the screen's
    ``typing_field`` (a dialog whose focus starts on a button types into its reason),
    which takes the focus first. A key bound with priority (the palette, quit, ``/``)
    is left to its binding.
    """
    focused = screen.focused
    target: OrderedInput | None = None
    if isinstance(focused, OrderedInput):
        target = focused
    elif event.is_printable:
        field = getattr(screen, "typing_field", None)
        target = field if isinstance(field, OrderedInput) else None
    if target is None:
        return None
    active = screen.active_bindings.get(event.key)
    if active is not None and active.binding.priority:
        return None
    if target is not focused:
        screen.set_focus(target)
    return target


def split_escape(screen: Screen[Any], event: events.Key) -> list[events.Key]:
    """The keys an Alt key stands for when it reaches an input: Escape, then the key.

    A terminal sends Alt+KEY as Escape followed by KEY, so an Escape typed quickly
    before another key (within the terminal parser's escape delay, or in the same
    read) arrives as one ``alt+KEY``. No input here binds an Alt key, so at an input it
    is read as the two keys the operator typed; so is a merged Escape before a symbol
    (:func:`keep_escape_before_symbols`) wherever the focus is. Any other key is itself.
    """
    key = event.key
    if not key.startswith("alt+") or key in screen.active_bindings:
        return [event]
    rest = key.removeprefix("alt+")
    symbol = event.character is not None and not event.character.isalnum()
    if not symbol and not isinstance(screen.focused, OrderedInput):
        return [event]
    return [events.Key("escape", "\x1b"), events.Key(rest, event.character)]


def keep_escape_before_symbols() -> None:
    """Make the terminal parser report Escape + a symbol read together as ``alt+KEY``.

    Textual's parser turns Escape + a letter into ``alt+letter`` but drops the Escape
    before a symbol (``\\x1b/`` becomes a bare ``/``), so Escape then ``/`` typed
    quickly left the filter open with the new text appended to the old. Reported as
    ``alt+slash``, :func:`split_escape` gives both keys back. Idempotent.
    """
    from textual import _xterm_parser

    parser = _xterm_parser.XTermParser
    original = parser._sequence_to_key_events
    if getattr(original, "keeps_escape", False):
        return

    def with_alt(
        self: _xterm_parser.XTermParser, sequence: str, alt: bool = False
    ) -> Iterable[events.Key]:
        for event in original(self, sequence, alt):
            if alt and len(sequence) == 1 and not event.key.startswith(("alt+", "escape")):
                yield events.Key(f"alt+{event.key}", event.character)
            else:
                yield event

    with_alt.keeps_escape = True  # type: ignore[attr-defined]
    parser._sequence_to_key_events = with_alt  # type: ignore[method-assign]
