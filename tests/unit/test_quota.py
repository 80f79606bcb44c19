"""The quota rule every instance and the console share."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from worker_runtime.quota import compute_quota, compute_quotas


def test_even_split_remainder_to_first_sorted_ids() -> None:
    live = ["i-c", "i-a", "i-b"]
    assert [compute_quota(7, {}, live, i) for i in ("i-a", "i-b", "i-c")] == [3, 2, 2]
    assert compute_quotas(7, {}, live) == {"i-a": 3, "i-b": 2, "i-c": 2}


def test_no_target_no_override_is_none() -> None:
    assert compute_quota(None, {}, ["a", "b"], "a") is None
    assert compute_quotas(None, {}, ["a", "b"]) == {}


def test_override_is_exact_and_others_share_the_rest() -> None:
    overrides = {"b": 5}
    assert compute_quota(6, overrides, ["a", "b", "c"], "b") == 5
    assert compute_quota(6, overrides, ["a", "b", "c"], "a") == 1
    assert compute_quota(6, overrides, ["a", "b", "c"], "c") == 0


def test_override_applies_without_a_target() -> None:
    assert compute_quota(None, {"a": 2}, ["a", "b"], "a") == 2
    assert compute_quota(None, {"a": 2}, ["a", "b"], "b") is None


def test_overrides_larger_than_target_never_go_negative() -> None:
    assert compute_quota(2, {"a": 10}, ["a", "b"], "b") == 0
    assert compute_quota(3, {"a": -4}, ["a", "b"], "a") == 0
    assert compute_quota(3, {"a": -4}, ["a", "b"], "b") == 3


def test_dead_overridden_instance_releases_its_share() -> None:
    # "z" has an override but is not live: the live instances still cover the target.
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
    shared = sorted(live - overridden)
    if shared:
        values = [quotas[i] for i in shared]
        # Even split: differ by at most one, larger shares first in id order.
        assert max(values) - min(values) <= 1
        assert values == sorted(values, reverse=True)
        assert sum(values) == max(0, target - sum(overrides.values()))
