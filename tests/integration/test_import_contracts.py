"""The headless front end never loads Textual: proved by running it, not by reading it.

``byconsole --snapshot --format json`` and ``byconsole worker list --json`` run in a fresh
interpreter against a real Redis holding a worker; after the command returns, the probe
reports which Textual modules were ever imported. CI boxes and cron jobs run these paths
and must not pay for (or depend on) the TUI stack.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from redis.asyncio import Redis

from tests.integration.cli_helpers import add_worker, cli_env

# Run the real entry point, then list every loaded module under the given roots.
_PROBE = """
import importlib, json, sys
report_path, preload, *argv = sys.argv[1:]
if preload:
    importlib.import_module(preload)
from byconsole.cli import main
code = main(argv)
loaded = sorted(m for m in sys.modules if m == "textual" or m.startswith("textual."))
with open(report_path, "w", encoding="utf-8") as report:
    json.dump({"code": code, "textual": loaded}, report)
"""


def probe(argv: list[str], env: dict[str, str], tmp_path: Path, preload: str = "") -> Any:
    """Run ``byconsole ARGV`` in a fresh interpreter; its exit code, stdout and loaded Textual."""
    report = tmp_path / "report.json"
    out = subprocess.run(
        [sys.executable, "-c", _PROBE, str(report), preload, *argv],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    result = json.loads(report.read_text(encoding="utf-8"))
    result["stdout"] = out.stdout
    return result


@pytest.mark.parametrize(
    "argv",
    [["--snapshot", "--format", "json"], ["worker", "list", "--json"]],
    ids=["snapshot-json", "worker-list-json"],
)
async def test_headless_commands_never_import_textual(
    redis: Redis, redis_url: str, tmp_path: Path, argv: list[str]
) -> None:
    await add_worker(redis, "w-headless", ["chat"])
    result = probe(argv, cli_env(redis_url, tmp_path), tmp_path)
    assert result["code"] == 0, result
    assert "w-headless" in result["stdout"]  # the command really read the fleet
    json.loads(result["stdout"])
    assert result["textual"] == [], f"the headless path imported {result['textual']}"


async def test_the_probe_sees_textual_when_it_is_loaded(
    redis: Redis, redis_url: str, tmp_path: Path
) -> None:
    # Guards the probe itself: with Textual imported first, it must report it.
    await add_worker(redis, "w-headless", ["chat"])
    result = probe(
        ["worker", "list", "--json"], cli_env(redis_url, tmp_path), tmp_path, preload="textual.app"
    )
    assert result["code"] == 0
    assert "textual.app" in result["textual"]
