"""A password given on the command line is gone from ``/proc/PID/cmdline`` once the
process has started, and the process still works with it (README "Security: TLS, ACL
users, secrets").

Real processes against a ``redis-server`` with ``requirepass``: a ``worker-runtime
run`` that then runs a task, and the ``byconsole`` console in a pseudo-terminal that
then shows that worker. Both can only do so with the password they were given.
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import select
import signal
import struct
import subprocess
import termios
import time
from collections.abc import Iterator

import pytest
from redis.asyncio import Redis

from tests.integration.cli_helpers import BYCONSOLE, add_worker
from tests.integration.runtime_helpers import BIN, FAST_ENV, ROOT, eventually, stop_process
from tests.redis_server import RedisServer, env_with
from worker_runtime.keys import Keys
from worker_runtime.proctitle import scrub_argv

pytestmark = pytest.mark.slow

PASSWORD = "Argv-Pw-9q!x"
K = Keys()


@pytest.fixture(scope="module")
def server() -> Iterator[RedisServer]:
    srv = RedisServer(extra_args=["--requirepass", PASSWORD]).start()
    yield srv
    srv.cleanup()


def _url(server: RedisServer) -> str:
    return f"redis://default:{PASSWORD.replace('!', '%21')}@127.0.0.1:{server.port}/0"


def _cmdline(pid: int) -> str:
    with open(f"/proc/{pid}/cmdline", "rb") as handle:
        return handle.read().replace(b"\0", b" ").decode(errors="replace")


def test_scrub_argv_masks_every_secret_form() -> None:
    argv = [
        "byconsole",
        "--redis-url",
        "redis://ops:pw1@h:6379/0",
        "--redis-url=rediss://u:pw2@h:6380",
        "--sentinel-password",
        "pw3",
        "--password=pw4",
        "redis+sentinel://:pw5@s1:26379,s2:26379/mymaster",
        "dead",
        "list",
    ]
    shown = " ".join(scrub_argv(argv))
    for secret in ("pw1", "pw2", "pw3", "pw4", "pw5"):
        assert secret not in shown
    assert "dead list" in shown and "ops:***@h:6379" in shown


async def test_worker_runtime_hides_the_password_and_still_runs_tasks(
    server: RedisServer,
) -> None:
    url = _url(server)
    env = env_with("redis://127.0.0.1:1/0", **FAST_ENV)
    env.pop("BYAI_REDIS_URL")
    args = [str(BIN / "worker-runtime"), "run", "tests.handlers:noop", "--type", "argv"]
    args += ["--instance", "argv-w", "--redis-url", url]
    proc = subprocess.Popen(args, cwd=ROOT, env=env, stderr=subprocess.PIPE)
    client = Redis.from_url(url, decode_responses=True)
    try:
        await eventually(lambda: client.exists(K.worker_online("argv-w-r0")), timeout=20)
        cmdline = _cmdline(proc.pid)
        assert PASSWORD not in cmdline and "Argv-Pw" not in cmdline
        assert "worker-runtime run tests.handlers:noop" in cmdline
        assert "default:***@127.0.0.1" in cmdline
        submit = subprocess.run(
            [
                str(BIN / "worker-runtime"),
                "submit",
                "argv",
                json.dumps({}),
                "--redis-url",
                url,
                "--wait",
            ],
            cwd=ROOT,
            env=env,
            capture_output=True,
            timeout=30,
        )
        # --wait: the worker ran the task and its result came back.
        assert submit.returncode == 0, submit.stderr
    finally:
        stop_process(proc)
        await client.aclose()
    assert proc.stderr is not None
    # The warning still tells the operator to move the password into a file.
    assert b"visible to every local user" in proc.stderr.read()


async def test_byconsole_hides_the_password_and_still_shows_the_fleet(
    server: RedisServer,
) -> None:
    url = _url(server)
    env = env_with("redis://127.0.0.1:1/0", TERM="xterm-256color", COLUMNS="120", LINES="36")
    env.pop("BYAI_REDIS_URL")
    client = Redis.from_url(url, decode_responses=True)
    await add_worker(client, "argv-shown", ["argv"])
    await client.aclose()
    parent, child = pty.openpty()
    fcntl.ioctl(child, termios.TIOCSWINSZ, struct.pack("HHHH", 36, 120, 0, 0))
    proc = subprocess.Popen(
        [str(BYCONSOLE), "--redis-url", url],
        cwd=ROOT,
        env=env,
        stdin=child,
        stdout=child,
        stderr=child,
        start_new_session=True,
    )
    os.close(child)
    screen = b""
    try:
        deadline = time.monotonic() + 30
        # The worker's id on screen: the console connected with the password it was given.
        while b"argv-shown" not in screen and time.monotonic() < deadline:
            ready, _, _ = select.select([parent], [], [], 0.5)
            if ready:
                try:
                    screen += os.read(parent, 65536)
                except OSError:
                    break
        cmdline = _cmdline(proc.pid)
        assert b"argv-shown" in screen, screen[-2000:]
        assert PASSWORD not in cmdline and "Argv-Pw" not in cmdline
        assert "default:***@127.0.0.1" in cmdline
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(5)
        os.close(parent)
