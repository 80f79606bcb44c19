"""The ``byconsole`` executable's entry point, before anything heavy is imported.

A one-shot run (``--snapshot``, an admin subcommand) frees everything when it exits,
so the cyclic garbage collector only costs it time: such runs go without it. The live
console and the demo, which run for hours, turn it back on before they start
(``byconsole.cli``; the policy is :mod:`byconsole.memory`).

Pydantic looks for plugins (third-party hooks into every model and validation) in the
entry points of every installed package when the first model is built: a cost of
every start that grows with the packages the environment holds, for hooks this program
never asked for. ``PYDANTIC_DISABLE_PLUGINS`` turns that off unless the operator set it
(empty loads them all, as pydantic does).
"""

from __future__ import annotations

import os
from typing import NoReturn

# Standard library only: nothing heavy is imported before the collector is off.
from byconsole.memory import collector_off_for_one_shot


def run() -> NoReturn:
    """Run ``byconsole`` (:func:`byconsole.cli.run`) with the collector off."""
    collector_off_for_one_shot()
    # Before the first import that builds a model (pydantic reads it at every build).
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    from byconsole.cli import run as run_cli

    run_cli()
