"""``byconsole --demo``: a small live fleet on a throwaway Redis, and the console on it.

What it starts, all in this process except the Redis server:

* a temporary ``redis-server`` on a free port (fakeredis's TCP server when no
  ``redis-server`` is installed);
* two instances of real ``worker_runtime`` workers: ``demo-a`` (chat + embed, role
  ``all``) and ``demo-b`` (chat + report, role ``consumer``), two replicas each;
* a producer submitting chat, embed and report tasks at an uneven rate (and now and
  then a report that always fails, so the Dead view has something to show); it keeps
  going through a Redis outage;
* one worker suspended and one denied for a type, so every colour shows up;
* a backlog nobody serves: tasks queued on ``ingest`` as another producer would
  write them, with no worker and nothing naming the type but its stream.

Quitting the console (``q``) stops the producer, the workers (gracefully) and the
server; nothing is left running.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
import shutil
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from worker_runtime.admin import WorkerManager
from worker_runtime.connection import LOOP_ERRORS, create_redis
from worker_runtime.embedded import STOP_WAIT_S, RedisServer, free_port
from worker_runtime.instance import STOP_BOUND_S, WorkerInstance
from worker_runtime.messages import encode_task
from worker_runtime.models import Role, Task
from worker_runtime.producer import Producer
from worker_runtime.settings import RedisSettings, WorkerSettings

TYPES = ("chat", "embed", "report")

ORPHAN_TYPE = "ingest"
"""The demo's backlog nobody serves (found from its stream: an unregistered type)."""

ORPHAN_TASKS = 40

GRACE_S = 2.0
"""The demo workers' grace period: in-flight tasks last at most 0.6 s."""

FLEET_STOP_BOUND_S = GRACE_S + STOP_BOUND_S + 2 * STOP_WAIT_S
"""The longest quitting the demo may take: the workers' bounded stops side by side,
then Redis terminated (killed if it lingers)."""


async def demo_handler(task: Task) -> dict[str, Any]:
    """Pretend to work for a while; fail now and then."""
    await asyncio.sleep(random.uniform(0.05, 0.6))
    if task.payload.get("poison"):
        # Fails every attempt: ends in the type's dead letters (the Dead view, 6).
        raise ValueError(f"demo: cannot parse record {task.payload.get('n')}")
    if random.random() < 0.03:
        raise RuntimeError("demo failure")
    return {"ok": True, "type": task.agent_type}


class _FakeServer:
    """fakeredis's TCP server in a thread, for machines without ``redis-server``."""

    def __init__(self) -> None:
        from fakeredis import TcpFakeServer

        self.port = free_port()
        self.server = TcpFakeServer(("127.0.0.1", self.port))
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> _FakeServer:
        self.thread.start()
        return self

    def cleanup(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@dataclass
class DemoFleet:
    """The demo's Redis, workers and producer; an async context manager.

    Attributes:
        heartbeat: seconds between worker heartbeats (short, so changes show fast).
        log_path: where the workers' log goes (never the terminal the console owns); by
            default a file of its own per run (two demos on one machine never share one),
            made when the fleet starts.
    """

    heartbeat: float = 1.0
    log_path: Path | None = None
    settings: RedisSettings | None = None
    instances: list[WorkerInstance] = field(default_factory=list)
    suspended: str | None = None
    denied: tuple[str, str] | None = None
    submitted: int = 0
    """Producer ticks that went through (traffic resumes after an outage)."""
    produce_errors: int = 0
    """Consecutive ticks that failed (Redis down)."""
    _server: RedisServer | _FakeServer | None = None
    _producer: asyncio.Task[None] | None = None
    _log_handler: logging.Handler | None = None

    async def __aenter__(self) -> DemoFleet:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    def _worker_settings(self, instance_id: str, role: Role) -> WorkerSettings:
        """One demo instance's settings: quick beats so the console shows changes soon."""
        return WorkerSettings(
            instance_id=instance_id,
            role=role,
            heartbeat_interval=self.heartbeat,
            lease_ttl=self.heartbeat * 4,
            metrics_interval=2.0,
            block_ms=500,
            grace_period=GRACE_S,
            app_version="demo-1.0",
        )

    async def start(self) -> None:
        """Start Redis, the two instances, the producer, then set the demo states."""
        self._quiet_logs()
        server: RedisServer | _FakeServer
        server = RedisServer().start() if shutil.which("redis-server") else _FakeServer().start()
        self._server = server
        self.settings = RedisSettings(url=server.url)
        layout = (
            ("demo-a", ("chat", "embed"), Role.ALL),
            ("demo-b", ("chat", "report"), Role.CONSUMER),
        )
        for instance_id, types, role in layout:
            instance = WorkerInstance(
                demo_handler,
                types,
                replicas=2,
                settings=self._worker_settings(instance_id, role),
                redis_settings=self.settings,
            )
            await instance.start()
            self.instances.append(instance)
        client = create_redis(self.settings)
        manager = WorkerManager(client, self.settings.keys, operator="demo@byconsole")
        a_workers, b_workers = (sorted(i.worker_ids) for i in self.instances)
        if b_workers:
            self.suspended = b_workers[-1]
            await manager.suspend_worker(self.suspended, reason="demo: suspended for a look")
        if a_workers:
            self.denied = ("embed", a_workers[-1])
            await manager.deny_worker_for_type("embed", a_workers[-1], reason="demo: denied")
        # Written as by-framework's producer writes them: no types index entry.
        orphans = client.pipeline(transaction=False)
        for n in range(ORPHAN_TASKS):
            task = Task(task_id=f"ingest-{n:03d}", agent_type=ORPHAN_TYPE, payload={"n": n})
            orphans.xadd(self.settings.keys.type_stream(ORPHAN_TYPE), encode_task(task))  # type: ignore[arg-type]
        await orphans.execute()
        self._producer = asyncio.create_task(self._produce(Producer(client, self.settings.keys)))

    async def _produce(self, producer: Producer) -> None:
        """Uneven traffic: bursts of chat, steady embed, occasional reports."""
        tick = 0
        self.produce_errors = 0
        try:
            while True:
                tick += 1
                burst = 6 if tick % 20 < 5 else 2
                try:
                    for _ in range(random.randint(1, burst)):
                        await producer.submit("chat", {"n": tick})
                    await producer.submit("embed", {"n": tick})
                    if tick % 4 == 0:
                        await producer.submit("report", {"n": tick})
                    if tick % 24 == 1:
                        await producer.submit("report", {"n": tick, "poison": True})
                except LOOP_ERRORS:
                    # Redis is down or restarting: traffic resumes once it is back
                    # (a demo whose traffic stops after one outage shows nothing).
                    self.produce_errors += 1
                    await asyncio.sleep(min(2.0, 0.25 * self.produce_errors))
                    continue
                self.produce_errors = 0
                self.submitted += 1
                await asyncio.sleep(0.25)
        finally:
            with contextlib.suppress(Exception):
                await producer.redis.aclose()

    async def stop(self) -> None:
        """Stop the producer, the workers (gracefully) and Redis."""
        if self._producer is not None:
            self._producer.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._producer
            self._producer = None
        # Side by side: each stop is bounded (grace + STOP_BOUND_S); one after the other
        # the operator would wait for the sum.
        await asyncio.gather(
            *(instance.stop(grace=GRACE_S) for instance in self.instances), return_exceptions=True
        )
        self.instances.clear()
        if self._server is not None:
            self._server.cleanup()
            self._server = None
        if self._log_handler is not None:
            logging.getLogger("worker_runtime").removeHandler(self._log_handler)
            self._log_handler.close()
            self._log_handler = None

    def _quiet_logs(self) -> None:
        # The console owns the terminal: worker logs go to a file.
        if self.log_path is None:
            fd, name = tempfile.mkstemp(prefix="byconsole-demo-", suffix=".log")
            os.close(fd)
            self.log_path = Path(name)
        handler = logging.FileHandler(self.log_path)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
        runtime_log = logging.getLogger("worker_runtime")
        runtime_log.addHandler(handler)
        runtime_log.setLevel(logging.INFO)
        runtime_log.propagate = False
        self._log_handler = handler


async def _run(*, read_only: bool = False, refresh: float = 1.0) -> int:
    from byconsole.tui.app import ConsoleApp
    from byconsole.tui.backend import RedisBackend

    async with DemoFleet() as fleet:
        assert fleet.settings is not None
        url = fleet.settings.url
        # Printed before the console takes the screen (and shown in a toast): a second
        # terminal can attach a worker or a CLI to this Redis.
        print(f"byconsole demo: Redis at {url}; worker log: {fleet.log_path}", flush=True)
        app = ConsoleApp(
            RedisBackend(fleet.settings),
            refresh=refresh,
            read_only=read_only,
            notice=f"demo Redis: {url} (byconsole --redis-url {url} … in another terminal)",
        )
        await app.run_async()
        # The fleet's graceful stop takes a few seconds: said, so a quiet terminal
        # after the console closes is not taken for a hang.
        bound = f"at most {FLEET_STOP_BOUND_S:.0f} s"
        print(f"stopping the demo's workers and Redis ({bound})…", flush=True)
    print(f"demo stopped; Redis was {url}; worker log: {fleet.log_path}")
    return app.return_code or 0


def run_demo(*, read_only: bool = False, refresh: float = 1.0) -> int:
    """Run the demo until the operator quits; returns the exit code.

    Args:
        read_only: open the console without action keys (``--read-only``).
        refresh: the console's refresh interval (``--refresh``).
    """
    try:
        return asyncio.run(_run(read_only=read_only, refresh=refresh))
    except KeyboardInterrupt:
        return 130
    except RuntimeError as exc:  # e.g. no redis-server and no fakeredis
        print(f"byconsole --demo: {exc}")
        return 2
