"""Actions that do exactly what the screen said, in a real terminal (tmux).

* Purge-all racing new dead letters: the operator opens "purge all N" with N shown, M
  more die while the dialog is open; confirmed, exactly N are deleted, the M remain, and
  the screen says so.
* Resume of an evicted replica on an instance without a scale target: its instance starts
  it again (a fresh lease, online), back to its ``--replicas`` count.

A real redis-server, real ``worker-runtime`` and ``byconsole`` processes.
"""

from __future__ import annotations

import json
import re
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
import redis

from tests.e2e.test_console_tmux import Terminal, press_until, until
from tests.integration.runtime_helpers import BIN, spawn_worker, stop_process
from tests.redis_server import RedisServer, env_with
from worker_runtime.keys import Keys
from worker_runtime.models import now_ms

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
]

K = Keys()


def _flat(screen: str) -> str:
    """The screen as one line: a toast wraps its text over several rows of its box."""
    return re.sub(r"[\s\u2500-\u259f]+", " ", screen)  # box drawing and block elements


def _toasts(screen: str) -> str:
    """The toasts' text, one line: what is right of each toast row's left bar."""
    return " ".join(line.rsplit("▌", 1)[1].strip() for line in screen.splitlines() if "▌" in line)


def _bury(client: Any, n: int, start: int) -> list[str]:
    """``n`` dead letters of ``report``, as the runtime writes them."""
    ids = []
    for i in range(start, start + n):
        task = {"task_id": f"t{i}", "agent_type": "report", "payload": {"n": i}}
        fields = {
            "kind": "task",
            "data": json.dumps(task),
            "error": f"ValueError: bad input {i}",
            "worker_id": "e2e-w-r0",
            "buried_at": str(now_ms()),
        }
        ids.append(str(client.xadd(K.dead_letter_stream("report"), fields)))
    return ids


def _confirm(term: Terminal) -> None:
    """Enter in the reason goes to the confirm button, the next Enter presses it: at a
    person's pace, until the dialog has closed (a key can land before the focus moved)."""
    for _ in range(4):
        term.keys("Enter")
        try:
            term.wait(lambda s: "esc: cancel" not in s, timeout=1.0)
            return
        except AssertionError:
            continue
    raise AssertionError(f"the dialog did not close; screen:\n{term.screen()}")


def _row(screen: str, worker_id: str) -> str:
    return next((line for line in screen.splitlines() if worker_id in line), "")


def _console(server: RedisServer) -> Terminal:
    return Terminal([str(BIN / "byconsole"), "--refresh", "0.5"], env_with(server.url))


def test_purge_all_deletes_the_letters_shown_not_those_that_died_meanwhile(
    server: RedisServer,
) -> None:
    client: Any = redis.Redis.from_url(server.url, decode_responses=True)
    client.sadd(K.agent_types, "report")
    _bury(client, 4, start=0)
    term = _console(server)
    try:
        term.wait(lambda s: "CONNECTED" in s, timeout=30)
        press_until(term, "6", lambda s: "4 dead letters (report 4)" in s)
        term.keys("P")
        term.wait(lambda s: "all 4 dead letters of report" in s)
        term.keys("Down")
        time.sleep(0.3)
        term.keys("Enter")
        term.wait(lambda s: "Written to the audit log" in _flat(s) and "reason" in s.lower())
        # Two more tasks die while the operator reads the dialog and types the reason.
        late = _bury(client, 2, start=4)
        term.keys("-l", "noise")
        term.wait(lambda s: "noise" in s)
        _confirm(term)
        until(lambda: client.xlen(K.dead_letter_stream("report")) == 2)
        assert [eid for eid, _ in client.xrange(K.dead_letter_stream("report"))] == late
        screen = term.wait(
            lambda s: (
                "4 dead letter(s) of report purged" in _toasts(s)
                and "2 arrived after the dialog opened, left untouched" in _toasts(s)
            )
        )
        assert "2 left" in _toasts(screen)
        term.wait(lambda s: "2 dead letters (report 2)" in s)
        audit = client.xrevrange(K.audit_stream, count=1)
        assert audit[0][1]["action"] == "dead-purge" and "count=4" in audit[0][1]["details"]
    finally:
        term.close()


def test_resume_of_an_evicted_replica_brings_it_back(server: RedisServer, tmp_path: Path) -> None:
    client: Any = redis.Redis.from_url(server.url, decode_responses=True)
    log = tmp_path / "worker.log"
    proc = spawn_worker(
        server.url, "tests.handlers:noop", ["report"], "e2e-w", replicas=2, log_path=log
    )
    term = _console(server)
    try:
        until(lambda: bool(client.exists(K.worker_online("e2e-w-r1"))), timeout=30)
        term.wait(lambda s: "e2e-w-r0" in s and "e2e-w-r1" in s and "CONNECTED" in s, timeout=30)
        # Evict r1 with the cursor on it (the rows are sorted by id: r1 is second).
        press_until(term, "/", lambda s: "filter: words" in s)
        term.keys("-l", "r1")
        term.keys("Enter")
        term.wait(lambda s: "1 of 2 workers" in s)
        term.keys("e")
        term.wait(lambda s: "esc: cancel" in s and "Evict" in s)  # the dialog
        term.keys("-l", "bad disk")
        term.wait(lambda s: "bad disk" in s)
        _confirm(term)
        until(lambda: not client.exists(K.worker_online("e2e-w-r1")), timeout=20)
        term.wait(lambda s: "offline" in _row(s, "e2e-w-r1"))
        time.sleep(1.0)  # beats pass: an eviction is not undone by itself
        assert not client.exists(K.worker_online("e2e-w-r1"))
        # Resume it: the instance starts it again, online under its id.
        term.keys("r")
        until(lambda: bool(client.exists(K.worker_online("e2e-w-r1"))), timeout=20)
        row = _row(term.wait(lambda s: " online" in _row(s, "e2e-w-r1")), "e2e-w-r1")
        assert "active" in row
        until(
            lambda: (
                len(
                    json.loads(client.get(K.instance_online("e2e-w")) or "{}")
                    .get("replicas", {})
                    .get("report", [])
                )
                == 2
            ),
            timeout=10,
        )
        assert proc.poll() is None
    finally:
        term.close()
        stop_process(proc)
    assert "resumed by an operator; started again" in log.read_text()
