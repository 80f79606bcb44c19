"""Repository rules that are easy to break by accident, checked by real scans.

* The runtime never pulls in the console's UI stack (workers run on slim images).
* Redis keys are spelled only in ``worker_runtime/keys.py``.
* Console widgets, views and screens never talk to Redis: they render snapshots.

Each scanner is also run against a planted offender, so a scan that silently finds
nothing cannot pass for a clean repository.
"""

from __future__ import annotations

import ast
import io
import json
import os
import re
import subprocess
import sys
import tokenize
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]

KEY_FACTORY = ROOT / "worker_runtime" / "keys.py"
KEY_PREFIXES = ("byai_gateway", "by_framework")
SCANNED_PACKAGES = ("worker_runtime", "byconsole", "bench")
UI_PACKAGES = ("byconsole/tui/views", "byconsole/tui/widgets", "byconsole/tui/screens")
REDIS_MODULES = ("redis", "worker_runtime.connection", "worker_runtime.fleet")
REDIS_NAMES = ("create_redis", "FleetReader", "WorkerManager")


# -- scanners ------------------------------------------------------------------------------


def python_files(root: Path, packages: tuple[str, ...]) -> list[Path]:
    """Every ``.py`` file under the given package directories that exist."""
    files: list[Path] = []
    for package in packages:
        directory = root / package
        if directory.is_dir():
            files.extend(sorted(directory.rglob("*.py")))
    return files


def key_literals(path: Path) -> list[str]:
    """``file:line`` of every key spelled outside the key factory.

    Flags the prefixes followed by ``:`` anywhere (code, comments, docstrings) and any
    string literal holding a bare prefix (``"byai_gateway" + ":registry..."``).
    """
    text = path.read_text(encoding="utf-8")
    hits: set[int] = set()
    for number, line in enumerate(text.splitlines(), start=1):
        if any(f"{prefix}:" in line for prefix in KEY_PREFIXES):
            hits.add(number)
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type == tokenize.STRING and any(
            # A prefix followed by "_" is another name (a Prometheus metric such as
            # by_framework_workers_online), not a key.
            re.search(rf"{p}(?!_)", token.string)
            for p in KEY_PREFIXES
        ):
            hits.add(token.start[0])
    return [f"{path}:{n}" for n in sorted(hits)]


def redis_imports(path: Path) -> list[str]:
    """``file:line module`` of every import that would let UI code talk to Redis."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: list[str] = []
    for node in ast.walk(tree):  # also imports inside functions
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            # "from worker_runtime import connection" imports a module by its name.
            modules = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
        else:
            continue
        for module in modules:
            if module.split(".")[-1] in REDIS_NAMES or any(
                module == m or module.startswith(f"{m}.") for m in REDIS_MODULES
            ):
                found.append(f"{path}:{node.lineno} {module}")
                break
    return found


# -- the repository ------------------------------------------------------------------------


_IMPORT_ALL = """
import importlib, json, pkgutil, sys
package = importlib.import_module(sys.argv[1])
names = sorted(
    m.name for m in pkgutil.walk_packages(package.__path__, sys.argv[1] + ".")
    if not m.name.endswith("__main__")  # importing it would run the CLI
)
errors = {}
for name in names:
    try:
        importlib.import_module(name)
    except Exception as exc:  # reported, not hidden
        errors[name] = repr(exc)
loaded = sorted(m for m in ("textual", "rich", "byconsole") if m in sys.modules)
print(json.dumps({"modules": names, "errors": errors, "loaded": loaded}))
"""


def import_everything(package: str, path: Path) -> dict[str, Any]:
    """Import every module of ``package`` in a fresh interpreter; what got loaded."""
    out = subprocess.run(
        [sys.executable, "-c", _IMPORT_ALL, package],
        cwd=path,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(path)},
    )
    assert out.returncode == 0, out.stderr
    report: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return report


def test_runtime_imports_no_ui_stack() -> None:
    report = import_everything("worker_runtime", ROOT)
    assert "worker_runtime.keys" in report["modules"]
    assert "worker_runtime.admin" in report["modules"]
    assert report["errors"] == {}
    assert report["loaded"] == [], f"worker_runtime pulls in {report['loaded']}"


def test_no_key_literal_outside_the_key_factory() -> None:
    files = [f for f in python_files(ROOT, SCANNED_PACKAGES) if f != KEY_FACTORY]
    assert len(files) > 5  # the scan really looked at the packages
    offenders = [hit for f in files for hit in key_literals(f)]
    assert offenders == [], "spell keys in worker_runtime/keys.py only:\n" + "\n".join(offenders)


def test_key_factory_is_where_the_keys_are() -> None:
    # The exemption is for a file that actually holds the keys.
    assert key_literals(KEY_FACTORY)


def test_ui_modules_never_import_redis() -> None:
    files = python_files(ROOT, UI_PACKAGES)
    offenders = [hit for f in files for hit in redis_imports(f)]
    assert offenders == [], "widgets render snapshots; move Redis access out:\n" + "\n".join(
        offenders
    )


# -- the scanners find planted offenders -----------------------------------------------------


def test_import_scan_catches_a_planted_ui_import(tmp_path: Path) -> None:
    package = tmp_path / "planted_runtime"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("", encoding="utf-8")
    (package / "sub" / "__init__.py").write_text("", encoding="utf-8")
    (package / "sub" / "pretty.py").write_text("def f():\n    import rich\n", encoding="utf-8")
    (package / "sub" / "view.py").write_text("import rich.text\n", encoding="utf-8")
    report = import_everything("planted_runtime", tmp_path)
    assert "planted_runtime.sub.view" in report["modules"]
    assert report["loaded"] == ["rich"]


@pytest.mark.parametrize(
    "source",
    [
        'KEY = "byai_gateway:registry:workers"\n',
        'key = f"by_framework:obs:{name}"\n',
        "# reads byai_gateway:ctrl:worker:w1 directly\n",
        'PREFIX = "byai_gateway"\nkey = PREFIX + ":registry:workers"\n',
        "def f():\n    '''Uses by_framework:obs:history.'''\n",
    ],
)
def test_key_scan_catches_planted_literals(tmp_path: Path, source: str) -> None:
    module = tmp_path / "worker_runtime" / "sneaky.py"
    module.parent.mkdir()
    module.write_text(source, encoding="utf-8")
    assert python_files(tmp_path, SCANNED_PACKAGES) == [module]
    assert key_literals(module)


def test_key_scan_ignores_clean_code(tmp_path: Path) -> None:
    module = tmp_path / "clean.py"
    module.write_text(
        "from worker_runtime.keys import Keys\nkey = Keys().workers  # gateway registry\n",
        encoding="utf-8",
    )
    assert key_literals(module) == []


@pytest.mark.parametrize(
    "source",
    [
        "import redis\n",
        "import redis.asyncio as aioredis\n",
        "from redis.asyncio import Redis\n",
        "from worker_runtime.connection import create_redis\n",
        "from worker_runtime import connection\n",
        "from worker_runtime.fleet import FleetReader\n",
        "from worker_runtime.admin import WorkerManager\n",
        "def refresh():\n    import redis\n",
    ],
)
def test_redis_scan_catches_planted_imports(tmp_path: Path, source: str) -> None:
    module = tmp_path / "byconsole" / "tui" / "widgets" / "sneaky.py"
    module.parent.mkdir(parents=True)
    module.write_text(source, encoding="utf-8")
    assert python_files(tmp_path, UI_PACKAGES) == [module]
    assert redis_imports(module)


def test_redis_scan_ignores_snapshot_imports(tmp_path: Path) -> None:
    module = tmp_path / "view.py"
    module.write_text(
        "from worker_runtime.snapshot import FleetSnapshot\n"
        "from worker_runtime.admin import MAX_SCALE\n"
        "from byconsole.text import safe_text\n",
        encoding="utf-8",
    )
    assert redis_imports(module) == []
