"""The Sentinel client: the data nodes' credentials go to the primary's connections,
the sentinels' own to the sentinels only, TLS to both (README "Redis Sentinel").

No server: the client's pools are built at construction and connect on first use.
"""

from __future__ import annotations

from typing import Any

from worker_runtime.connection import SentinelRedis, create_redis
from worker_runtime.settings import RedisSettings


def _kwargs(client: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    data = dict(client.connection_pool.connection_kwargs)
    sentinels = [
        dict(s.connection_pool.connection_kwargs) for s in client.sentinel_manager.sentinels
    ]
    return data, sentinels


async def test_data_and_sentinel_credentials_stay_apart() -> None:
    settings = RedisSettings(
        url="redis+sentinel://worker:data%21pw@10.0.0.1:26379,10.0.0.2/main/3",
        sentinel_username="sentinel-user",
        sentinel_password="sentinel-pw",
    )
    client = create_redis(settings)
    try:
        assert isinstance(client, SentinelRedis)
        assert client.connection_pool.service_name == "main"  # type: ignore[attr-defined]
        data, sentinels = _kwargs(client)
        assert (data["username"], data["password"], data["db"]) == ("worker", "data!pw", 3)
        assert [(s["host"], s["port"]) for s in sentinels] == [
            ("10.0.0.1", 26379),
            ("10.0.0.2", 26379),
        ]
        for s in sentinels:
            assert (s["username"], s["password"]) == ("sentinel-user", "sentinel-pw")
            # The runtime's retry (a copy per client), not redis-py's default.
            assert type(s["retry"]) is type(data["retry"])
            assert s["retry"].get_retries() == data["retry"].get_retries()
    finally:
        await client.aclose()
    assert client.sentinel_manager is None  # closed with the client


async def test_sentinels_without_credentials_get_none_and_tls_reaches_both() -> None:
    settings = RedisSettings(url="rediss+sentinel://:data-pw@s1:1,s2:2/main", tls_insecure=True)
    client = create_redis(settings)
    try:
        assert isinstance(client, SentinelRedis)
        data, sentinels = _kwargs(client)
        assert data["password"] == "data-pw" and data["db"] == 0
        for s in sentinels:
            assert s.get("password") is None and s.get("username") is None
            assert s["ssl_check_hostname"] is False
        assert data["ssl_check_hostname"] is False
        assert client.connection_pool.connection_class.__name__ == "SentinelManagedSSLConnection"
    finally:
        await client.aclose()
