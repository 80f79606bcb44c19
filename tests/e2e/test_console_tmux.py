"""The real ``byconsole`` in a real terminal (tmux) against a real redis-server with live
worker processes: filter, suspend by key, see it applied, survive a Redis restart,
show hostile strings literally, quit."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from byconsole.tui.demo import FLEET_STOP_BOUND_S
from tests.integration.runtime_helpers import BIN, spawn_worker, stop_process
from tests.redis_server import RedisServer, env_with

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
]


class Terminal:
    """A detached tmux session on its own server socket, 120x36."""

    def __init__(self, command: list[str], env: dict[str, str]) -> None:
        self.socket = f"byconsole-e2e-{uuid.uuid4().hex[:8]}"
        self.session = "console"
        env_args = [f"{k}={v}" for k, v in env.items() if k.startswith(("BYAI_", "REDIS_"))]
        # COLUMNS/LINES from the test runner would override the pane size.
        shell = " ".join(["env", "-u", "COLUMNS", "-u", "LINES", *env_args, *command])
        self.tmux("new-session", "-d", "-s", self.session, "-x", "120", "-y", "36", shell)

    def tmux(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["tmux", "-L", self.socket, *args], capture_output=True, text=True, timeout=10
        )

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", self.session).stdout

    def keys(self, *keys: str) -> None:
        self.tmux("send-keys", "-t", self.session, *keys)

    def alive(self) -> bool:
        return self.tmux("has-session", "-t", self.session).returncode == 0

    def wait(self, condition: Callable[[str], bool], timeout: float = 20.0) -> str:
        deadline = time.monotonic() + timeout
        text = ""
        while time.monotonic() < deadline:
            text = self.screen()
            if condition(text):
                return text
            time.sleep(0.1)
        raise AssertionError(f"screen never matched; last screen:\n{text}")

    def close(self) -> None:
        self.tmux("kill-server")


def until(condition: Callable[[], bool], timeout: float = 20.0) -> None:
    """Wait for ``condition`` (polled every 0.1 s); fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.1)


def press_until(term: Terminal, key: str, seen: Callable[[str], bool], timeout: float = 15) -> str:
    """Press ``key`` until the screen shows ``seen``: keys sent in the first instant after
    start-up can be swallowed by the terminal set-up."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        term.keys(key)
        try:
            return term.wait(seen, timeout=1.5)
        except AssertionError:
            continue
    raise AssertionError(f"{key!r} had no effect; screen:\n{term.screen()}")


def _row(screen: str, worker_id: str) -> str:
    return next((line for line in screen.splitlines() if worker_id in line), "")


@pytest.fixture
def workers(server: RedisServer, tmp_path: Path) -> Iterator[list[str]]:
    proc = spawn_worker(
        server.url,
        "tests.handlers:noop",
        ["chat", "embed"],
        "e2e-a",
        replicas=2,
        log_path=tmp_path / "worker.log",
    )
    yield ["e2e-a-r0", "e2e-a-r1"]
    stop_process(proc)


def test_console_in_a_real_terminal(server: RedisServer, workers: list[str]) -> None:
    env = env_with(server.url)
    term = Terminal([str(BIN / "byconsole"), "--refresh", "0.5"], env)
    try:
        screen = term.wait(lambda s: all(w in s for w in workers) and "CONNECTED" in s)
        assert "online" in _row(screen, workers[0])

        # Filter: '/' then the text, Enter applies and returns to the table. (Keys sent
        # in the first instant after start-up can be swallowed by the terminal set-up,
        # so '/' is repeated until the input shows.)
        # Each '/' gets time to open the filter on a busy machine: a second '/' typed
        # into an open filter would become part of the filter text.
        for _ in range(5):
            term.keys("/")
            try:
                term.wait(lambda s: "filter: words" in s, timeout=3.0)
                break
            except AssertionError:
                continue
        term.keys("-l", "r1")
        term.keys("Enter")
        screen = term.wait(lambda s: workers[1] in s and workers[0] not in s)
        assert "1 of 2 workers" in screen

        # Suspend by key; the live worker confirms it and the row shows it applied.
        term.keys("s")
        screen = term.wait(lambda s: "applied" in _row(s, workers[1]))
        assert "suspended" in _row(screen, workers[1])
        term.wait(lambda s: "applied by the worker" in s)  # the toast
        assert (
            server.cli("HGET", f"byai_gateway:registry:worker:admin:{workers[1]}", "lifecycle")
            == "suspended"
        )
        term.keys("Escape")
        term.wait(lambda s: workers[0] in s and workers[1] in s)

        # Hostile strings from Redis are printed literally and do nothing.
        for hostile in ("[bold red]pwn[/]", "[@click=app.quit]\x1b[2J"):
            server.cli("SADD", "byai_gateway:registry:workers", hostile)
        screen = term.wait(lambda s: "[bold red]pwn[/]" in s and "[@click=app.quit]" in s)
        assert "[@click=app.quit]\\x1b[2J" in screen
        assert term.alive()

        # Redis dies under the console: it says so, keeps running, then recovers.
        server.stop()
        term.wait(lambda s: "DISCONNECTED" in s)
        term.keys("2")  # input still works during the outage
        term.wait(lambda s: "replicas/quota" in s)
        term.keys("1")
        server.start()
        screen = term.wait(lambda s: "DISCONNECTED" not in s and "CONNECTED" in s, timeout=30)
        term.wait(lambda s: all(w in s for w in workers), timeout=30)

        term.keys("q")
        deadline = time.monotonic() + 10
        while term.alive() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not term.alive(), "q did not quit the console"
    finally:
        term.close()


def test_demo_starts_and_quits_cleanly() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BYAI_", "REDIS_"))}
    term = Terminal([str(BIN / "byconsole"), "--demo"], env)
    try:
        screen = term.wait(lambda s: "demo-a-r0" in s and "suspended" in s, timeout=30)
        assert "!embed" in screen  # one worker denied for a type
        # The demo's own redis-server: a process under the pane (other tests running
        # at the same time may start servers of their own).
        pane = int(term.tmux("display-message", "-p", "-t", term.session, "#{pane_pid}").stdout)
        servers = _descendants(pane) & _redis_servers()
        assert servers, "the demo runs no redis-server of its own"
        term.keys("q")
        # The stop is bounded by design (FLEET_STOP_BOUND_S); a little slack for a
        # loaded machine's process start-up and tear-down.
        deadline = time.monotonic() + FLEET_STOP_BOUND_S + 5
        last = ""
        while term.alive() and time.monotonic() < deadline:
            last = term.screen() or last
            time.sleep(0.1)
        # The last screen tells a lost key (the console still shown) from a slow stop,
        # and the worker log (named on it) what the stop was waiting for.
        assert not term.alive(), f"q did not end the demo; last screen:\n{last}{_log_tail(last)}"
    finally:
        term.close()
    # The demo's worker log is a file of this run's own, named before the console starts
    # (the line is on the terminal again once the console has closed).
    named = re.search(r"byconsole demo: Redis at \S+; worker log: (\S+\.log)", last)
    assert named is not None, last
    log = Path(named.group(1))
    assert log.is_file() and log.name.startswith("byconsole-demo-")
    log.unlink()
    # The demo's redis-server is gone with it.
    deadline = time.monotonic() + 10
    while servers & _redis_servers() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not servers & _redis_servers()


def _log_tail(screen: str, lines: int = 30) -> str:
    """The end of the demo's worker log, named on ``screen`` ("" when it is not)."""
    match = re.search(r"worker log: (\S+\.log)", screen)
    if match is None:
        return ""
    try:
        text = Path(match.group(1)).read_text(errors="replace")
    except OSError:
        return ""
    return "\nworker log (end):\n" + "\n".join(text.splitlines()[-lines:])


def _descendants(pid: int) -> set[int]:
    """Every process below ``pid``."""
    found: set[int] = set()
    todo = [pid]
    while todo:
        out = subprocess.run(["pgrep", "-P", str(todo.pop())], capture_output=True, text=True)
        children = {int(p) for p in out.stdout.split()} - found
        found |= children
        todo += children
    return found


def _redis_servers() -> set[int]:
    out = subprocess.run(["pgrep", "-x", "redis-server"], capture_output=True, text=True)
    return {int(p) for p in out.stdout.split()}
