"""``--snapshot --format json`` loads only what it needs: no Textual, no Rich layout.

Nor anything else a snapshot does not use: the admin API, the admin subcommands, a
TOML parser when there is no config file. A CI job pays for
every import on each run (bench/fleet_listing.py measures the start-up against
``rq info``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from redis.asyncio import Redis

from worker_runtime.keys import Keys
from worker_runtime.models import now_ms

K = Keys()

PROBE = """
import json, sys
from byconsole.cli import main
code = main(sys.argv[2:])
with open(sys.argv[1], "w") as out:
    json.dump({"code": code, "modules": sorted(sys.modules)}, out)
"""

# Rich's layout machinery: measuring, wrapping, tables, the console itself.
RICH_LAYOUT = ("rich.console", "rich.table", "rich.layout", "rich.padding", "rich.measure")


# Loaded by other paths only: the admin API and subcommands, TOML (no config file here).
NOT_FOR_A_SNAPSHOT = (
    "worker_runtime.admin",
    "worker_runtime.messages",
    "byconsole.headless.commands",
    "tomllib",
)


def _modules(tmp_path: Path, *args: str) -> tuple[int, set[str]]:
    result = tmp_path / "modules.json"
    # No config file: the default path points into the empty test directory.
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path)}
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, str(result), *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert proc.returncode in (0, 1), proc.stderr
    doc = json.loads(result.read_text())
    return int(doc["code"]), set(doc["modules"])


async def test_json_snapshot_imports_neither_textual_nor_rich_layout(
    redis: Redis, redis_url: str, tmp_path: Path
) -> None:
    await redis.sadd(K.workers, "w-1")
    await redis.set(K.worker_online("w-1"), json.dumps({"worker_id": "w-1", "last_seen": now_ms()}))
    code, modules = _modules(tmp_path, "--redis-url", redis_url, "--snapshot", "--format", "json")
    assert code == 0
    assert "worker_runtime.fleet" in modules  # the probe did read the fleet
    assert not {m for m in modules if m == "textual" or m.startswith("textual.")}
    assert not {m for m in modules if m.startswith("rich")}, "JSON output needs no Rich at all"
    assert "byconsole.headless.commands" not in modules  # the admin subcommands load on demand
    assert not modules & set(NOT_FOR_A_SNAPSHOT), sorted(modules & set(NOT_FOR_A_SNAPSHOT))


async def test_table_snapshot_uses_no_rich_layout(
    redis: Redis, redis_url: str, tmp_path: Path
) -> None:
    await redis.sadd(K.workers, "w-1")
    code, modules = _modules(tmp_path, "--redis-url", redis_url, "--snapshot")
    assert code == 0
    assert "byconsole.headless.plain_table" in modules
    assert not {m for m in modules if m.startswith("textual")}
    assert not modules & set(RICH_LAYOUT)


async def test_the_probe_sees_what_other_paths_load(
    redis: Redis, redis_url: str, tmp_path: Path
) -> None:
    # Guards the list above: an admin subcommand and a config file do load them.
    await redis.sadd(K.workers, "w-1")
    config = tmp_path / "byconsole.toml"
    config.write_text('[contexts.here]\nurl = "redis://127.0.0.1:1/0"\n', encoding="utf-8")
    args = ("--redis-url", redis_url, "--config", str(config), "worker", "list", "--json")
    code, modules = _modules(tmp_path, *args)
    assert code == 0
    assert {"worker_runtime.admin", "byconsole.headless.commands", "tomllib"} <= modules


async def test_admin_subcommands_lay_out_without_rich_layout(
    redis: Redis, redis_url: str, tmp_path: Path
) -> None:
    # worker info prints key-value blocks and tables, the layouts Rich used to do.
    await redis.sadd(K.workers, "w-1")
    await redis.set(K.worker_online("w-1"), json.dumps({"worker_id": "w-1", "last_seen": now_ms()}))
    code, modules = _modules(tmp_path, "--redis-url", redis_url, "worker", "info", "w-1")
    assert code == 0
    assert {"byconsole.headless.commands", "byconsole.headless.render_table"} <= modules
    assert not modules & set(RICH_LAYOUT), sorted(modules & set(RICH_LAYOUT))
