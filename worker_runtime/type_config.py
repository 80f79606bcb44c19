"""A type's runtime configuration: what may be in it, the diff an audit entry records,
and how a worker's handler applies it (README, "Type configuration").

The configuration is one JSON object per type (``Keys.type_config``), stored with a
version raised by every write. Every replica serving the type applies a new version
without restarting: the handler's ``on_cleanup()`` hook, then ``on_init(config)``,
and reports what happened in its lease (``config_reports``).
"""

from __future__ import annotations

import inspect
import json
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from worker_runtime.models import Capability, ConfigReport, Lease

log = logging.getLogger(__name__)

RESERVED_KEYS = frozenset(
    {
        "type",
        "types",
        "agent_type",
        "agent_types",
        "module",
        "handler",
        "count",
        "replicas",
        "instance",
        "instance_id",
        "worker_id",
        "role",
        "concurrency",
        "consumer_group",
        "group",
        "stream",
        "schema",
    }
)
"""Routing and loading settings: set by the deployment (``worker-runtime run`` flags,
the environment, ``scale``), never by the runtime configuration a handler reads."""

MAX_CONFIG_BYTES = 65_536
"""Largest stored configuration (JSON text): it travels in every replica's reads."""

MAX_ERROR = 500
"""Longest hook error a lease reports (cut with a marker)."""


class TypeConfigError(ValueError):
    """A configuration change refused before anything was written (one line)."""


def check_config(config: Mapping[str, Any]) -> str:
    """The JSON text of ``config`` when it may be stored; raises :class:`TypeConfigError`.

    A JSON object whose keys are non-empty text, none of them reserved, that encodes
    to at most :data:`MAX_CONFIG_BYTES`.
    """
    if not isinstance(config, Mapping):
        raise TypeConfigError("the configuration must be a JSON object")
    for key in config:
        if not isinstance(key, str) or not key.strip():
            raise TypeConfigError(f"configuration keys must be non-empty text, not {key!r}")
        if key in RESERVED_KEYS:
            raise TypeConfigError(
                f"{key!r} is reserved: routing and loading settings come from the "
                "deployment (worker-runtime run flags, the environment, scale), not "
                "the runtime configuration"
            )
    try:
        text = json.dumps(dict(config), sort_keys=True, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise TypeConfigError(f"the configuration is not JSON: {exc}") from None
    if len(text.encode()) > MAX_CONFIG_BYTES:
        raise TypeConfigError(
            f"the configuration is {len(text.encode())} bytes (at most {MAX_CONFIG_BYTES})"
        )
    return text


def merged(
    current: Mapping[str, Any], values: Mapping[str, Any], unset: Iterable[str] = ()
) -> dict[str, Any]:
    """``current`` with ``values`` set and ``unset`` keys removed (a new dict)."""
    out = dict(current)
    out.update(values)
    for key in unset:
        out.pop(key, None)
    return out


def config_diff(old: Mapping[str, Any], new: Mapping[str, Any]) -> str:
    """``key: old -> new`` per changed key (``+key=v`` added, ``-key`` removed)."""
    parts: list[str] = []
    for key in sorted(set(old) | set(new)):
        if key not in new:
            parts.append(f"-{key}")
        elif key not in old:
            parts.append(f"+{key}={json.dumps(new[key], sort_keys=True)}")
        elif old[key] != new[key]:
            was, now = json.dumps(old[key], sort_keys=True), json.dumps(new[key], sort_keys=True)
            parts.append(f"{key}: {was} -> {now}")
    return "; ".join(parts) or "no change"


def _hook(handler: Any, name: str) -> Any:
    """The handler's hook: an attribute of the handler, else a function of its module."""
    found = getattr(handler, name, None)
    if found is None:
        module = inspect.getmodule(handler)
        found = getattr(module, name, None) if module is not None else None
    return found if callable(found) else None


async def _call(hook: Any, *args: Any) -> None:
    outcome = hook(*args)
    if inspect.isawaitable(outcome):
        await outcome


async def apply_config(
    handler: Any, version: int, config: dict[str, Any], first: bool
) -> ConfigReport:
    """Run ``on_cleanup()`` (unless ``first``: nothing was initialised yet) then
    ``on_init(config)``; what happened, for the leases. A handler without hooks applies
    every version trivially (it reads nothing of the configuration).
    """
    try:
        cleanup = _hook(handler, "on_cleanup")
        init = _hook(handler, "on_init")
        if cleanup is not None and not first:
            await _call(cleanup)
        if init is not None:
            await _call(init, dict(config))
    except Exception as exc:
        text = f"{type(exc).__name__}: {exc}"
        if len(text) > MAX_ERROR:
            text = text[: MAX_ERROR - 14] + " … (cut here)"
        log.warning("configuration version %d not applied: %s", version, text)
        return ConfigReport(version=version, ok=False, error=text)
    return ConfigReport(version=version, ok=True)


@dataclass(frozen=True, slots=True)
class ConfigChange:
    """A configuration write (:meth:`WorkerManager.set_type_config`)."""

    agent_type: str
    version: int
    before: dict[str, Any]
    after: dict[str, Any]
    diff: str


class ConfigState(StrEnum):
    """Where one worker is with a configuration version."""

    APPLIED = "applied"
    FAILED = "failed"
    PENDING = "pending"
    SUPERSEDED = "superseded"
    """It applied (or failed) a later version: this one is past."""
    UNSUPPORTED = "unsupported"
    """It cannot apply a configuration (by-framework, an older worker_runtime)."""


@dataclass(frozen=True, slots=True)
class ConfigOutcome:
    """One worker's outcome for a configuration version (``error``: the hook's)."""

    worker_id: str
    state: ConfigState
    error: str | None = None


def config_outcome(change: ConfigChange, wid: str, lease: Lease) -> ConfigOutcome:
    """What ``wid``'s ``lease`` reports about ``change`` (its ``config_reports``)."""
    if not lease.capabilities or Capability.CONFIG.value not in lease.capabilities:
        return ConfigOutcome(wid, ConfigState.UNSUPPORTED, "cannot apply a configuration")
    report = (lease.config_reports or {}).get(change.agent_type)
    if report is None or report.version < change.version:
        return ConfigOutcome(wid, ConfigState.PENDING)
    if report.version > change.version:
        return ConfigOutcome(wid, ConfigState.SUPERSEDED)
    if report.ok:
        return ConfigOutcome(wid, ConfigState.APPLIED)
    return ConfigOutcome(wid, ConfigState.FAILED, report.error)
