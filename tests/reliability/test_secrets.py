"""Passwords never appear: not in output, logs (a worker's included), errors, the audit
stream or any other key, nor on the console's screen.

A redis-server with ``requirepass`` and ACL users (tests/reliability/acl.py). A worker
runs with debug logging through an outage in which its password stops working; the
console CLI and the TUI run with passwords in their URLs and in a context file; every
error path with a password in play is exercised. Then every byte produced is searched
for every password.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
from pathlib import Path

import pytest
from redis import Redis as SyncRedis
from redis.asyncio import Redis

from bench.fault_handlers import JOURNAL_ENV
from byconsole.tui.app import ConsoleApp
from byconsole.tui.backend import RedisBackend
from tests.integration.cli_helpers import BYCONSOLE
from tests.integration.runtime_helpers import BIN, FAST_ENV, ROOT, eventually, stop_process
from tests.redis_server import env_with, free_port
from tests.reliability.acl import (
    ADMIN_PASSWORD,
    SECRETS,
    Secured,
    dump_all,
    setuser_args,
)
from worker_runtime.keys import Keys
from worker_runtime.settings import RedisSettings

K = Keys()

pytestmark = pytest.mark.slow

RUN_ARGS = ["run", "bench.fault_handlers:traced", "--type", "chat", "--instance", "sec"]


def _assert_secret_free(text: str, where: str) -> None:
    for secret in SECRETS:
        assert secret not in text, f"a password appears in {where}"


def _run(args: list[str], env: dict[str, str]) -> str:
    exe = str(BYCONSOLE) if args[0] == "byconsole" else str(BIN / "worker-runtime")
    out = subprocess.run(
        [exe, *args[1:]], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    return f"exit {out.returncode}\n{out.stdout}\n{out.stderr}"


async def test_no_password_in_logs_output_errors_keys_or_screens(
    secured: Secured, admin: Redis, tmp_path: Path
) -> None:
    produced: dict[str, str] = {}
    log = tmp_path / "worker.log"
    worker_env = env_with(
        secured.url("worker"), **FAST_ENV, **{JOURNAL_ENV: str(tmp_path / "journal")}
    )
    worker = subprocess.Popen(
        [str(BIN / "worker-runtime"), "-v", *RUN_ARGS],
        cwd=ROOT,
        env=worker_env,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
    )
    try:
        await eventually(lambda: admin.exists(K.worker_online("sec-r0")), timeout=20)
        ops = env_with(secured.url("operator"), XDG_CONFIG_HOME=str(tmp_path))
        config = tmp_path / "byconsole" / "config.toml"
        config.parent.mkdir()
        config.write_text(f'[contexts.prod]\nurl = "{secured.url("viewer")}"\nread_only = true\n')
        for args in (
            ["worker-runtime", "submit", "chat", "{}", "--count", "5"],
            ["byconsole", "--snapshot"],
            ["byconsole", "--snapshot", "--format", "json"],
            ["byconsole", "--snapshot", "--format", "prom"],
            ["byconsole", "worker", "list", "--json"],
            ["byconsole", "worker", "info", "sec-r0"],
            ["byconsole", "worker", "suspend", "sec-r0", "--wait", "--json"],
            ["byconsole", "worker", "resume", "sec-r0", "--wait"],
            ["byconsole", "contexts"],
            ["byconsole", "contexts", "--json"],
            ["byconsole", "--context", "prod", "--snapshot"],
        ):
            produced[" ".join(args)] = _run(args, ops)
        assert all(out.startswith("exit 0") for out in produced.values()), produced

        # Errors with a password in play: wrong password, wrong user, nobody listening,
        # a refused write, a malformed URL.
        port = secured.server.port
        for name, url in (
            ("wrong password", secured.url("operator", password=ADMIN_PASSWORD[::-1] + "x")),
            ("default user", f"redis://:{ADMIN_PASSWORD}x@127.0.0.1:{port}/0"),
            ("nobody listening", f"redis://operator:{ADMIN_PASSWORD}@127.0.0.1:{free_port()}/0"),
            ("bad port", f"redis://operator:{ADMIN_PASSWORD}@127.0.0.1:99999/0"),
            ("viewer writes", secured.url("viewer")),
        ):
            env = env_with(url, XDG_CONFIG_HOME=str(tmp_path))
            for args in (
                ["byconsole", "--snapshot"],
                ["byconsole", "worker", "suspend", "sec-r0"],
                ["worker-runtime", "submit", "chat", "{}"],
                ["worker-runtime", "run", "tests.handlers:noop", "--type", "chat"],
            ):
                out = _run(args, env)
                reads = name == "viewer writes" and args[1] == "--snapshot"
                assert out.startswith("exit 0" if reads else "exit 2"), (name, args, out)
                produced[f"{name}: {' '.join(args)}"] = out

        # The worker's password stops working (Redis restarts without its ACL users):
        # every retry logs an error, at debug level.
        assert secured.server.proc is not None
        secured.server.restart()
        await eventually(lambda: _logged(log, "invalid username-password pair"), timeout=15)
        with SyncRedis(port=port, password=ADMIN_PASSWORD) as again:
            for user in ("worker", "operator", "viewer"):
                again.execute_command("ACL", "SETUSER", *setuser_args(user))
        await admin.aclose()
        admin = secured.admin()
        await eventually(lambda: admin.exists(K.worker_online("sec-r0")), timeout=20)

        # The console, on screen: healthy, then on a URL whose password is wrong.
        for name, url in (("tui", secured.url("operator")), ("tui bad", secured.url("x", "Bad"))):
            app = ConsoleApp(RedisBackend(RedisSettings(url=url)), refresh=0.2)
            async with app.run_test(size=(120, 36)) as pilot:
                await pilot.pause(1.0)
                produced[name] = app.export_screenshot()
        assert "sec-r0" in produced["tui"]
    finally:
        code = stop_process(worker, signal.SIGTERM)
    assert code == 0
    produced["worker log"] = log.read_text()
    assert "DEBUG" in produced["worker log"]  # -v took effect: the most talkative level
    produced["redis keys"] = repr(await dump_all(admin))
    await admin.aclose()
    for where, text in produced.items():
        _assert_secret_free(text, where)


async def _logged(log: Path, *words: str) -> bool:
    text = await asyncio.to_thread(log.read_text)
    return any(all(w in line for w in words) for line in text.splitlines())
