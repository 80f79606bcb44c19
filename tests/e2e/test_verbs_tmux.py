"""The console's restart and configuration verbs in a real terminal (tmux) against real
worker processes on a real redis-server (README, "Restart, stop and pinned calls" and
"Type configuration"): a rolling restart of a type served by 2 instances x 2 replicas,
its progress on screen, every replica replaced under a new id, never more than one
replica per instance out of service, tasks flowing throughout; and a configuration set
from the editor, applied by 3 replicas, each replica's report on screen."""

from __future__ import annotations

import asyncio
import json
import shutil
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import redis

from tests.e2e.test_console_tmux import Terminal, press_until, until
from tests.handlers import DONE_LIST
from tests.integration.runtime_helpers import BIN, spawn_worker, stop_process
from tests.redis_server import RedisServer, env_with
from worker_runtime.connection import create_redis
from worker_runtime.keys import Keys
from worker_runtime.producer import Producer
from worker_runtime.settings import RedisSettings

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
]

K = Keys()


class _Feeder(threading.Thread):
    """Submits a 0.3 s task every 50 ms until stopped (``ids``: what it submitted): a
    restarting replica has tasks to finish, so it is out of service long enough to be seen."""

    def __init__(self, url: str, agent_type: str) -> None:
        super().__init__(daemon=True)
        self.url, self.agent_type = url, agent_type
        self.ids: list[str] = []
        self.halt = threading.Event()

    def run(self) -> None:
        asyncio.run(self._feed())

    async def _feed(self) -> None:
        client = create_redis(RedisSettings(url=self.url))
        producer = Producer(client)
        try:
            while not self.halt.is_set():
                self.ids.append(await producer.submit(self.agent_type, {"sleep": 0.3}))
                await asyncio.sleep(0.05)
        finally:
            await client.aclose()


class _Watch(threading.Thread):
    """Samples every 50 ms, per instance, its replicas of a type that are in service
    (a live lease neither draining nor evicted); ``lowest``: the fewest seen."""

    def __init__(self, client: redis.Redis, agent_type: str) -> None:
        super().__init__(daemon=True)
        self.client, self.agent_type = client, agent_type
        self.lowest: dict[str, int] = {}
        self.seen_ids: set[str] = set()
        self.halt = threading.Event()

    def run(self) -> None:
        while not self.halt.is_set():
            ids = sorted(str(w) for w in self.client.smembers(K.workers))
            leases = self.client.mget([K.worker_online(w) for w in ids]) if ids else []
            serving: dict[str, int] = {}
            for raw in leases:
                if raw is None:
                    continue
                lease: dict[str, Any] = json.loads(raw)
                if self.agent_type not in lease.get("agent_types", []):
                    continue
                instance = str(lease.get("instance_id"))
                serving.setdefault(instance, 0)
                if lease.get("lifecycle") in (None, "active"):
                    serving[instance] += 1
                    self.seen_ids.add(str(lease.get("worker_id")))
            for instance, n in serving.items():
                self.lowest[instance] = min(self.lowest.get(instance, n), n)
            time.sleep(0.05)


def test_rolling_restart_of_two_instances_from_the_console(
    server: RedisServer, tmp_path: Path
) -> None:
    client = redis.Redis.from_url(server.url, decode_responses=True)
    procs = [
        spawn_worker(
            server.url, "tests.handlers:record", ["roll"], name, 2, log_path=tmp_path / name
        )
        for name in ("e2e-ra", "e2e-rb")
    ]
    before = {"e2e-ra-r0", "e2e-ra-r1", "e2e-rb-r0", "e2e-rb-r1"}
    feeder = _Feeder(server.url, "roll")
    watch = _Watch(client, "roll")
    term = Terminal([str(BIN / "byconsole"), "--refresh", "0.5"], env_with(server.url))
    try:
        term.wait(lambda s: all(w in s for w in before) and "CONNECTED" in s, timeout=30)
        feeder.start()
        until(lambda: client.llen(DONE_LIST) >= 5)
        watch.start()
        press_until(term, "3", lambda s: "enter: workers of the type" in s)
        term.keys("t")
        term.wait(lambda s: "Restart roll 4 targets?" in s)
        term.keys("-l", "rolling")
        term.wait(lambda s: "rolling" in s)
        time.sleep(0.5)  # at a person's pace: each key lands after the last one's effect
        term.keys("Enter")  # reason -> the confirm button
        time.sleep(0.5)
        term.keys("Enter")
        done_at_start = client.llen(DONE_LIST)
        progress = term.wait(lambda s: "replica 1/4" in s and "restarting" in s)
        assert "waiting for its replacement online" in progress
        screen = term.wait(lambda s: "4/4 replaced" in s and " done" in s, timeout=90)
        done_during = client.llen(DONE_LIST) - done_at_start
        watch.halt.set()
        watch.join(5)
        feeder.halt.set()
        feeder.join(5)

        # Every replica replaced by a new id, shown old -> new on screen.
        replaced = {
            line.split(" -> ")[0].split()[-1]: line.split(" -> ")[1].split(":")[0]
            for line in screen.splitlines()
            if " -> " in line and "replaced" in line
        }
        assert set(replaced) == before, screen
        assert before.isdisjoint(replaced.values())
        assert len(set(replaced.values())) == 4
        # Never more than max-unavailable (1) of an instance's 2 replicas out of service,
        # and the samples did see an instance at 1 (restarts happened under watch).
        assert set(watch.lowest) == {"e2e-ra", "e2e-rb"}, watch.lowest
        assert min(watch.lowest.values()) == 1 and all(n >= 1 for n in watch.lowest.values())
        # Tasks kept flowing while it rolled, and every one submitted ran.
        assert done_during > 10, done_during
        until(lambda: set(feeder.ids) <= set(client.lrange(DONE_LIST, 0, -1)), timeout=20)
        entries: list[Any] = client.xrange(K.audit_stream) or []
        audit = [f for _, f in entries]
        assert sorted(a["target"] for a in audit if a["action"] == "restart") == sorted(before)
        term.keys("q")
        until(lambda: not term.alive(), timeout=10)
    finally:
        feeder.halt.set()
        watch.halt.set()
        term.close()
        for proc in procs:
            stop_process(proc)
        client.close()


def test_config_set_from_the_editor_is_applied_by_three_replicas(
    server: RedisServer, tmp_path: Path
) -> None:
    client = redis.Redis.from_url(server.url, decode_responses=True)
    ids = ["e2e-c-r0", "e2e-c-r1", "e2e-c-r2"]
    proc = spawn_worker(
        server.url, "tests.config_handlers:handle", ["cfg3"], "e2e-c", 3, log_path=tmp_path / "w"
    )
    term = Terminal([str(BIN / "byconsole"), "--refresh", "0.5"], env_with(server.url))
    try:
        term.wait(lambda s: all(w in s for w in ids) and "CONNECTED" in s, timeout=30)
        press_until(term, "3", lambda s: "enter: workers of the type" in s)
        term.keys("c")
        term.wait(lambda s: "Configuration of cfg3" in s and "never set (version 0)" in s)
        term.keys("C-k")  # the editor holds {}: clear the line
        time.sleep(0.3)  # at a person's pace
        term.keys("-l", '{"greeting": "hello", "type": 1}')
        term.wait(lambda s: "'type' is reserved" in s)
        term.keys("C-u")
        time.sleep(0.3)
        term.keys("-l", '{"greeting": "hello"}')
        term.wait(lambda s: "valid JSON object, 1 key(s)" in s)
        term.keys("C-s")
        screen = term.wait(lambda s: "version 1 saved · 3/3 replica(s) reported" in s, timeout=20)
        for wid in ids:
            assert f"{wid}: applied" in screen
        stored = json.loads(client.get(K.type_config("cfg3")) or "{}")
        assert (stored["version"], stored["config"]) == (1, {"greeting": "hello"})
        entries: list[Any] = client.xrange(K.audit_stream) or []
        audit = [f for _, f in entries]
        assert [(a["action"], a["details"]) for a in audit] == [
            ("config-set", 'v1: +greeting="hello"')
        ]

        # A version every replica's hook refuses: each one's failure text on screen.
        term.keys("C-u")
        time.sleep(0.3)
        term.keys("-l", '{"fail": true, "greeting": "hello"}')
        term.wait(lambda s: "+fail=true" in s)
        term.keys("C-s")
        screen = term.wait(lambda s: "version 2 saved · 3/3 replica(s) reported" in s, timeout=20)
        for wid in ids:
            assert f"{wid}: failed (ValueError: asked to fail)" in screen
        term.keys("Escape")
        term.wait(lambda s: "Configuration of cfg3" not in s)
        term.keys("q")
        until(lambda: not term.alive(), timeout=10)
    finally:
        term.close()
        stop_process(proc)
        client.close()
