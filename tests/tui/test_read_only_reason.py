"""Read-only mode as started from the command line: the notice gives the real reason,
and the mode follows the context unless ``--read-only`` was given (a real Redis; the
console is built by ``byconsole`` itself, then driven with Pilot)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from redis.asyncio import Redis

from byconsole import cli
from byconsole.tui.app import ConsoleApp
from tests.tui.conftest import KEYS, toasts, until, write_worker


def _console(monkeypatch: pytest.MonkeyPatch, argv: list[str]) -> ConsoleApp:
    """The app ``byconsole ARGV`` would run (its run loop replaced by the test's)."""
    built: list[ConsoleApp] = []

    def capture(self: ConsoleApp, *args: Any, **kwargs: Any) -> None:
        built.append(self)

    monkeypatch.setattr(ConsoleApp, "run", capture)
    assert cli.main(argv) == 0
    (app,) = built
    return app


def _config(tmp_path: Path, redis_url: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(
        'default_context = "prod"\n'
        f'[contexts.prod]\nurl = "{redis_url}"\nread_only = true\n'
        f'[contexts.dev]\nurl = "{redis_url}"\n',
        encoding="utf-8",
    )
    return path


async def test_a_read_only_context_says_so_and_a_writable_one_is_writable(
    redis: Redis, redis_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    await write_worker(redis, "w-1", ["chat"])
    app = _console(monkeypatch, ["--config", str(_config(tmp_path, redis_url))])
    async with app.run_test(size=(120, 36), notifications=True) as pilot:
        await until(pilot, lambda: app.main_screen.workers_view.table.row_count == 1)
        assert app.read_only
        await pilot.press("s")
        await until(pilot, lambda: any("read-only: suspend" in t for t in toasts(app)))
        notice = next(t for t in toasts(app) if "read-only: suspend" in t)
        assert "context prod is marked read-only" in notice
        assert "--read-only" not in notice
        await app.switch_context("dev")
        await until(pilot, lambda: any(t.startswith("context dev:") for t in toasts(app)))
        assert not app.read_only
        assert "(read-only" not in next(t for t in toasts(app) if t.startswith("context dev:"))
        await until(pilot, lambda: app.main_screen.workers_view.table.row_count == 1)
        await pilot.press("s")
        await until(pilot, lambda: bool(_hash(redis)))
    assert (await redis.hgetall(KEYS.worker_admin("w-1"))).get("lifecycle") == "suspended"


def _hash(redis: Redis) -> Any:
    return redis.hgetall(KEYS.worker_admin("w-1"))


async def test_the_flag_keeps_every_context_read_only_and_says_so(
    redis: Redis, redis_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    await write_worker(redis, "w-1", ["chat"])
    config = str(_config(tmp_path, redis_url))
    app = _console(monkeypatch, ["--config", config, "--context", "dev", "--read-only"])
    async with app.run_test(size=(120, 36), notifications=True) as pilot:
        await until(pilot, lambda: app.main_screen.workers_view.table.row_count == 1)
        await pilot.press("s")
        await until(pilot, lambda: any("(started with --read-only)" in t for t in toasts(app)))
        await app.switch_context("prod")
        app.clear_notifications()
        await pilot.press("s")
        await until(
            pilot, lambda: any("(context prod is marked read-only)" in t for t in toasts(app))
        )
        await app.switch_context("dev")
        assert app.read_only
        app.clear_notifications()
        await pilot.press("s")
        await until(pilot, lambda: any("(started with --read-only)" in t for t in toasts(app)))
    assert await redis.hgetall(KEYS.worker_admin("w-1")) == {}
