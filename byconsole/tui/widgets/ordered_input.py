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

from typing import Any

from textual import events
from textual.screen import Screen
from textual.widgets import Input


class OrderedInput(Input):
    """An :class:`~textual.widgets.Input` whose keys are applied in arrival order.

    Args:
        enter_focuses: the id of the widget Enter moves the focus to, at once, instead
            of submitting (the confirmation dialog's reason: Enter goes to the button,
            so a second Enter typed with it presses the button).
        **kwargs: as :class:`~textual.widgets.Input`.
    """

    def __init__(self, *, enter_focuses: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.enter_focuses = enter_focuses

    async def apply_key(self, event: events.Key) -> bool:
        """Apply one key now, as the app receives it; ``False``: route it as usual.

        A printable key is typed (replacing the selection, as the input does); any
        other key runs the binding the focused chain has for it, this input's own
        (Backspace, arrows, Enter) first, then its containers' and the screen's.
        """
        if event.is_printable and event.character:
            selection = self.selection
            if selection.is_empty:
                self.insert_text_at_cursor(event.character)
            else:
                self.replace(event.character, *selection)
            return True
        if event.key == "enter" and self.enter_focuses is not None:
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
