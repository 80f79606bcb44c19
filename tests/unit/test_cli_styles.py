"""The plain-output renderers (``--snapshot``, the admin CLI) colour through style roles.

Colours are chosen once in ``byconsole/styles.py``; a renderer names a role
(``ansi_style("alert")``), so the CLI and the console cannot drift to different colours
for the same state. A scan of the CLI modules finds any colour spelled inline.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from byconsole.styles import ANSI_STYLES, THEME_VARIABLES, ansi_style

ROOT = Path(__file__).resolve().parents[2]
CLI_MODULES = (
    "cli.py",
    "headless/commands.py",
    "headless/render_table.py",
    "headless/render_prom.py",
    "headless/render_dead.py",
    "headless/plain_table.py",
    "headless/checks.py",
    "headless/snapshot.py",
)
COLOURS = {"black", "red", "green", "yellow", "blue", "magenta", "cyan", "white"}
COLOURS |= {f"bright_{c}" for c in list(COLOURS)}
STYLE_WORDS = COLOURS | {"bold", "dim", "italic", "underline", "reverse", "on", "not"}


def inline_colours(path: Path) -> list[str]:
    """``file:line text`` of every string literal that is a Rich style naming a colour."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    hits: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            words = node.value.split()
            if words and set(words) <= STYLE_WORDS and COLOURS.intersection(words):
                hits.append(f"{path}:{node.lineno} {node.value!r}")
    return hits


def test_cli_renderers_spell_no_colour() -> None:
    files = [ROOT / "byconsole" / name for name in CLI_MODULES]
    assert all(f.is_file() for f in files)
    offenders = [hit for f in files for hit in inline_colours(f)]
    assert offenders == [], "use byconsole.styles.ansi_style(role):\n" + "\n".join(offenders)


@pytest.mark.parametrize(
    "source",
    ['Text("x", style="bold red")\n', 't.append("n", "yellow")\n', 's = {"ok": "green"}\n'],
)
def test_the_scan_catches_planted_colours(tmp_path: Path, source: str) -> None:
    module = tmp_path / "render.py"
    module.write_text(source + 'label = "red alert is a phrase"\nx = "bold"\n', encoding="utf-8")
    assert len(inline_colours(module)) == 1


def test_every_role_has_a_style_and_typos_fail_loudly() -> None:
    assert ansi_style("alert") == ANSI_STYLES["alert"]
    for role in ("success", "warning", "error", "muted", "leader"):
        assert role in ANSI_STYLES and role in THEME_VARIABLES  # both front ends know it
    with pytest.raises(KeyError):
        ansi_style("succes")
