"""A worker process runs with start-up frozen out of the collector and a larger young generation."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from worker_runtime import cli
from worker_runtime.instance import WorkerInstance


@pytest.fixture
def _collector_restored() -> Iterator[None]:
    threshold = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*threshold)


@pytest.mark.usefixtures("_collector_restored")
def test_run_tunes_the_collector_before_the_instance_starts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: dict[str, object] = {}

    async def run(self: WorkerInstance) -> None:
        seen["threshold"] = gc.get_threshold()
        seen["frozen"] = gc.get_freeze_count()
        seen["enabled"] = gc.isenabled()

    monkeypatch.setattr(WorkerInstance, "run", run)
    monkeypatch.setenv("BYAI_REDIS_URL", "redis://127.0.0.1:1/0")
    assert cli.run(["run", "tests.handlers:record", "--type", "chat"]) == 0
    threshold = seen["threshold"]
    assert isinstance(threshold, tuple) and threshold[0] == cli.YOUNG_THRESHOLD
    assert isinstance(seen["frozen"], int) and seen["frozen"] > 10_000  # modules, classes
    assert seen["enabled"] is True  # cycles are still collected
