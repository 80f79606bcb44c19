"""Keys sent together by a real terminal (tmux ``send-keys`` writes them at once) reach
the console's prompts and filter whole and in order: ``BSpace 4 7`` in the scale prompt,
Escape then ``/`` and a new filter (a real redis-server and a live worker process)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.test_console_tmux import Terminal, press_until
from tests.integration.runtime_helpers import BIN, spawn_worker, stop_process
from tests.redis_server import RedisServer, env_with

pytestmark = pytest.mark.slow


@pytest.fixture
def worker(server: RedisServer, tmp_path: Path) -> Iterator[str]:
    proc = spawn_worker(
        server.url,
        "tests.handlers:noop",
        ["chat"],
        "keys-a",
        replicas=1,
        log_path=tmp_path / "worker.log",
    )
    yield "keys-a-r0"
    stop_process(proc)


def test_keys_sent_at_once_reach_the_prompt_and_the_filter(
    server: RedisServer, worker: str
) -> None:
    term = Terminal([str(BIN / "byconsole"), "--refresh", "0.5"], env_with(server.url))
    try:
        term.wait(lambda s: worker in s and "CONNECTED" in s)
        press_until(term, "/", lambda s: "filter: words" in s)
        term.keys("-l", "nomatch")
        term.wait(lambda s: "0 of 1 workers" in s)
        # Escape, / and the new filter in one write.
        term.keys("Escape", "/", *"keys-a")
        # The count and the status line's filter are painted apart: wait for both.
        term.wait(lambda s: "1 of 1 workers" in s and "filter “keys-a”" in s)
        term.keys("Enter")  # keep it; back on the table

        term.keys("3")
        term.wait(lambda s: "depth" in s)
        term.keys("S")
        term.wait(lambda s: "Scale chat" in s)
        term.keys("BSpace", "4", "7")  # one write: the current count replaced by 47
        screen = term.wait(lambda s: "47" in s)
        assert "replicas (0-" not in screen  # the input is not empty
        term.keys("Escape")
        term.wait(lambda s: "Scale chat" not in s)
        term.keys("q")
        deadline = time.monotonic() + 10
        while term.alive() and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        term.close()
