"""The bench runner's spread over rounds, and the full-path bench on a short run."""

from __future__ import annotations

from pathlib import Path

from voicehub_dev.bench.delegation import store_work
from voicehub_dev.bench.full_path import full_path
from voicehub_dev.bench.runner import spread


def test_spread_reports_median_and_range_per_number() -> None:
    rounds = [
        {"a": {"median": 3.0, "n": 10}, "store": "sqlite", "runs": [1]},
        {"a": {"median": 1.0, "n": 30}, "store": "sqlite", "runs": [2]},
        {"a": {"median": 2.0, "n": 20}, "store": "sqlite", "runs": [3]},
    ]
    figures, ranges = spread(rounds)
    assert figures == {"a": {"median": 2.0, "n": 20}, "store": "sqlite", "runs": [3]}
    assert ranges == {"a.median": [1.0, 2.0, 3.0], "a.n": [10, 20, 30]}


def test_spread_leaves_out_non_finite_figures() -> None:
    figures, ranges = spread([{"x": float("nan")}, {"x": float("nan")}])
    assert "x" not in ranges
    assert "x" in figures


async def test_full_path_runs_tool_call_to_injection(tmp_path: Path) -> None:
    for kind in ("memory", "sqlite"):
        figures = await full_path(kind, tmp_path, count=5)
        assert set(figures) == {"median", "p95", "p99", "max"}
        assert figures["median"] > 0


async def test_store_work_counts_one_commit_per_round_trip(tmp_path: Path) -> None:
    work = await store_work(tmp_path, count=5)
    # A round trip: per worker a task, a child room opened and closed and its four events,
    # then one group commit for the dispatch and both workers.
    assert work["round_trip"] == {"statements": 18.0, "commits": 1.0}
    # A full path adds the tool call's two events and the outbox record: committed when
    # written, claimed (committed with the next turns) and settled (committed at once).
    assert work["full_path"]["commits"] == 3.0
    assert work["full_path"]["statements"] < 30
