"""The replica-count rules every instance, the reader and the console share."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from worker_runtime.quota import (
    MAX_SCALE,
    check_scale_count,
    compute_quota,
    compute_quotas,
    parse_count,
    parse_count_any,
)


@pytest.mark.parametrize("count", [0, 1, MAX_SCALE])
def test_scale_counts_in_bounds_are_accepted(count: int) -> None:
    check_scale_count(count)


@pytest.mark.parametrize(
    ("count", "message"),
    [
        (-1, f"scale count -1 is out of range: 0 to {MAX_SCALE}"),
        (MAX_SCALE + 1, f"scale count {MAX_SCALE + 1} is out of range: 0 to {MAX_SCALE}"),
        (True, f"scale count must be a whole number from 0 to {MAX_SCALE}"),
        (2.0, f"scale count must be a whole number from 0 to {MAX_SCALE}"),
    ],
)
def test_scale_counts_out_of_bounds_name_the_bound(count: Any, message: str) -> None:
    with pytest.raises(ValueError) as caught:
        check_scale_count(count)
    assert str(caught.value) == message


@pytest.mark.parametrize(
    ("raw", "count"),
    [
        ("3", 3),
        ("0", 0),
        (7, 7),
        (str(MAX_SCALE), MAX_SCALE),
        (str(MAX_SCALE + 1), None),
        ("-1", None),
        ("1.5", None),
        ("", None),
        (None, None),
        ("x", None),
    ],
)
def test_stored_counts_outside_the_bounds_read_as_none(raw: object, count: int | None) -> None:
    assert parse_count(raw) == count


@pytest.mark.parametrize(
    ("raw", "value"),
    [
        ("12", 12),
        (12, 12),
        (10**9, 10**9),
        (0, 0),
        (-1, None),
        (True, None),
        (None, None),
        ("x", None),
        ([1], None),
    ],
)
def test_counters_are_non_negative_integers_without_an_upper_bound(
    raw: Any, value: int | None
) -> None:
    assert parse_count_any(raw) == value


def test_even_split_remainder_to_first_sorted_ids() -> None:
    live = ["i-c", "i-a", "i-b"]
    assert [compute_quota(7, {}, live, i) for i in ("i-a", "i-b", "i-c")] == [3, 2, 2]
    assert compute_quotas(7, {}, live) == {"i-a": 3, "i-b": 2, "i-c": 2}


def test_no_target_no_override_is_none() -> None:
    assert compute_quota(None, {}, ["a", "b"], "a") is None
    assert compute_quotas(None, {}, ["a", "b"]) == {}


def test_override_is_exact_and_every_other_instance_is_left_unchanged() -> None:
    # README, Instances, scale and the leader: "scale chat 1 --instance a" must not move b.
    assert compute_quotas(4, {}, ["a", "b"]) == {"a": 2, "b": 2}
    assert compute_quotas(4, {"a": 1}, ["a", "b"]) == {"a": 1, "b": 2}
    overrides = {"b": 5}
    assert compute_quota(6, overrides, ["a", "b", "c"], "b") == 5
    assert compute_quota(6, overrides, ["a", "b", "c"], "a") == 2
    assert compute_quota(6, overrides, ["a", "b", "c"], "c") == 2


def test_override_applies_without_a_target() -> None:
    assert compute_quota(None, {"a": 2}, ["a", "b"], "a") == 2
    assert compute_quota(None, {"a": 2}, ["a", "b"], "b") is None


def test_overrides_larger_than_target_never_go_negative() -> None:
    assert compute_quota(2, {"a": 10}, ["a", "b"], "b") == 1
    assert compute_quota(3, {"a": -4}, ["a", "b"], "a") == 0
    assert compute_quota(3, {"a": -4}, ["a", "b"], "b") == 1


def test_dead_overridden_instance_changes_nobody() -> None:
    # "z" has an override but is not live: the live instances split the target.
    assert compute_quotas(4, {"z": 3}, ["a", "b"]) == {"a": 2, "b": 2}


def test_asking_instance_counts_as_live() -> None:
    assert compute_quota(3, {}, ["b"], "a") == 2
    assert compute_quota(3, {}, [], "a") == 3


@given(
    target=st.integers(min_value=0, max_value=1000),
    live=st.sets(st.text(min_size=1, max_size=6), min_size=1, max_size=12),
    data=st.data(),
)
def test_properties(target: int, live: set[str], data: st.DataObject) -> None:
    overridden = data.draw(st.sets(st.sampled_from(sorted(live)), max_size=len(live)))
    overrides = {i: data.draw(st.integers(min_value=0, max_value=50)) for i in overridden}
    quotas = compute_quotas(target, overrides, live)
    assert set(quotas) == live
    assert all(q >= 0 for q in quotas.values())
    for i in overridden:
        assert quotas[i] == overrides[i]
    # Every instance without an override has exactly the share it had without any.
    plain = compute_quotas(target, {}, live)
    for i in live - overridden:
        assert quotas[i] == plain[i]
    values = [plain[i] for i in sorted(live)]
    # Even split: differ by at most one, larger shares first in id order.
    assert max(values) - min(values) <= 1
    assert values == sorted(values, reverse=True)
    assert sum(values) == target
