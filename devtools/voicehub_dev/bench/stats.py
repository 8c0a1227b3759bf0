"""Small statistics helpers for the benchmarks."""

from __future__ import annotations

import statistics
from collections.abc import Sequence


def percentile(values: Sequence[float], fraction: float) -> float:
    """The `fraction` percentile (nearest rank) of `values`."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(fraction * (len(ordered) - 1))))
    return ordered[index]


def summary_ms(seconds: Sequence[float]) -> dict[str, float]:
    """Median, p95, p99 and max of durations given in seconds, in milliseconds."""
    ms = [s * 1000.0 for s in seconds]
    return {
        "median": round(statistics.median(ms), 4) if ms else float("nan"),
        "p95": round(percentile(ms, 0.95), 4),
        "p99": round(percentile(ms, 0.99), 4),
        "max": round(max(ms), 4) if ms else float("nan"),
    }
