"""The `metrics` bench section runs (quick) and reports its figures under the documented keys."""

from __future__ import annotations

from voicehub.bench import metrics


async def test_the_metrics_section_reports_the_instrumentation_cost() -> None:
    figures = (await metrics.run(quick=True))["metrics"]
    assert set(figures) == {
        "meter_us_per_frame",
        "bare_transport_us_per_frame",
        "timed_store_us_per_op",
        "memory_store_us_per_op",
        "scrape_ms",
        "scrape_calls",
    }
    assert figures["bare_transport_us_per_frame"] > 0 and figures["scrape_ms"] > 0
    assert figures["meter_us_per_frame"] >= 0 and figures["timed_store_us_per_op"] >= 0
