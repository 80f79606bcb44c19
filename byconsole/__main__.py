"""``python -m byconsole``: the same as the ``byconsole`` command."""

from __future__ import annotations

from byconsole.launch import run

run()
