"""The pure rules behind restart and type configuration: who may restart, what a
configuration may hold, its diff, and what a lease says about a version."""

from __future__ import annotations

import pytest

from worker_runtime.models import ConfigReport, Lease
from worker_runtime.restarts import restart_refusal
from worker_runtime.type_config import (
    MAX_CONFIG_BYTES,
    ConfigChange,
    ConfigState,
    TypeConfigError,
    check_config,
    config_diff,
    config_outcome,
    merged,
)

OURS = ["confirm", "bf-envelope", "drain", "push-deny", "pause-type", "restart", "config"]


def _ours(**fields: object) -> Lease:
    return Lease.model_validate(
        {"worker_id": "a-r0", "instance_id": "a", "capabilities": OURS, **fields}
    )


def test_only_a_live_capable_replica_may_restart_and_each_refusal_says_why() -> None:
    assert restart_refusal("a-r0", _ours(lifecycle="active")) is None
    assert restart_refusal("a-r0", _ours(lifecycle="suspended")) is None
    assert "offline" in (restart_refusal("a-r0", None) or "")
    by_framework = Lease.parse('{"version": 1, "token": "t", "last_seen": 1}')
    assert "by-framework" in (restart_refusal("bf", by_framework) or "")
    older = _ours(capabilities=["confirm", "drain"])
    assert "without restart" in (restart_refusal("a-r0", older) or "")
    assert "is draining" in (restart_refusal("a-r0", _ours(lifecycle="draining")) or "")
    assert "no instance" in (restart_refusal("a-r0", _ours(instance_id=None)) or "")


def test_a_configuration_is_a_json_object_without_reserved_keys() -> None:
    assert check_config({"greeting": "hi", "limit": 5}) == '{"greeting": "hi", "limit": 5}'
    for reserved in ("type", "module", "count", "replicas", "instance_id", "role"):
        with pytest.raises(TypeConfigError, match=f"'{reserved}' is reserved"):
            check_config({reserved: 1})
    with pytest.raises(TypeConfigError, match="not JSON"):
        check_config({"x": float("nan")})
    with pytest.raises(TypeConfigError, match="not JSON"):
        check_config({"x": {1, 2}})
    with pytest.raises(TypeConfigError, match="non-empty text"):
        check_config({" ": 1})
    with pytest.raises(TypeConfigError, match="at most"):
        check_config({"blob": "x" * MAX_CONFIG_BYTES})
    with pytest.raises(TypeConfigError, match="JSON object"):
        check_config(["a"])  # type: ignore[arg-type]


def test_merge_and_diff_name_every_changed_key() -> None:
    old = {"a": 1, "b": "x", "gone": True}
    new = merged(old, {"a": 2, "c": [1]}, unset=["gone"])
    assert new == {"a": 2, "b": "x", "c": [1]}
    assert old == {"a": 1, "b": "x", "gone": True}  # not changed in place
    assert config_diff(old, new) == "a: 1 -> 2; +c=[1]; -gone"
    assert config_diff(new, new) == "no change"


def test_a_lease_reports_a_version_applied_failed_pending_or_past() -> None:
    change = ConfigChange("chat", 3, {}, {"a": 1}, "+a=1")

    def state(report: ConfigReport | None, caps: list[str] = OURS) -> ConfigState:
        reports = {"chat": report.model_dump()} if report else None
        lease = _ours(capabilities=caps, config_reports=reports)
        return config_outcome(change, "a-r0", lease).state

    assert state(ConfigReport(version=3, ok=True)) is ConfigState.APPLIED
    assert state(ConfigReport(version=3, ok=False, error="E")) is ConfigState.FAILED
    assert state(ConfigReport(version=2, ok=True)) is ConfigState.PENDING
    assert state(None) is ConfigState.PENDING
    assert state(ConfigReport(version=4, ok=True)) is ConfigState.SUPERSEDED
    assert state(None, caps=["confirm"]) is ConfigState.UNSUPPORTED
