"""Push latency between the two runtimes: command written -> command applied.

    .venv/bin/python -m bench.interop_latency [--commands 20]

A private ``redis-server``, one real by-framework worker (``.venv-byf``, stock runner)
and one ``worker-runtime run`` worker, both with a 5 s heartbeat so only the push
channel can apply a command within that time. Suspend and resume alternate, one at a
time. The clock starts at the command entry's Redis timestamp (its stream id) and
stops when the command is seen applied (polled every 1 ms):

* to the by-framework worker: its control consumer group (``agent_engines``) has
  read and acknowledged the entry, which only its push handler does;
* to our worker: its lease reports ``admin_applied_at`` >= the admin hash's
  ``updated_at``.

Senders: our ``WorkerManager`` (in this process) and by-framework's ``WorkerManager``
(``tests/interop/byf_admin.py`` in its venv, one process per command).
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from urllib.parse import urlsplit

from bench.common import machine, start_redis, summary
from tests.interop.byf_env import ensure_venv
from tests.interop.control import byf_applied, our_applied, watch_push
from tests.interop.harness import Fleet, wait_for
from worker_runtime.admin import WorkerManager
from worker_runtime.connection import create_redis
from worker_runtime.models import AdminState
from worker_runtime.settings import RedisSettings

BYF = "byf-bench"
OURS = "ours-bench-r0"


def _bound(
    send: Callable[[str, str], Awaitable[None]], receiver: str
) -> Callable[[str], Awaitable[None]]:
    """``send`` with its worker id fixed (one sender, one receiver per measurement)."""

    def call(action: str) -> Awaitable[None]:
        return send(receiver, action)

    return call


async def _measure(
    fleet: Fleet, worker_id: str, send: Callable[[str], Awaitable[None]], n: int
) -> list[float]:
    stream = fleet.keys.worker_stream(worker_id)
    redis = fleet.redis

    async def applied(entry_id: str) -> bool:
        if worker_id == BYF:
            return await byf_applied(redis, stream, entry_id)
        admin = AdminState.parse(await redis.hgetall(fleet.keys.worker_admin(worker_id)))
        stamp = admin.updated_at or 0
        return stamp > 0 and await our_applied(redis, fleet.keys, worker_id, stamp)

    figures: list[float] = []
    for i in range(n):
        action = "suspend" if i % 2 == 0 else "resume"
        watcher = asyncio.create_task(watch_push(redis, stream, applied))
        await asyncio.sleep(0.02)
        await send(action)
        figures.append((await watcher)[2])
    return figures


async def main(n: int) -> None:
    """Start both workers, measure the four sender/receiver pairs, print the figures."""
    python = ensure_venv()
    if python is None:
        raise SystemExit("by-framework needs Python >= 3.12: none found")
    server = start_redis()
    logs = Path(tempfile.mkdtemp(prefix="interop-bench-"))
    url = server.url
    parts = urlsplit(url)
    client = create_redis(RedisSettings(url=url))
    slow = {"BYF_HEARTBEAT": "5", "BYF_LEASE_TTL": "30"}
    fleet = Fleet(
        "single",
        client,
        RedisSettings(url=url).keys,
        python,
        {"REDIS_HOST": str(parts.hostname), "REDIS_PORT": str(parts.port)},
        {"BYAI_REDIS_URL": url},
        logs,
    )
    try:
        byf = fleet.start_byf_worker(BYF, ["echo"], **slow)
        fleet.start_our_worker(
            "ours-bench", ["echo"], env={"BYAI_HEARTBEAT_INTERVAL": "5", "BYAI_LEASE_TTL": "30"}
        )
        wait_for(lambda: "Heartbeat started" in byf.log(), 60)
        while not await client.exists(fleet.keys.worker_online(OURS)):
            await asyncio.sleep(0.05)
        ours = WorkerManager(client, fleet.keys, operator="bench")

        async def ours_send(worker_id: str, action: str) -> None:
            if action == "suspend":
                await ours.suspend_worker(worker_id, "bench")
            else:
                await ours.resume_worker(worker_id)

        async def byf_send(worker_id: str, action: str) -> None:
            await asyncio.to_thread(fleet.byf_admin, action, worker_id)

        print(f"# push latency between runtimes ({machine()}), entry -> applied")
        for sender, send in (("worker_runtime admin", ours_send), ("by-framework admin", byf_send)):
            for receiver in (BYF, OURS):
                figures = await _measure(fleet, receiver, _bound(send, receiver), n)
                kind = "by-framework" if receiver == BYF else "worker_runtime"
                print(f"{sender} -> {kind} worker: {summary(figures)}")
        errors = fleet.error_lines()
        print(f"ERROR lines in any log: {sum(len(v) for v in errors.values())}")
    finally:
        fleet.stop_all()
        await client.aclose()
        server.cleanup()
        shutil.rmtree(logs, ignore_errors=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commands", type=int, default=20, help="commands per pair")
    asyncio.run(main(parser.parse_args().commands))
