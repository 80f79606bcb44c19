"""Soak: many tasks through three worker processes; every capped key stays capped.

``bench/soak.py`` holds the scenario (``python -m bench.soak`` prints the table).
"""

from __future__ import annotations

import pytest

from bench.soak import run_soak
from worker_runtime.batcher import SESSION_TTL_S

pytestmark = pytest.mark.slow

TASKS = 100_000
"""The issue's size: about 30 s on two cores (``python -m bench.soak`` to see)."""


async def test_soak_keeps_every_key_within_its_cap(redis_url: str) -> None:
    report = await run_soak(redis_url, tasks=TASKS, processes=3)
    print("\n" + report.table())
    assert report.processed == TASKS
    assert report.over == [], [(c.name, c.peak, c.bound) for c in report.over]
    by_name = {c.name: c for c in report.caps}
    # The caps were reached, not just never approached: the streams were written past
    # them and the histories filled.
    assert report.audit_writes > by_name["audit stream"].bound
    assert report.control_writes > by_name["worker control stream"].bound
    assert by_name["executions"].peak == by_name["executions"].bound
    assert by_name["history snapshots"].final == by_name["executions"].final
    # Acknowledged task entries are trimmed: the stream does not keep 100,000 tasks.
    assert by_name["task stream (acked entries trimmed)"].final <= 100
    # The session registry has no count cap; its TTL is the bound.
    assert 0 < report.session_registry_ttl <= SESSION_TTL_S
    assert report.used_memory_after < report.used_memory_before + 64 * 1024 * 1024
