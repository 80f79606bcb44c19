"""The ``byconsole`` executable's entry point, before anything heavy is imported.

A one-shot run (``--snapshot``, an admin subcommand) frees everything when it exits,
so the cyclic garbage collector only costs it time: its passes over the objects the
imports create (pydantic's and redis-py's, hundreds of thousands) took 30-40 ms of
each start, and one more pass over a 10,000-worker snapshot after the read about 30
ms. Such runs go without it. The live console and the demo, which run for hours,
turn it back on before they start (``byconsole.cli``).

Pydantic looks for plugins (third-party hooks into every model and validation) in the
entry points of every installed package when the first model is built: about 2 ms of
a start, more the more packages the environment holds, for hooks this program never
asked for. ``PYDANTIC_DISABLE_PLUGINS`` turns that off unless the operator set it
(empty loads them all, as pydantic does).
"""

from __future__ import annotations

import gc
import os
from typing import NoReturn


def run() -> NoReturn:
    """Run ``byconsole`` (:func:`byconsole.cli.run`) with the collector off."""
    gc.disable()
    # Before the first import that builds a model (pydantic reads it at every build).
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    from byconsole.cli import run as run_cli

    run_cli()
