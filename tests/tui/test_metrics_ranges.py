"""The Metrics view's time ranges, driven by keys against a real Redis.

``]`` / ``[`` pick the next / previous range; the next refresh carries that range of our
history, read from the tier that covers it; elsewhere than the Metrics view the keys
say where ranges live and change nothing.
"""

from __future__ import annotations

import json

from redis.asyncio import Redis
from rich.text import Text
from textual.widgets import Static

from byconsole.tui.backend import RedisBackend
from tests.tui.conftest import KEYS, AppFactory, until
from worker_runtime.history import DEFAULT_TIERS, bucket_of
from worker_runtime.models import TierPoint, TierTypeFigures, now_ms


async def _fill(redis: Redis) -> None:
    """Each default tier over its first day, its points' depth = the tier's index."""
    now = now_ms()
    for index, tier in enumerate(DEFAULT_TIERS):
        newest = bucket_of(now, tier.step_ms)
        count = min(tier.retention_ms, 86_400_000) // tier.step_ms
        pipe = redis.pipeline(transaction=False)
        for n in range(count):
            ts = newest - n * tier.step_ms
            point = TierPoint(
                ts=ts,
                last_ts=ts,
                queue_depth=index,
                per_type={"chat": TierTypeFigures(depth=index + 1)},
            )
            pipe.zadd(KEYS.metrics_tier(tier.name), {point.dump(): ts})
        await pipe.execute()
    # A by-framework point in the shared history: shown apart, never in our series.
    theirs = {"generated_at": now - 1_000, "workers_online": 3, "queue_depth_total": 900}
    await redis.zadd(KEYS.metrics_history, {json.dumps(theirs): now - 1_000})


async def test_range_keys_pick_the_tier_and_long_ranges_are_read_on_change(
    redis: Redis, fleet: dict[str, list[str]], make_app: AppFactory
) -> None:
    await _fill(redis)
    app = make_app()
    async with app.run_test(size=(120, 36)) as pilot:
        main = app.main_screen
        view = main.metrics_view

        def showing(history_range: str, tier: str | None) -> bool:
            snap = main.snapshot
            return snap is not None and (snap.metrics.history_range, snap.metrics.tier) == (
                history_range,
                tier,
            )

        await until(pilot, lambda: showing("15m", "10s"))
        # Away from the Metrics view the keys change nothing.
        await pilot.press("right_square_bracket")
        assert view.history_range == "15m"
        await pilot.press("4")
        seen: dict[str, set[int]] = {}
        for key, history_range, tier in [
            ("right_square_bracket", "1h", "10s"),
            ("right_square_bracket", "6h", "1m"),
            ("right_square_bracket", "24h", "10m"),
            ("right_square_bracket", "7d", "10m"),
            ("right_square_bracket", "7d", "10m"),  # the longest: stays
            ("left_square_bracket", "24h", "10m"),
        ]:
            await pilot.press(key)
            assert view.history_range == history_range
            await until(pilot, lambda r=history_range, t=tier: showing(r, t))  # type: ignore[misc]
            assert main.snapshot is not None
            history = main.snapshot.metrics.history
            seen[history_range] = {p.queue_depth for p in history}
            # By-framework's XLEN point is shown apart, never in our series.
            assert [p.queue_depth for p in main.snapshot.metrics.foreign] == [900]
            assert 900 not in seen[history_range]
        assert seen == {"1h": {0}, "6h": {1}, "24h": {2}, "7d": {2}}
        shown = view.query_one("#metrics-range", Static).content
        assert isinstance(shown, Text) and "24h from our 10m tier" in shown.plain
        foreign = view.query_one("#metrics-foreign", Static).content
        assert isinstance(foreign, Text) and "by-framework: depth = XLEN" in foreign.plain
        per_type = view.query_one("#metrics-per-type", Static).content
        assert isinstance(per_type, Text) and "chat" in per_type.plain
        # The range was read whole once; later refreshes read from its newest bucket on.
        backend = app.backend
        assert isinstance(backend, RedisBackend)
        plan = backend.reader._tier_plan(now_ms())
        assert main.snapshot is not None and plan is not None
        assert plan.command[1][1] == main.snapshot.metrics.history[-1].ts
