"""Import contracts: which package may import what, checked by scanning every import.

* ``worker_runtime`` (what every worker process runs) never imports the console, Textual
  or Rich, not even lazily inside a function: workers run on slim images.
* Nothing in the runtime imports the admin write API (``worker_runtime.admin``) at run
  time except the runtime's own CLI: the operator's API is a leaf the console and the
  CLIs call, never a library the worker, the reader or the scaler lean on (replica-count
  rules live in ``worker_runtime.quota``, lease verdicts in ``worker_runtime.verdicts``).
  Imports under ``if TYPE_CHECKING:`` do not count (the package's lazy public API names
  ``WorkerManager`` that way); lazy loading is proved in ``test_public_api.py``.
* The lease verdicts (``worker_runtime.verdicts``: liveness, "applied", "superseded")
  import only ``worker_runtime.models`` and the standard library: the producer and the
  admin API use them without loading the reader's views or reply parsing.

* The console's two front ends stand side by side: ``byconsole/headless/`` (the
  ``--snapshot`` path and the admin subcommands) and the modules both front ends share
  (``cli.py``, ``config.py``, ``text.py``, ``styles.py``, ``formatting.py``,
  ``outcomes.py``) never import Textual or ``byconsole.tui``; the one exception is
  ``cli.py`` starting the TUI or the demo, lazily, inside the function that does it.
  The TUI does not reach into the headless package either: what both need lives on top.

``tests/unit/test_hygiene.py`` imports every runtime module in a fresh interpreter;
``tests/integration/test_import_contracts.py`` runs the headless commands and checks
Textual never loads. Each scanner here also runs on a planted offender, so a scan that
silently finds nothing cannot pass for a clean repository.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

RUNTIME = "worker_runtime"
UI_ROOTS = ("byconsole", "textual", "rich")
ADMIN_MODULE = "worker_runtime.admin"
# Who in the runtime may import the admin write API (paths relative to the package).
ADMIN_IMPORTERS = ("admin.py", "cli.py")
VERDICTS = "verdicts.py"
# The one project module the pure verdicts may import.
VERDICTS_MAY_IMPORT = "worker_runtime.models"

CONSOLE = ROOT / "byconsole"
TUI_ROOTS = ("textual", "byconsole.tui")
# (file, line) pairs allowed to start the TUI: cli.py's lazy imports in its TUI/demo branch.
TUI_LAUNCHERS = ("cli.py",)


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    """ids of every node inside an ``if TYPE_CHECKING:`` block."""
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and ast.unparse(node.test) in (
            "TYPE_CHECKING",
            "typing.TYPE_CHECKING",
        ):
            inside.update(id(child) for stmt in node.body for child in ast.walk(stmt))
    return inside


def imported_modules(path: Path, *, run_time_only: bool = False) -> list[tuple[int, str]]:
    """``(line, module)`` for every import in ``path``, including those inside functions.

    ``from pkg import name`` yields both ``pkg`` and ``pkg.name`` (the name may be a module).
    With ``run_time_only``, imports under ``if TYPE_CHECKING:`` are left out.
    """
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    skipped = _type_checking_nodes(tree) if run_time_only else set()
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
            found.extend((node.lineno, f"{node.module}.{alias.name}") for alias in node.names)
    return found


def _within(module: str, root: str) -> bool:
    return module == root or module.startswith(f"{root}.")


def ui_imports(package_dir: Path) -> list[str]:
    """``file:line root`` of every import of the console, Textual or Rich."""
    found: dict[str, None] = {}  # ordered, one entry per statement and root
    for path in sorted(package_dir.rglob("*.py")):
        for line, module in imported_modules(path):
            for root in UI_ROOTS:
                if _within(module, root):
                    found[f"{path}:{line} {root}"] = None
    return list(found)


def admin_imports(package_dir: Path) -> list[str]:
    """``file:line`` of every import of the admin write API outside its allowed importers."""
    offenders: set[str] = set()
    for path in sorted(package_dir.rglob("*.py")):
        if path.relative_to(package_dir).as_posix() in ADMIN_IMPORTERS:
            continue
        for line, module in imported_modules(path, run_time_only=True):
            if _within(module, ADMIN_MODULE):
                offenders.add(f"{path}:{line}")
    return sorted(offenders)


def non_model_imports(path: Path) -> list[str]:
    """``file:line module`` of every import in ``path`` that is neither the standard
    library nor :data:`VERDICTS_MAY_IMPORT` (with its names)."""
    offenders: list[str] = []
    for line, module in imported_modules(path):
        root = module.split(".")[0]
        if root == "__future__" or root in sys.stdlib_module_names:
            continue
        if _within(module, VERDICTS_MAY_IMPORT):
            continue
        offenders.append(f"{path}:{line} {module}")
    return offenders


# -- the repository ------------------------------------------------------------------------


def test_runtime_never_imports_the_console_textual_or_rich() -> None:
    package = ROOT / RUNTIME
    assert len(list(package.rglob("*.py"))) > 20  # the scan sees the real package
    offenders = ui_imports(package)
    assert offenders == [], "the runtime must not pull in the UI stack:\n" + "\n".join(offenders)


def test_only_the_cli_imports_the_admin_write_api_in_the_runtime() -> None:
    offenders = admin_imports(ROOT / RUNTIME)
    assert offenders == [], (
        "runtime modules must not import worker_runtime.admin (replica counts: "
        "worker_runtime.quota; lease verdicts: worker_runtime.verdicts):\n" + "\n".join(offenders)
    )


def test_the_verdicts_import_only_the_models() -> None:
    path = ROOT / RUNTIME / VERDICTS
    assert any(_within(m, VERDICTS_MAY_IMPORT) for _, m in imported_modules(path))
    offenders = non_model_imports(path)
    assert offenders == [], "verdicts.py may import only models and stdlib:\n" + "\n".join(
        offenders
    )


def test_the_console_is_allowed_the_admin_api() -> None:
    # The rule is one-way: the console and its CLI are the admin API's callers.
    assert any(
        _within(module, ADMIN_MODULE)
        for path in (ROOT / "byconsole").rglob("*.py")
        for _, module in imported_modules(path)
    )


def tui_imports(files: list[Path], *, allow_lazy_in: tuple[str, ...] = ()) -> list[str]:
    """``file:line root`` of every import of Textual or the TUI package in ``files``.

    Files named in ``allow_lazy_in`` may import them inside a function (a lazy launch),
    never at module level.
    """
    found: list[str] = []
    for path in files:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        top_level = {id(node) for node in tree.body}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                modules = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            else:
                continue
            lazy = id(node) not in top_level
            if lazy and path.name in allow_lazy_in:
                continue
            for root in TUI_ROOTS:
                if any(_within(m, root) for m in modules):
                    found.append(f"{path}:{node.lineno} {root}")
                    break
    return found


def test_headless_and_shared_modules_never_import_the_tui() -> None:
    headless = sorted((CONSOLE / "headless").rglob("*.py"))
    shared = sorted(CONSOLE.glob("*.py"))
    assert len(headless) >= 6 and any(p.name == "cli.py" for p in shared)
    offenders = tui_imports(headless + shared, allow_lazy_in=TUI_LAUNCHERS)
    assert offenders == [], "headless/shared code must not pull in the TUI:\n" + "\n".join(
        offenders
    )


def test_the_tui_does_not_reach_into_the_headless_package() -> None:
    offenders = [
        f"{path}:{line}"
        for path in sorted((CONSOLE / "tui").rglob("*.py"))
        for line, module in imported_modules(path)
        if _within(module, "byconsole.headless")
    ]
    assert offenders == [], "shared code belongs on top of both front ends:\n" + "\n".join(
        offenders
    )


# -- the scanners find planted offenders -----------------------------------------------------


@pytest.mark.parametrize(
    "source",
    [
        "import textual\n",
        "from textual.app import App\n",
        "from rich.console import Console\n",
        "import rich.text as t\n",
        "from byconsole import text\n",
        "def show():\n    from byconsole.text import safe_text\n",
    ],
)
def test_ui_scan_catches_planted_imports(tmp_path: Path, source: str) -> None:
    (tmp_path / "sneaky.py").write_text(source, encoding="utf-8")
    (tmp_path / "clean.py").write_text("import json\nfrom richer import x\n", encoding="utf-8")
    assert [hit.split(" ")[0] for hit in ui_imports(tmp_path)] == [
        f"{tmp_path / 'sneaky.py'}:{source.count(chr(10))}"
    ]


@pytest.mark.parametrize(
    "source",
    [
        "from worker_runtime.admin import parse_count\n",
        "from worker_runtime import admin\n",
        "import worker_runtime.admin\n",
        "def lazy():\n    from worker_runtime.admin import WorkerManager\n",
        "if TYPE_CHECKING:\n    pass\nelse:\n    from worker_runtime.admin import x\n",
    ],
)
def test_admin_scan_catches_planted_imports(tmp_path: Path, source: str) -> None:
    for name in ("fleet.py", "cli.py"):
        (tmp_path / name).write_text(source, encoding="utf-8")
    (tmp_path / "scale.py").write_text(
        "from worker_runtime.quota import parse_count\nfrom worker_runtime import admin_x\n"
        "if TYPE_CHECKING:\n    from worker_runtime.admin import WorkerManager\n",
        encoding="utf-8",
    )
    # cli.py is an allowed importer; fleet.py is not; admin_x is another module; a
    # type-only import does not run.
    assert admin_imports(tmp_path) == [f"{tmp_path / 'fleet.py'}:{source.count(chr(10))}"]


@pytest.mark.parametrize(
    "source",
    [
        "from worker_runtime.snapshot import WorkerView\n",
        "from worker_runtime import replies\n",
        "import pydantic\n",
        "def lazy():\n    from worker_runtime.views import build_worker_view\n",
    ],
)
def test_verdicts_scan_catches_planted_imports(tmp_path: Path, source: str) -> None:
    clean = tmp_path / "clean.py"
    clean.write_text(
        "from __future__ import annotations\nimport math\nfrom datetime import UTC\n"
        "from worker_runtime.models import Lease, Status\n",
        encoding="utf-8",
    )
    assert non_model_imports(clean) == []
    sneaky = tmp_path / "sneaky.py"
    sneaky.write_text(source, encoding="utf-8")
    assert non_model_imports(sneaky) != []


@pytest.mark.parametrize(
    ("source", "hits"),
    [
        ("import textual\n", 1),
        ("from byconsole.tui.app import run_tui\n", 1),
        ("from byconsole.tui import app\n", 1),
        ("def launch():\n    from byconsole.tui.app import run_tui\n", 1),
        ("from byconsole.text import safe_text\nimport textualize\n", 0),
    ],
)
def test_tui_scan_catches_planted_imports(tmp_path: Path, source: str, hits: int) -> None:
    sneaky = tmp_path / "sneaky.py"
    sneaky.write_text(source, encoding="utf-8")
    assert len(tui_imports([sneaky])) == hits
    # A launcher may import the TUI lazily, never at module level.
    launcher = tmp_path / "cli.py"
    launcher.write_text(source, encoding="utf-8")
    lazy = source.startswith("def ")
    expected = 0 if lazy else hits
    assert len(tui_imports([launcher], allow_lazy_in=TUI_LAUNCHERS)) == expected
