"""Simulated fleets: now in :mod:`bench.common` (kept importable for ``bench.throughput``)."""

from bench.common import (
    TYPES,
    SimInstance,
    calls_delta,
    command_calls,
    make_fleet,
    populate,
    sim_settings,
    write_fleet,
)

__all__ = [
    "TYPES",
    "SimInstance",
    "calls_delta",
    "command_calls",
    "make_fleet",
    "populate",
    "sim_settings",
    "write_fleet",
]
