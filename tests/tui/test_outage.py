"""Redis goes away under a running console, then comes back."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from redis.asyncio import Redis

from tests.redis_server import RedisServer
from tests.tui.conftest import AppFactory, until, write_worker


@pytest.fixture
def own_server() -> Iterator[RedisServer]:
    """A server this test may kill (the session one is shared)."""
    server = RedisServer(extra_args=["--requirepass", "s3cret-pw"]).start()
    yield server
    server.cleanup()


async def test_outage_is_shown_and_recovers_without_restart(
    own_server: RedisServer, make_app: AppFactory
) -> None:
    url = f"redis://:s3cret-pw@127.0.0.1:{own_server.port}/0"
    client = Redis.from_url(url, decode_responses=True)
    await write_worker(client, "w-1", ["chat"])
    await client.aclose()
    app = make_app(url=url, refresh=0.2)
    async with app.run_test(size=(80, 24)) as pilot:
        main = app.main_screen
        header = main.header
        table = main.workers_view.table
        await until(pilot, lambda: table.row_count == 1 and header.connected)
        assert "s3cret-pw" not in header.endpoint
        status = main.workers_view.query_one("#workers-status")
        fresh_colour = status.styles.color
        warning = app.theme_variables["text-warning"]
        assert fresh_colour.hex.lower() != warning.lower()

        own_server.stop()
        await until(pilot, lambda: header.connected is False)
        assert header.error  # the reason is on screen
        assert "s3cret-pw" not in header.error
        rendered = str(header.render().renderables[0])
        assert "DISCONNECTED" in rendered
        # The last good data stays, marked stale; input still works.
        assert table.ordered_keys() == ["w-1"]
        assert main.tabs.has_class("-stale")
        assert "STALE" in str(status.render())
        assert status.styles.color.hex.lower() == warning.lower()  # only while stale
        await pilot.press("2")
        assert main.active_view == "instances"
        await pilot.press("1")
        failures = app.failures
        await until(pilot, lambda: app.failures >= failures + 2)  # it keeps retrying

        own_server.start()  # same port; the data is gone with the old process
        client = Redis.from_url(url, decode_responses=True)
        await write_worker(client, "w-2", ["chat"])
        await client.aclose()
        await until(pilot, lambda: header.connected is True, timeout=15)
        await until(pilot, lambda: table.ordered_keys() == ["w-2"])
        assert not main.tabs.has_class("-stale")
        assert status.styles.color == fresh_colour
        assert app.failures == 0
