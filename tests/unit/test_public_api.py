"""``worker_runtime``'s public API: ``__all__``, each name from its home, loaded lazily."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys

import pytest

import worker_runtime

_LOADED = """
import json, sys
exec(sys.argv[1])
print(json.dumps(sorted(m for m in sys.modules if m.startswith("worker_runtime."))))
"""


def loaded_after(statement: str) -> list[str]:
    """The ``worker_runtime`` submodules a fresh interpreter holds after ``statement``."""
    out = subprocess.run(
        [sys.executable, "-c", _LOADED, statement], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    modules: list[str] = json.loads(out.stdout)
    return modules


def test_every_public_name_is_its_home_modules_object() -> None:
    homes: dict[str, str] = worker_runtime._HOMES
    assert sorted(worker_runtime.__all__) == sorted(homes)
    assert len(set(worker_runtime.__all__)) == len(worker_runtime.__all__)
    for name in worker_runtime.__all__:
        home = importlib.import_module(f"worker_runtime.{homes[name]}")
        assert getattr(worker_runtime, name) is getattr(home, name), name
    assert set(worker_runtime.__all__) <= set(dir(worker_runtime))


def test_the_facade_types_match_the_runtime() -> None:
    from worker_runtime import Task, WorkerInstance, WorkerManager
    from worker_runtime.admin import WorkerManager as HomeManager
    from worker_runtime.instance import WorkerInstance as HomeInstance
    from worker_runtime.models import Task as HomeTask

    assert (Task, WorkerInstance, WorkerManager) == (HomeTask, HomeInstance, HomeManager)


def test_unknown_names_raise_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'parse_count'"):
        _ = worker_runtime.parse_count  # internal: not re-exported


def test_names_load_lazily() -> None:
    assert loaded_after("import worker_runtime") == []
    # A worker's imports never pull in the operator's API, and the reverse.
    task = loaded_after("from worker_runtime import Task")
    assert "worker_runtime.models" in task and "worker_runtime.admin" not in task
    keys = loaded_after("import worker_runtime.keys")
    assert "worker_runtime.admin" not in keys and "worker_runtime.instance" not in keys
    manager = loaded_after("from worker_runtime import WorkerManager")
    assert "worker_runtime.admin" in manager and "worker_runtime.instance" not in manager
