"""Interleaved measurement, now in :mod:`bench.common` (importable here for bench.throughput)."""

from bench.common import ainterleave, interleave, load_average, ratio_line, stats

__all__ = ["ainterleave", "interleave", "load_average", "ratio_line", "stats"]
