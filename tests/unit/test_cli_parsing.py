"""The command line in-process: every usage error is one line + exit 2; help everywhere.

(The real executable is driven as a subprocess in tests/integration/test_cli_*.py.)
"""

from __future__ import annotations

import argparse
import contextlib
import io
from pathlib import Path
from typing import Any

import pytest

from byconsole.cli import UsageError, build_parser, main
from byconsole.headless.checks import Checks, parse_fail_on, parse_min_online
from worker_runtime.settings import RedisSettings

COMMANDS = [
    [],
    ["worker"],
    ["worker", "list"],
    ["worker", "info"],
    ["worker", "suspend"],
    ["worker", "resume"],
    ["worker", "evict"],
    ["worker", "drain"],
    ["worker", "forget"],
    ["type"],
    ["type", "denylist"],
    ["type", "deny"],
    ["type", "allow"],
    ["scale"],
    ["metrics"],
    ["metrics", "snapshot"],
    ["metrics", "history"],
    ["contexts"],
]


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help_with_an_example(
    command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*command, "--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: byconsole")
    assert "example" in out


@pytest.mark.parametrize(
    "args",
    [
        ["--snapshot", "--fail-on", "stale,bogus"],
        ["--snapshot", "--min-online", "x"],
        ["--snapshot", "--min-online", "chat=-1"],
        ["--snapshot", "--min-online", "=3"],
        ["--snapshot", "--max-depth", "-3"],
        ["--snapshot", "--format", "xml"],
        ["--format", "json"],
        ["--fail-on", "stale"],
        ["worker", "list", "--max-depth", "3"],
        ["--demo", "--snapshot"],
        ["--demo", "worker", "list"],
        ["--snapshot", "worker", "list"],
        ["--refresh", "0"],
        ["--refresh", "soon"],
        ["worker"],
        ["worker", "frob", "x"],
        ["worker", "suspend"],
        ["worker", "evict", "w1", "--timeout", "-1"],
        ["nonsense"],
        ["scale", "chat", "many"],
        ["metrics", "history", "--limit", "0"],
        ["--snapshot", "--redis-url", "http://example.com"],
        ["--snapshot", "--redis-url", "redis://:pw@host:99999/0"],
    ],
)
def test_usage_errors_are_one_line_and_exit_2(
    args: list[str],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    assert main(args) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("byconsole: error: "), captured.err
    assert "pw@" not in captured.err and captured.out == ""


def _parse(parser: argparse.ArgumentParser, argv: list[str]) -> tuple[object, str]:
    """The namespace (or the exit/usage error) and the help text parsing ``argv`` gives."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            result: object = vars(parser.parse_args(argv))
        except SystemExit as exc:  # --help
            result = ("exit", exc.code)
        except UsageError as exc:
            result = ("usage", str(exc))
    return result, out.getvalue()


@pytest.mark.parametrize(
    "argv",
    [
        *([*command, "--help"] for command in COMMANDS),
        ["dead", "requeue", "--help"],
        ["--snapshot", "--format", "json", "--type", "chat"],
        ["worker", "list", "--type", "chat", "--json", "--redis-url", "redis://h:1/0"],
        ["worker", "evict", "w-1", "--force", "--wait", "--timeout", "2", "-r", "why"],
        ["type", "deny", "chat", "w-1", "--context", "prod"],
        ["scale", "chat", "3", "--instance", "host-a:1"],
        ["metrics", "history", "-n", "5"],
        ["dead", "purge", "chat", "--all", "--reason", "r"],
        ["contexts", "--json", "--config", "x.toml"],
        ["worker", "frob"],
        ["scale", "chat"],
        ["nonsense"],
    ],
)
def test_lazy_parser_parses_as_the_complete_one(argv: list[str]) -> None:
    # main() builds each subcommand's arguments only once it is chosen: same result.
    assert _parse(build_parser(lazy=True), argv) == _parse(build_parser(), argv)


def test_scale_bounds_are_a_usage_error(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # Rejected before any connection: the URL points nowhere.
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    monkeypatch.setenv("BYAI_REDIS_URL", "redis://127.0.0.1:1/0")
    for count in ("-1", "1001"):
        assert main(["scale", "chat", count, "--force"]) == 2
        err = capsys.readouterr().err
        assert err == f"byconsole: error: scale count {count} is out of range: 0 to 1000\n"


def test_min_online_and_fail_on_parsing() -> None:
    assert parse_min_online(["3", "chat=2", "a=b=1"]) == (3, {"chat": 2, "a=b": 1})
    assert parse_fail_on(["Stale, offline", "draining"]) == {"stale", "offline", "draining"}
    with pytest.raises(ValueError, match="unknown state frozen"):
        parse_fail_on(["stale,frozen"])
    assert not Checks().any and Checks(max_depth=0).any


def test_tui_branch_gets_the_resolved_settings(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import byconsole.tui.app

    config = tmp_path / "c.toml"
    config.write_text(
        '[contexts.prod]\nurl = "redis://:pw@prod:6380/0"\nread_only = true\n', encoding="utf-8"
    )
    calls: list[dict[str, Any]] = []

    def fake_run_tui(settings: RedisSettings, **kwargs: Any) -> int:
        calls.append({"endpoint": settings.endpoint, **kwargs})
        return 0

    monkeypatch.setattr(byconsole.tui.app, "run_tui", fake_run_tui)
    assert main(["--context", "prod", "--config", str(config), "--refresh", "0.5"]) == 0
    assert calls == [
        {
            "endpoint": "redis://:***@prod:6380/0",
            "refresh": 0.5,
            # The flag only: the console reads the context's read_only itself, so that
            # switching to a writable context is writable and the notice names the context.
            "read_only": False,
            "context": "prod",
            "config_path": str(config),
        }
    ]
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    assert main(["--redis-url", "redis://h:1/0", "--read-only"]) == 0
    assert calls[-1] == {
        "endpoint": "redis://h:1/0",
        "refresh": 2.0,
        "read_only": True,
        "context": None,
        "config_path": None,
    }


def test_demo_branch(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import byconsole.tui.demo

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    monkeypatch.setattr(byconsole.tui.demo, "run_demo", lambda **_: 7)
    assert main(["--demo"]) == 7
