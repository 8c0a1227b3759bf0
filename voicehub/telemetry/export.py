"""Getting spans out of the process without ever holding a call up.

Spans go through the SDK's `BatchSpanProcessor` (a queue and a worker thread) to the
exporter. `BoundedSpanProcessor` stands in front of it and keeps the count the SDK does not
publish: a span finished while `max_queue_size` spans are already waiting (a collector that
is down or slow) is dropped at once and counted, so the batch queue never overflows and a
call's thread only ever pays an append; `CountingExporter` counts the spans of every batch
the exporter could not deliver. Both counts go to /metrics (`SpanCounts`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

__all__ = ["BoundedSpanProcessor", "CountingExporter", "SpanCounts"]

log = logging.getLogger("voicehub.telemetry")


class SpanCounts:
    """Spans finished, exported and dropped (by reason), across threads."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.finished = 0
        self.exported = 0
        self.submitted = 0  # handed to the exporter, delivered or not
        self.dropped: dict[str, int] = {"queue_full": 0, "export_failed": 0}
        self._warned = False

    @property
    def waiting(self) -> int:
        """Spans queued for export now."""
        return self.finished - self.submitted - self.dropped["queue_full"]

    def drop(self, reason: str, count: int) -> None:
        with self.lock:
            self.dropped[reason] += count
        self.warn(reason)

    def warn(self, reason: str) -> None:
        """Log the first drop only: a collector that is down would flood the log."""
        with self.lock:
            warn, self._warned = not self._warned, True
        if warn:
            log.warning(
                "dropping spans (%s): is the OpenTelemetry collector reachable? "
                "voicehub_trace_spans_dropped_total counts them",
                reason,
            )


class CountingExporter(SpanExporter):
    """An exporter that counts what it delivered and what it could not."""

    def __init__(self, inner: SpanExporter, counts: SpanCounts) -> None:
        self.inner = inner
        self.counts = counts

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        with self.counts.lock:
            self.counts.submitted += len(spans)
        try:
            result = self.inner.export(spans)
        except Exception:  # an exporter's fault must stay in the export thread
            log.debug("span export raised", exc_info=True)
            result = SpanExportResult.FAILURE
        if result is SpanExportResult.SUCCESS:
            with self.counts.lock:
                self.counts.exported += len(spans)
        else:
            self.counts.drop("export_failed", len(spans))
        return result

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)


class BoundedSpanProcessor(SpanProcessor):
    """A `BatchSpanProcessor` that drops (and counts) spans beyond `max_queue_size`
    waiting, instead of letting the SDK drop them unseen."""

    def __init__(
        self,
        exporter: SpanExporter,
        counts: SpanCounts,
        *,
        max_queue_size: int = 2048,
        max_export_batch_size: int = 512,
        schedule_delay_millis: float = 5000,
    ) -> None:
        self.counts = counts
        self.max_queue_size = max_queue_size
        self.batch = BatchSpanProcessor(
            CountingExporter(exporter, counts),
            max_queue_size=max_queue_size,
            max_export_batch_size=min(max_export_batch_size, max_queue_size),
            schedule_delay_millis=schedule_delay_millis,
        )

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        pass

    def on_end(self, span: ReadableSpan) -> None:
        if not (span.context and span.context.trace_flags.sampled):
            return
        counts = self.counts
        with counts.lock:
            full = counts.waiting >= self.max_queue_size
            if full:
                counts.dropped["queue_full"] += 1
            counts.finished += 1
        if full:
            counts.warn("queue_full")
            return
        self.batch.on_end(span)

    def shutdown(self) -> None:
        self.batch.shutdown()  # type: ignore[no-untyped-call]

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.batch.force_flush(timeout_millis)
