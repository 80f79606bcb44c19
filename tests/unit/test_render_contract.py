"""Contracts of ``byconsole/render/``: what a table shows is defined there only.

* ``render/`` imports neither Textual, Rich nor either front end (``byconsole.tui``,
  ``byconsole.headless``, ``byconsole.styles``, which builds Rich styles): it is plain data.
* No front end constructs a :class:`~byconsole.render.columns.ColumnSpec`, and no front end
  table column (``Column``/``PlainColumn``) spells a header a render module defines: the
  console and the CLI take their columns from ``render/``.

Each scanner also runs on a planted offender, so a scan that finds nothing cannot pass
for a clean tree.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from byconsole.render import alerts, dead, events, instances, pending, types, workers
from byconsole.render.columns import ColumnSpec
from tests.unit.test_import_contracts import imported_modules

ROOT = Path(__file__).resolve().parents[2]
RENDER = ROOT / "byconsole" / "render"
FRONT_ENDS = (ROOT / "byconsole" / "tui", ROOT / "byconsole" / "headless")
FORBIDDEN = ("textual", "rich", "byconsole.tui", "byconsole.headless", "byconsole.styles")
TABLE_COLUMNS = ("Column", "PlainColumn")

RENDERED: tuple[tuple[ColumnSpec, ...], ...] = (
    workers.COLUMNS,
    types.COLUMNS,
    events.COLUMNS,
    instances.COLUMNS,
    alerts.COLUMNS,
    dead.COLUMNS,
    pending.COLUMNS,
)
"""Every render module's columns."""

NOT_YET_RENDERED: tuple[str, ...] = ()
"""Front-end tables still defining their own columns (none now): the test fails once one
is clean, so the list only shrinks."""


def _within(module: str, root: str) -> bool:
    return module == root or module.startswith(f"{root}.")


def forbidden_imports(package: Path) -> list[str]:
    """``file:line module`` of every import of a UI stack or a front end under ``package``."""
    return [
        f"{path}:{line} {module}"
        for path in sorted(package.rglob("*.py"))
        for line, module in imported_modules(path)
        if any(_within(module, root) for root in FORBIDDEN)
    ]


def _name(func: ast.expr) -> str:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return ""


def column_definitions(files: list[Path], headers: set[str]) -> list[str]:
    """``file:line`` of every ``ColumnSpec(...)``, and of every table column whose
    literal header is one of ``headers``."""
    found: list[str] = []
    for path in files:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            name = _name(node.func)
            literals = {
                a.value for a in node.args if isinstance(a, ast.Constant) and type(a.value) is str
            }
            if name == "ColumnSpec" or (name in TABLE_COLUMNS and literals & headers):
                found.append(f"{path}:{node.lineno}")
    return found


def _front_end_files() -> list[Path]:
    return [p for root in FRONT_ENDS for p in sorted(root.rglob("*.py"))]


SHARED_HEADERS = frozenset({"id", "type", "payload"})
"""Headers a rendered table shares with tables of other resources (the pending entries'
``id`` and ``payload``, the types' ``type``): the scan looks for the others."""


def _headers() -> set[str]:
    return {
        c.header
        for columns in RENDERED
        for c in columns
        if c.header.strip() and c.header not in SHARED_HEADERS
    }


def test_render_imports_no_ui_stack_and_no_front_end() -> None:
    assert len(list(RENDER.glob("*.py"))) >= 3
    offenders = forbidden_imports(RENDER)
    assert offenders == [], "render/ must stay plain data:\n" + "\n".join(offenders)


def test_front_ends_never_define_a_rendered_column() -> None:
    files = _front_end_files()
    assert len(files) > 20  # the scan sees the real front ends
    console = ROOT / "byconsole"
    offenders = column_definitions(files, _headers())
    waiting = {o.split(":")[0] for o in offenders} & {str(console / p) for p in NOT_YET_RENDERED}
    new = [o for o in offenders if o.split(":")[0] not in waiting]
    assert new == [], "columns belong in byconsole/render/:\n" + "\n".join(new)
    assert waiting == {str(console / p) for p in NOT_YET_RENDERED}, "rendered now: drop it"


@pytest.mark.parametrize(
    "source",
    [
        "import rich.text\n",
        "from textual.widgets import Static\n",
        "from byconsole.styles import ansi_style\n",
        "def late():\n    from byconsole.tui.views import cells\n",
    ],
)
def test_render_scan_catches_planted_imports(tmp_path: Path, source: str) -> None:
    (tmp_path / "sneaky.py").write_text(source, encoding="utf-8")
    (tmp_path / "fine.py").write_text("from byconsole.text import safe_text\n", encoding="utf-8")
    assert {hit.split(" ")[0] for hit in forbidden_imports(tmp_path)} == {
        f"{tmp_path / 'sneaky.py'}:{source.count(chr(10))}"
    }


@pytest.mark.parametrize(
    ("source", "hits"),
    [
        ('COLUMNS = (ColumnSpec("x", "x"),)\n', 1),
        ('C = PlainColumn("jobs", 2, "right")\n', 1),
        ('C = (Column("seen", "seen"), Column("mark", " ", 1))\n', 1),
        ('C = widgets.Column("k", "jobs")\n', 1),
        ('C = Column("k", "uptime")\nPlainColumn(spec.header)\n', 0),
    ],
)
def test_column_scan_catches_planted_definitions(tmp_path: Path, source: str, hits: int) -> None:
    sneaky = tmp_path / "view.py"
    sneaky.write_text(source, encoding="utf-8")
    assert len(column_definitions([sneaky], {"jobs", "seen"})) == hits


HEADLESS = ROOT / "byconsole" / "headless"


def ui_stack_imports(files: list[Path]) -> list[str]:
    """``file:line module`` of every import of Textual or Rich in ``files``."""
    return [
        f"{p}:{line} {m}"
        for p in files
        for line, m in imported_modules(p)
        if _within(m, "textual") or _within(m, "rich")
    ]


def test_headless_imports_neither_textual_nor_rich() -> None:
    files = sorted(HEADLESS.glob("*.py"))
    assert len(files) > 8
    found = ui_stack_imports(files)
    assert found == [], "the headless front end lays out plain text:\n" + "\n".join(found)


@pytest.mark.parametrize(
    "source",
    [
        "from rich.text import Text\n",
        "def late():\n    from rich.console import Console\n",
        "import textual.app\n",
    ],
)
def test_ui_stack_scan_catches_planted_imports(tmp_path: Path, source: str) -> None:
    sneaky = tmp_path / "render_x.py"
    sneaky.write_text(source, encoding="utf-8")
    assert len(ui_stack_imports([sneaky])) >= 1
    (tmp_path / "clean.py").write_text("from richer import x\n", encoding="utf-8")
    assert ui_stack_imports([tmp_path / "clean.py"]) == []


CLEANERS = {
    ROOT / "byconsole" / "text.py": {"safe_text", "safe"},
    RENDER / "columns.py": {"clean"},
}
"""The one text-cleaning function (:func:`byconsole.text.safe_text`), the wrapper that puts
it in a Rich ``Text`` and the renderers' fast path in front of it."""


def cleaning_functions(files: list[Path]) -> list[str]:
    """``file:line name`` of every function named for cleaning text (``safe``, ``clean``)
    that does not hand its work to :func:`safe_text` or :func:`clean`."""
    found: list[str] = []
    for path in files:
        allowed = CLEANERS.get(path, set())
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            words = set(node.name.strip("_").split("_"))
            if not words & {"safe", "clean"} or node.name in allowed:
                continue
            calls = {_name(c.func) for c in ast.walk(node) if isinstance(c, ast.Call)}
            if not calls & {"safe_text", "clean", "safe"}:
                found.append(f"{path}:{node.lineno} {node.name}")
    return found


def test_one_text_cleaning_function() -> None:
    from byconsole.render import columns
    from byconsole.tui.views import cells

    assert cells.clean is columns.clean
    files = sorted((ROOT / "byconsole").rglob("*.py"))
    assert cleaning_functions(files) == [], "clean text with byconsole.text.safe_text"


def test_cleaning_scan_catches_a_second_cleaner(tmp_path: Path) -> None:
    (tmp_path / "table.py").write_text(
        "def _safe(v):\n    return str(v).replace('\\x1b', '?')\n"
        "def _cell(v):\n    return v\n"
        "def safe_cell(v):\n    return Text(safe_text(v, 40))\n",
        encoding="utf-8",
    )
    assert cleaning_functions([tmp_path / "table.py"]) == [f"{tmp_path / 'table.py'}:1 _safe"]
