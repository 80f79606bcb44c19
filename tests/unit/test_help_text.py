"""The help screen, the README and the force-evict dialog say what the console and the
runtime do (each sentence checked against the behaviour it describes)."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from textual.binding import Binding

from byconsole.outcomes import action_warning
from byconsole.tui.screens.help import LIFECYCLE_HELP, HelpScreen, help_table
from byconsole.tui.widgets.keyed_table import KeyedTable

README = Path(__file__).resolve().parents[2] / "README.md"


def _plain(table: object) -> str:
    console = Console(width=200, record=True, color_system=None)
    console.print(table)
    return console.export_text()


def _readme_keys() -> dict[str, str]:
    """The README's console keys table: key cell -> action cell."""
    rows: dict[str, str] = {}
    for line in README.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| `") and len(cells) == 2:
            rows[cells[0]] = cells[1]
    return rows


def test_help_lists_space_escape_the_arrows_and_both_sorts() -> None:
    text = _plain(help_table(read_only=False))
    space = next(line for line in text.splitlines() if line.startswith("space"))
    assert "move down" in space
    assert "Esc" in next(line for line in text.splitlines() if line.startswith("?"))
    assert "o / O" in text and "reverse" in text
    assert "sideways" in text
    # The help screen's own binding: Escape closes it.
    assert any("escape" in b.key for b in HelpScreen.BINDINGS if isinstance(b, Binding))
    # The arrows the help promises are the table's bindings.
    assert {"left", "right"} <= {b.key for b in KeyedTable.BINDINGS if isinstance(b, Binding)}


def test_the_readme_keys_table_documents_the_same_keys() -> None:
    keys = _readme_keys()
    assert "move down" in keys["`space`"]
    assert "reverse" in keys["`o` / `O`"]
    assert "sideways" in keys["`←` / `→`"]
    assert "Escape" in keys["`?` / `q`"]


def test_the_legend_does_not_say_an_eviction_drops_the_lease() -> None:
    # A graceful eviction keeps the lease until its running tasks finish
    # (worker_runtime/replica.py keeps_lease).
    assert "lease" not in LIFECYCLE_HELP["evicted"]


def test_the_force_evict_dialog_and_the_readme_agree_on_cut_tasks() -> None:
    # worker_runtime hands a cancelled task back to its stream as a new entry
    # (Replica.hand_back): nothing waits for a reclaim.
    dialog = action_warning("force-evict", ["worker_runtime"])
    assert "hands each back to its stream as a new entry" in dialog
    assert "reclaim" not in dialog
    row = _readme_keys()["`e` / `E`"]
    assert "hands each back to its stream as a new entry" in row
    assert "reclaim" not in row
