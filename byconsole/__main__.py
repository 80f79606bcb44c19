"""``python -m byconsole``: the same as the ``byconsole`` command."""

from __future__ import annotations

import sys

from byconsole.cli import main

sys.exit(main())
