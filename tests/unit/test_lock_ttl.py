"""The start-up lock outlives several heartbeats for every allowed interval."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from worker_runtime.registry import LOCK_TTL_S, lock_ttl_s
from worker_runtime.settings import WorkerSettings

_MAX_INTERVAL = next(
    m.le for m in WorkerSettings.model_fields["heartbeat_interval"].metadata if hasattr(m, "le")
)


@given(st.floats(min_value=1e-3, max_value=float(_MAX_INTERVAL)))
def test_lock_ttl_exceeds_three_heartbeats(interval: float) -> None:
    ttl = lock_ttl_s(interval)
    assert isinstance(ttl, int)
    assert ttl >= LOCK_TTL_S
    assert ttl > 3 * interval


def test_the_largest_interval_is_covered() -> None:
    assert lock_ttl_s(float(_MAX_INTERVAL)) > 3 * float(_MAX_INTERVAL)
