"""An operator in a real terminal (tmux): requeue a dead letter from the Dead view and watch
a live worker run it; drill down from a type to its workers and back; the demo honours
``--read-only`` and prints its Redis URL.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import redis

from tests.e2e.test_console_tmux import Terminal, press_until, until
from tests.integration.runtime_helpers import BIN, spawn_worker, stop_process
from tests.redis_server import RedisServer, env_with
from worker_runtime.keys import CONSUMER_GROUP, Keys
from worker_runtime.models import now_ms

K = Keys()


def test_requeue_a_dead_letter_and_drill_down(server: RedisServer, tmp_path: Path) -> None:
    client = redis.Redis.from_url(server.url, decode_responses=True)
    proc = spawn_worker(
        server.url,
        "tests.handlers:noop",
        ["chat", "embed"],
        "e2e-d",
        replicas=2,
        log_path=tmp_path / "worker.log",
    )
    dead = K.dead_letter_stream("chat")
    for i in range(2):
        task = {"task_id": f"dead-{i}", "agent_type": "chat", "payload": {"i": i}}
        client.xadd(
            dead,
            {
                "kind": "task",
                "data": json.dumps(task),
                "error": f"ValueError: bad record {i}",
                "worker_id": "e2e-d-r0",
                "buried_at": str(now_ms()),
            },
        )
    term = Terminal([str(BIN / "byconsole"), "--refresh", "0.5"], env_with(server.url))
    try:
        term.wait(lambda s: "e2e-d-r1" in s and "CONNECTED" in s)
        screen = press_until(term, "6", lambda s: "ValueError: bad record 1" in s)
        assert "2 dead letters (chat 2)" in screen
        term.keys("R")
        term.wait(lambda s: "this dead letter" in s)
        term.keys("Enter")  # this one (the newest: dead-1)
        term.wait(lambda s: "Requeue target?" in s)
        term.keys("-l", "replayed after fix")
        term.wait(lambda s: "replayed after fix" in s)
        time.sleep(0.5)  # at a person's pace: each key lands after the last one's effect
        term.keys("Enter")  # reason -> the Requeue button
        time.sleep(0.5)
        term.keys("Enter")
        term.wait(lambda s: "1 requeued" in s)
        term.wait(lambda s: "1 dead letters (chat 1)" in s)
        assert client.xlen(dead) == 1
        audit_entries: list[Any] = client.xrange(K.audit_stream) or []
        audit = [f for _, f in audit_entries]
        assert [(a["action"], a["reason"]) for a in audit] == [
            ("dead-requeue", "replayed after fix")
        ]
        # The live worker runs the requeued task: delivered and acknowledged.
        entries: list[Any] = client.xrange(K.type_stream("chat")) or []
        assert [json.loads(f["data"])["task_id"] for _, f in entries] == ["dead-1"]

        def done() -> bool:
            groups: list[Any] = client.xinfo_groups(K.type_stream("chat"))
            group = next(g for g in groups if g["name"] == CONSUMER_GROUP)
            return int(group["lag"] or 0) == 0 and int(group["pending"]) == 0

        until(done)

        # Drill-down: Types, the embed row, Enter -> its workers; Escape -> back.
        press_until(term, "3", lambda s: "enter: workers of the type" in s)
        term.keys("Down", "Enter")
        screen = term.wait(lambda s: "workers of type embed" in s)
        assert "e2e-d-r0" in screen and "e2e-d-r1" in screen
        term.keys("Escape")
        screen = term.wait(lambda s: "enter: workers of the type" in s)
        assert "workers of type embed" not in screen
        term.keys("q")
        until(lambda: not term.alive(), timeout=10)
    finally:
        term.close()
        stop_process(proc)
        client.close()


def test_demo_read_only_prints_its_url(tmp_path: Path) -> None:
    term = Terminal(
        [str(BIN / "byconsole"), "--demo", "--read-only", "--refresh", "0.5", "; sleep 90"],
        {},
    )
    try:
        term.wait(lambda s: "demo-a" in s and "CONNECTED" in s, timeout=40)
        screen = press_until(term, "s", lambda s: "read-only: suspend is disabled" in s)
        assert "demo Redis: redis://127.0.0.1:" in screen or "read-only" in screen
        term.keys("q")
        # Each instance's stop is bounded by its grace (2 s) + STOP_BOUND_S.
        screen = term.wait(lambda s: "demo stopped; Redis was redis://127.0.0.1:" in s, 60)
        assert "byconsole demo: Redis at redis://127.0.0.1:" in screen
    finally:
        term.close()
