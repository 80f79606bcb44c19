"""One time-zone rule: the console's clock and the CLI's timestamp agree, in UTC."""

from __future__ import annotations

import time

import pytest

from byconsole.formatting import DASH, ZONE, age, age_step, clock, exact_age, timestamp

# 2026-05-28 20:26:40 UTC
T = 1_780_000_000_000


@pytest.mark.parametrize("tz", ["UTC", "America/Los_Angeles", "Asia/Kolkata"])
def test_console_and_cli_show_the_same_utc_time_whatever_the_local_zone(
    tz: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TZ", tz)
    time.tzset()
    try:
        assert timestamp(T) == "2026-05-28 20:26:40"
        assert clock(T, T + 5_000) == "20:26:40"
        assert timestamp(T).endswith(clock(T, T))
        assert clock(T, T, zone=True) == f"20:26:40 {ZONE}"
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()


def test_times_older_than_a_day_carry_their_date() -> None:
    assert clock(T, T + 86_400_000 - 1) == "20:26:40"
    assert clock(T, T + 2 * 86_400_000) == "2026-05-28 20:26"
    assert clock(T + 2 * 86_400_000, T) == "2026-05-30 20:26"  # a clock ahead of ours


def test_unknown_or_absurd_times_never_raise() -> None:
    assert clock(None) == clock(0) == clock(-5) == DASH
    assert clock(10**20, 0) == DASH
    assert timestamp(None) == DASH
    assert timestamp(10**20) == str(10**20)


def test_ages() -> None:
    assert age(T - 125_000, T) == "2m05s"
    assert age(T - (3 * 24 + 4) * 3_600_000, T) == "3d04h"
    assert age(T + 9_000, T) == "0s"  # a clock ahead of ours is a fresh beat
    assert age(None, T) == DASH
    assert age_step(None) == (DASH, -1)
    assert age_step(4_000) == ("<10s", 0)
    assert age_step(75_000) == ("1m", 60)
    assert exact_age(4_200) == "4.2s ago"
    assert exact_age(120_000) == "2m ago"
