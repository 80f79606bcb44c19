"""Rules that keep every Redis call valid on a Redis Cluster, checked by real scans.

* Pipelines are non-transactional: redis-py's default ``pipeline()`` is MULTI/EXEC,
  which a cluster accepts only inside one slot (and redis-py 8.1's async cluster client
  queues MULTI commands through ``asyncio.run`` in a thread).
* No keyspace-wide command (``KEYS``, ``SCAN``): on a cluster each asks one node. The
  one exception, :data:`SCANS_EVERY_PRIMARY`, scans every primary of a cluster itself
  (``tests/integration/test_task_plane.py::test_discovery_scans_every_primary``).
* A Lua script naming several keys names keys of one declared slot group, and each
  group shares a hash tag in key schema v2.

Each scanner is also run against planted offenders, so a scan that silently finds
nothing cannot pass.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from pathlib import Path

import pytest
from redis.crc import key_slot

from worker_runtime.keys import Keys

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("worker_runtime", "byconsole")

SLOT_GROUPS: list[frozenset[str]] = [
    frozenset({"leader_lock", "leader_epoch"}),
    # by-framework's collector lock is unversioned, apart from the history: never
    # named in one script with it (the lock is a plain SET NX PX).
    frozenset({"metrics_fence", "metrics_history", "metrics_tier"}),
    frozenset({"scheduler_fence", "scheduler_runs"}),
]
"""Key factory attributes a script may name together (one slot each in v2)."""

_KEYSPACE_WIDE = {"scan", "scan_iter", "randomkey"}

SCANS_EVERY_PRIMARY = {("worker_runtime/fleet.py", "discover")}
"""(file, function) allowed to SCAN: the fleet reader's slow background discovery of
types that only have streams, which asks every primary on a cluster."""


def _files() -> list[Path]:
    return [p for package in PACKAGES for p in sorted((ROOT / package).rglob("*.py"))]


def _calls(tree: ast.AST, name: str) -> list[ast.Call]:
    return [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == name
    ]


def transactional_pipelines(source: str, where: str = "") -> list[str]:
    """``where:line`` of each ``.pipeline(...)`` call without a literal ``transaction=False``."""
    found = []
    for call in _calls(ast.parse(source), "pipeline"):
        flags = [k for k in call.keywords if k.arg == "transaction"]
        if not (
            flags and isinstance(flags[0].value, ast.Constant) and flags[0].value.value is False
        ):
            found.append(f"{where}:{call.lineno}")
    return found


def keyspace_wide_calls(source: str, where: str = "") -> list[str]:
    """``where:line`` of KEYS/SCAN-style calls (``.keys(pattern)``, ``.scan_iter()`` …)."""
    tree = ast.parse(source)
    allowed = {
        id(call)
        for func in ast.walk(tree)
        if isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef)
        and (where, func.name) in SCANS_EVERY_PRIMARY
        for name in _KEYSPACE_WIDE
        for call in _calls(func, name)
    }
    found = [
        f"{where}:{c.lineno}"
        for name in _KEYSPACE_WIDE
        for c in _calls(tree, name)
        if id(c) not in allowed
    ]
    # dict.keys() takes no argument; Redis KEYS takes a pattern.
    found += [f"{where}:{c.lineno}" for c in _calls(tree, "keys") if c.args or c.keywords]
    return sorted(found)


def _slot_checked_evals(tree: ast.AST) -> set[int]:
    """Ids of ``.eval`` calls in functions that compare their keys' slots (``key_slot``).

    Such a function sends the script only when its keys share a slot (and does the work
    another way when they do not), so its keys need not be a declared group.
    """
    checked: set[int] = set()
    for func in ast.walk(tree):
        if not isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        calls = [n for n in ast.walk(func) if isinstance(n, ast.Call)]
        if any(isinstance(c.func, ast.Name) and c.func.id == "key_slot" for c in calls):
            checked.update(id(c) for c in _calls(func, "eval"))
    return checked


def _key_name(arg: ast.expr) -> str | None:
    """The key factory member an argument names (``keys.x`` or ``keys.x(...)``)."""
    if isinstance(arg, ast.Attribute):
        return arg.attr
    if isinstance(arg, ast.Call) and isinstance(arg.func, ast.Attribute):
        return arg.func.attr
    return None


def script_key_groups(source: str, where: str = "") -> list[str]:
    """Problems with ``.eval(script, numkeys, *keys, ...)`` calls naming several keys."""
    problems = []
    tree = ast.parse(source)
    checked = _slot_checked_evals(tree)
    for call in _calls(tree, "eval"):
        if id(call) in checked:
            continue
        if len(call.args) < 2 or not isinstance(call.args[1], ast.Constant):
            problems.append(f"{where}:{call.lineno} numkeys is not a literal")
            continue
        count = call.args[1].value
        if not isinstance(count, int) or count <= 1:
            continue
        args = call.args[2:][:count]
        named = [_key_name(a) for a in args]
        names = {n for n in named if n is not None}
        if len(args) < count or None in named:
            problems.append(f"{where}:{call.lineno} keys are not key factory attributes")
        elif not any(names <= group for group in SLOT_GROUPS):
            problems.append(f"{where}:{call.lineno} {sorted(names)} are not one slot group")
    return problems


def _scan(scanner: Callable[[str, str], list[str]]) -> tuple[list[str], int]:
    found: list[str] = []
    files = _files()
    for path in files:
        found += scanner(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)))
    return found, len(files)


# -- the repository ------------------------------------------------------------------------


def test_every_pipeline_is_non_transactional() -> None:
    found, scanned = _scan(transactional_pipelines)
    assert scanned > 20
    assert found == []


def test_no_keyspace_wide_command() -> None:
    found, _ = _scan(keyspace_wide_calls)
    assert found == []


def test_multi_key_scripts_name_one_slot_group() -> None:
    found, _ = _scan(script_key_groups)
    assert found == []


@pytest.mark.parametrize("group", SLOT_GROUPS, ids=lambda g: "+".join(sorted(g)))
def test_each_slot_group_shares_a_slot_in_v2(group: frozenset[str]) -> None:
    v2 = Keys("v2")

    def key(name: str) -> str:
        member = getattr(v2, name)
        return str(member("10s") if callable(member) else member)  # a per-tier key

    slots = {key_slot(key(name).encode()) for name in group}
    assert len(slots) == 1, {name: key(name) for name in group}


# -- the scanners find planted offenders ---------------------------------------------------


@pytest.mark.parametrize(
    "source",
    [
        "pipe = redis.pipeline()",
        "pipe = redis.pipeline(transaction=True)",
        "pipe = redis.pipeline(transaction=flag)",
        "async with client.pipeline() as pipe: pass",
    ],
)
def test_pipeline_scan_catches_planted_transactions(source: str) -> None:
    assert transactional_pipelines(source, "x.py") == ["x.py:1"]


def test_pipeline_scan_accepts_non_transactional() -> None:
    assert transactional_pipelines("pipe = redis.pipeline(transaction=False)") == []


@pytest.mark.parametrize(
    "source",
    [
        'names = await redis.keys("byai_gateway:*")',
        "names = await redis.keys(pattern)",
        "async for key in redis.scan_iter(match='x'): pass",
        "cursor, found = await redis.scan(0)",
    ],
)
def test_keyspace_scan_catches_planted_commands(source: str) -> None:
    assert keyspace_wide_calls(source, "x.py") == ["x.py:1"]


def test_keyspace_scan_ignores_dict_keys() -> None:
    assert keyspace_wide_calls("ids = sorted(table.keys())\nk = self.keys.workers") == []


@pytest.mark.parametrize(
    ("source", "problem"),
    [
        ("await r.eval(S, 2, keys.leader_lock, keys.metrics_history)", "not one slot group"),
        ("await r.eval(S, 2, keys.workers, keys.instances)", "not one slot group"),
        ("await r.eval(S, 2, keys.leader_lock, keys.metrics_tier(t))", "not one slot group"),
        ("await r.eval(S, 2, a, b)", "not key factory attributes"),
        ("await r.eval(S, n, keys.leader_lock)", "numkeys is not a literal"),
    ],
)
def test_script_scan_catches_planted_cross_slot_scripts(source: str, problem: str) -> None:
    (found,) = script_key_groups(source, "x.py")
    assert found.startswith("x.py:1") and problem in found


def test_script_scan_accepts_one_group_and_single_keys() -> None:
    source = (
        "await r.eval(S, 2, keys.leader_lock, keys.leader_epoch, token)\n"
        "await r.eval(S, 1, key, value)\n"
    )
    assert script_key_groups(source) == []


def test_script_scan_accepts_scripts_sent_only_after_a_slot_check() -> None:
    source = (
        "def move(pipe, a, b):\n"
        "    if key_slot(a.encode()) == key_slot(b.encode()):\n"
        "        pipe.eval(S, 2, a, b)\n"
        "def other(pipe, a, b):\n"
        "    pipe.eval(S, 2, a, b)\n"
    )
    (found,) = script_key_groups(source, "x.py")
    assert found.startswith("x.py:5") and "not key factory attributes" in found


def test_keyspace_scan_allows_only_the_named_discovery() -> None:
    source = "async def discover(self):\n    await self.redis.scan(0)\n"
    assert keyspace_wide_calls(source, "worker_runtime/fleet.py") == []
    assert keyspace_wide_calls(source, "worker_runtime/other.py") == ["worker_runtime/other.py:2"]
    elsewhere = "async def read(self):\n    await self.redis.scan(0)\n"
    assert keyspace_wide_calls(elsewhere, "worker_runtime/fleet.py") == [
        "worker_runtime/fleet.py:2"
    ]
