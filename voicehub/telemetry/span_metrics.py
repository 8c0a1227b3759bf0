"""The tracing's own figures on /metrics: spans exported, queued and dropped.

    voicehub_trace_spans_exported_total            spans the collector accepted
    voicehub_trace_spans_dropped_total{reason}     queue_full (the collector fell behind
                                                   or is away), export_failed (it refused
                                                   or could not be reached)
    voicehub_trace_spans_queued                    spans waiting for export now

All zero while tracing is off.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from voicehub.telemetry.export import SpanCounts

__all__ = ["SpanCountCollector"]


class SpanCountCollector(Collector):
    """Reads a `SpanCounts` (or reports zeros when there is none) at each scrape."""

    def __init__(self, counts: SpanCounts | None) -> None:
        self.counts = counts

    def collect(self) -> Iterator[Metric]:
        counts = self.counts
        exported = CounterMetricFamily(
            "voicehub_trace_spans_exported", "Spans the trace collector accepted."
        )
        exported.add_metric([], counts.exported if counts else 0)
        dropped = CounterMetricFamily(
            "voicehub_trace_spans_dropped",
            "Spans dropped, never slowing a call: queue_full (the collector fell behind or "
            "is away), export_failed (it refused them or could not be reached).",
            labels=["reason"],
        )
        for reason in ("queue_full", "export_failed"):
            dropped.add_metric([reason], counts.dropped[reason] if counts else 0)
        queued = GaugeMetricFamily("voicehub_trace_spans_queued", "Spans waiting for export.")
        queued.add_metric([], max(0, counts.waiting) if counts else 0)
        yield from (exported, dropped, queued)
