"""The executable runs one-shot commands without the cyclic collector, the console with it.

Both go without pydantic's plugin discovery unless the operator set it.
"""

from __future__ import annotations

import gc
import os
import sys
from collections.abc import Iterator
from typing import Any

import pytest

import byconsole.cli as cli
from byconsole import launch

PLUGINS = "PYDANTIC_DISABLE_PLUGINS"


@pytest.fixture(autouse=True)
def _collector_restored() -> Iterator[None]:
    yield
    gc.enable()


@pytest.fixture(autouse=True)
def _plugins_setting_restored(monkeypatch: pytest.MonkeyPatch) -> None:
    """The launcher writes ``PLUGINS`` into ``os.environ``; put it back after each test.

    monkeypatch records a variable only when it sets or deletes one that exists.
    """
    original = os.environ.get(PLUGINS)
    monkeypatch.setenv(PLUGINS, original or "")
    if original is None:
        monkeypatch.delenv(PLUGINS, raising=False)


def test_the_launcher_turns_the_collector_off_before_the_cli_runs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[bool] = []

    def run() -> None:
        seen.append(gc.isenabled())
        sys.exit(0)

    monkeypatch.setattr(cli, "run", run)
    with pytest.raises(SystemExit):
        launch.run()
    assert seen == [False]


@pytest.mark.parametrize(
    ("argv", "runs"),
    [
        (["--redis-url", "redis://127.0.0.1:1/0"], "_run_tui"),
        (["--demo"], "demo"),
    ],
)
def test_the_console_and_the_demo_run_with_the_collector_on(
    monkeypatch: pytest.MonkeyPatch, argv: list[str], runs: str
) -> None:
    seen: list[bool] = []

    def record(*args: Any, **kwargs: Any) -> int:
        seen.append(gc.isenabled())
        return 0

    if runs == "demo":
        import byconsole.tui.demo as demo

        monkeypatch.setattr(demo, "run_demo", record)
    else:
        monkeypatch.setattr(cli, "_run_tui", record)
    gc.disable()
    assert cli.main(argv) == 0
    assert seen == [True]


def test_a_snapshot_leaves_the_collector_as_the_launcher_set_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    gc.disable()
    # Nothing listens on port 1: the snapshot fails at once, without turning it on.
    assert cli.main(["--redis-url", "redis://127.0.0.1:1/0", "--snapshot"]) == 2
    assert not gc.isenabled()
    assert "byconsole:" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("preset", "expected"), [(None, "__all__"), ("", ""), ("logfire", "logfire")]
)
def test_the_launcher_skips_pydantic_plugin_discovery_unless_the_operator_chose(
    monkeypatch: pytest.MonkeyPatch, preset: str | None, expected: str
) -> None:
    # Discovery reads every installed package's entry points when the first model is
    # built: a sixtieth of a --snapshot start. An operator's own setting stands.
    if preset is None:
        monkeypatch.delenv(PLUGINS, raising=False)
    else:
        monkeypatch.setenv(PLUGINS, preset)
    seen: list[str | None] = []

    def run() -> None:
        seen.append(os.environ.get(PLUGINS))
        sys.exit(0)

    monkeypatch.setattr(cli, "run", run)
    with pytest.raises(SystemExit):
        launch.run()
    assert seen == [expected]
