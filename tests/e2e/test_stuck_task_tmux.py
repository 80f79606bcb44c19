"""An operator in a real terminal (tmux) goes from an alert to the stuck task and moves it
to the dead letters.

The stuck task is made the way it happens in production: a real worker process takes a
long task and is SIGKILLed while it runs, so the entry stays pending, owned by a consumer
that no longer holds a lease, and nobody else serves the type. The console is started on
a context whose ``OLDEST_TASK_AGE`` threshold is two seconds.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import redis

from tests.e2e.test_console_tmux import Terminal, press_until, until
from tests.handlers import STARTED_LIST
from tests.integration.runtime_helpers import BIN, spawn_worker, stop_process
from tests.redis_server import RedisServer, env_with
from worker_runtime.keys import CONSUMER_GROUP, Keys

K = Keys()


def test_from_an_alert_to_the_stuck_task_and_into_the_dead_letters(
    server: RedisServer, tmp_path: Path
) -> None:
    client: Any = redis.Redis.from_url(server.url, decode_responses=True)
    # No reclaim during the test: the entry stays stuck with its dead owner.
    proc = spawn_worker(
        server.url,
        "tests.handlers:record",
        ["report"],
        "e2e-stuck",
        extra_env={"BYAI_CLAIM_IDLE_MS": "600000"},
        log_path=tmp_path / "worker.log",
    )
    try:
        submit = [str(BIN / "worker-runtime"), "submit", "report", json.dumps({"sleep": 120})]
        done = subprocess.run(submit, env=env_with(server.url), capture_output=True, timeout=30)
        assert done.returncode == 0, done.stderr
        until(lambda: client.llen(STARTED_LIST) == 1)
        task_id = client.lindex(STARTED_LIST, 0)
        assert task_id
    finally:
        stop_process(proc, signal.SIGKILL)
    stream = K.type_stream("report")
    pending = client.xpending(stream, CONSUMER_GROUP)
    assert pending["pending"] == 1
    entry_id = pending["min"]

    config = tmp_path / "config.toml"
    config.write_text(
        f'[contexts.e2e]\nurl = "{server.url}"\n\n'
        "[contexts.e2e.alerts]\noldest_task_age_seconds = 2\n"
    )
    env = env_with(server.url)
    env.pop("BYAI_REDIS_URL", None)
    command = [str(BIN / "byconsole"), "--config", str(config), "--context", "e2e"]
    term = Terminal([*command, "--refresh", "0.5"], env)
    try:
        term.wait(lambda s: "CONNECTED" in s and "alert" in s, timeout=30)
        # The Health view names the stuck type; the cursor goes to its age alert.
        screen = press_until(term, "7", lambda s: "OLDEST_TASK_AGE" in s)
        assert "report" in screen
        for _ in range(10):
            if "enter: the pending entries of report" in term.screen():
                break
            term.keys("Down")
            time.sleep(0.3)
        screen = term.wait(lambda s: "enter: the pending entries of report" in s)
        # Enter: the type's pending entries, the stuck one with its dead owner.
        screen = press_until(term, "Enter", lambda s: "pending entries of report" in s)
        screen = term.wait(lambda s: "(no lease)" in s and task_id[:20] in s)
        # D: dead-letter it, with a reason typed straight into the dialog.
        term.keys("D")
        term.wait(lambda s: "reason" in s.lower() and "Dead-letter" in s)
        term.keys("worker killed mid-task")
        term.wait(lambda s: "worker killed mid-task" in s)
        # Enter in the reason goes to the Dead-letter button, the next presses it.
        term.keys("Enter")
        time.sleep(0.3)
        term.keys("Enter")
        until(lambda: client.xlen(K.dead_letter_stream("report")) == 1)
        screen = term.wait(lambda s: "nothing pending" in s)
        dead = client.xrange(K.dead_letter_stream("report"))
        assert len(dead) == 1
        assert dead[0][1].get("reason") == "worker killed mid-task"
        assert client.xpending(stream, CONSUMER_GROUP)["pending"] == 0
        audit = client.xrevrange(K.audit_stream, count=1)
        assert audit and audit[0][1].get("action") == "dead-letter"
        assert entry_id in json.dumps(audit[0][1])
        assert dead[0][1].get("original_id") == entry_id
    finally:
        term.close()
