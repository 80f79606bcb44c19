"""Fixtures for console tests: hand-written workers in a real Redis, an app factory."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from redis.asyncio import Redis
from textual.app import App
from textual.pilot import Pilot

from byconsole.tui.app import ConsoleApp
from byconsole.tui.backend import RedisBackend
from tests.integration.runtime_helpers import eventually
from worker_runtime.keys import Keys
from worker_runtime.models import Lease, now_ms
from worker_runtime.settings import RedisSettings

KEYS = Keys()

WORKERS: dict[str, list[str]] = {
    "w-1": ["chat"],
    "w-2": ["chat", "embed"],
    "w-3": ["embed"],
}
"""The hand-written fleet: worker id -> agent types."""


async def write_worker(
    redis: Redis, worker_id: str, types: list[str], instance: str = "inst-a", **extra: Any
) -> None:
    """Register a worker the way the runtime does, with a lease that stays fresh for
    a minute (no live process behind it)."""
    fields: dict[str, Any] = {
        "worker_id": worker_id,
        "instance_id": instance,
        "hostname": "host",
        "ip_address": "10.1.1.1",
        "pid": 1,
        "role": "all",
        "agent_types": types,
        "lifecycle": "active",
        "status": "idle",
        "concurrency": 4,
        "active_jobs": 0,
        "last_seen": now_ms(),
        "started_at": now_ms(),
        "heartbeat_interval": 60.0,
        "lease_ttl": 120.0,
    }
    lease = Lease(**{**fields, **extra})
    pipe = redis.pipeline(transaction=False)
    pipe.sadd(KEYS.workers, worker_id)
    pipe.set(KEYS.worker_online(worker_id), lease.dump(), ex=120)
    pipe.sadd(KEYS.worker_agent_types(worker_id), *types)
    for t in types:
        pipe.sadd(KEYS.agent_types, t)
        pipe.sadd(KEYS.type_workers(t), worker_id)
    await pipe.execute()


@pytest.fixture
async def fleet(redis: Redis) -> dict[str, list[str]]:
    """Three hand-written workers (see :data:`WORKERS`)."""
    for worker_id, types in WORKERS.items():
        await write_worker(redis, worker_id, types)
    return WORKERS


AppFactory = Callable[..., ConsoleApp]


@pytest.fixture
def make_app(redis_url: str) -> AppFactory:
    """Build a console on the test Redis, refreshing fast."""

    def build(url: str | None = None, **kwargs: Any) -> ConsoleApp:
        kwargs.setdefault("refresh", 0.2)
        return ConsoleApp(RedisBackend(RedisSettings(url=url or redis_url)), **kwargs)

    return build


async def until(pilot: Pilot[Any], condition: Callable[[], object], timeout: float = 8.0) -> None:
    """Let the app run until ``condition()`` is truthy (fails after ``timeout``)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await pilot.pause(0.05)


# Polling an async check is the same everywhere in the suite.
until_async = eventually


@pytest.fixture(autouse=True)
def toast_log(monkeypatch: pytest.MonkeyPatch) -> None:
    """Keep every toast an app raised, not only those still shown: a toast expires after
    its timeout, and a slow machine may look for it later than that. Kept when
    ``notify`` is called, so a check right after an action sees its toasts."""
    notify = App.notify
    clear = App.clear_notifications

    def record(app: App[Any], message: str, **options: Any) -> None:
        severity = str(options.get("severity", "information"))
        app.__dict__.setdefault("_toast_log", []).append((str(message), severity))
        notify(app, message, **options)

    def forget(app: App[Any]) -> None:
        app.__dict__["_toast_log"] = []
        clear(app)

    monkeypatch.setattr(App, "notify", record)
    monkeypatch.setattr(App, "clear_notifications", forget)


def toasts(app: App[Any], severity: str | None = None) -> list[str]:
    """Every toast ``app`` raised since it started or last cleared them, oldest first
    (only those of ``severity``, when given)."""
    log: list[tuple[str, str]] = app.__dict__.get("_toast_log", [])
    return [text for text, level in log if severity is None or level == severity]
