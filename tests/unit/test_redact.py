"""The one redactor and the one one-line error helper both CLIs and the TUI print through."""

from __future__ import annotations

import pytest
from redis.exceptions import (
    AuthenticationError,
    NoPermissionError,
    ResponseError,
)
from redis.exceptions import (
    ConnectionError as RedisConnectionError,
)

from worker_runtime.connection import DETAIL_LIMIT, redis_error_line
from worker_runtime.redact import MASK, one_line, redact, url_password

URL = "redis://ops:s3cret-pw@db.example:6380/2"


@pytest.mark.parametrize(
    ("url", "password"),
    [(URL, "s3cret-pw"), ("redis://db:6379", None), ("redis://:pw@h", "pw"), ("redis://h:x", None)],
)
def test_url_password(url: str, password: str | None) -> None:
    assert url_password(url) == password


@pytest.mark.parametrize(
    "text",
    [
        f"Error connecting to {URL}",
        "AUTH failed for password s3cret-pw",
        f"two: {URL} and s3cret-pw again",
    ],
)
def test_redact_removes_the_url_and_the_bare_password(text: str) -> None:
    cleaned = redact(text, URL)
    assert "s3cret-pw" not in cleaned
    assert MASK in cleaned


def test_redact_shows_the_url_masked_or_as_told() -> None:
    assert redact(f"at {URL}", URL) == "at redis://ops:***@db.example:6380/2"
    assert redact(f"at {URL}", URL, shown="cluster redis://c:1") == "at cluster redis://c:1"


def test_redact_without_a_url_or_password_changes_nothing() -> None:
    assert redact("plain s3cret-pw", None) == "plain s3cret-pw"
    assert redact("at redis://db:6379", "redis://db:6379") == "at redis://db:6379"


def test_one_line_collapses_whitespace_and_names_silent_errors() -> None:
    assert one_line(ValueError("a\n  b\tc\r\n")) == "a b c"
    assert one_line(TimeoutError()) == "TimeoutError"
    assert one_line("  ") == ""
    assert one_line(ValueError("x" * 50), limit=10) == "x" * 10


@pytest.mark.parametrize(
    ("exc", "line"),
    [
        (
            AuthenticationError("invalid username-password pair"),
            "Redis at E refused the credentials: invalid username-password pair",
        ),
        (
            NoPermissionError("this user has no permissions to run the 'xadd' command"),
            "Redis at E refused the command: the Redis ACL user may not run XADD",
        ),
        (
            RedisConnectionError("Error 111 connecting to db.example:6380.\nRefused."),
            "cannot reach Redis at E: Error 111 connecting to db.example:6380. Refused.",
        ),
        (OSError("unreachable"), "cannot reach Redis at E: unreachable"),
        (ResponseError("WRONGTYPE"), "Redis at E: WRONGTYPE"),
    ],
)
def test_redis_error_line_names_the_failure(exc: Exception, line: str) -> None:
    assert redis_error_line(exc, endpoint="E", url=URL) == line
    assert redis_error_line(exc) == line.replace("Redis at E", "Redis")


def test_redis_error_line_never_holds_the_password_even_when_cut() -> None:
    # The password straddles the cut: redacting after cutting would leak its first half.
    padding = "x" * (DETAIL_LIMIT - 4)
    line = redis_error_line(
        RedisConnectionError(f"{padding} s3cret-pw {URL}"), endpoint="E", url=URL
    )
    assert "s3c" not in line and "\n" not in line
    assert line.startswith("cannot reach Redis at E: x")
