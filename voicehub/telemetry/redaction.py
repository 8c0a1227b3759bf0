"""Redaction of exported spans (log records: `voicehub.core.redaction.redact_logs`).

`RedactingExporter` wraps a span exporter: each span is copied with its attributes, event
attributes and status text scrubbed before the inner exporter sees it. The copy happens on
the exporter's thread, off the calls' event loop.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.trace import Status

from voicehub.core.redaction import Redactor

__all__ = ["RedactingExporter"]


class RedactingExporter(SpanExporter):
    """`inner`, fed spans with their text scrubbed by `redactor`."""

    def __init__(self, inner: SpanExporter, redactor: Redactor) -> None:
        self.inner = inner
        self.redactor = redactor

    def _attributes(self, attributes: Mapping[str, Any] | None) -> dict[str, Any]:
        attribute = self.redactor.attribute
        return {
            key: attribute(key, value) if isinstance(value, str | int | float) else value
            for key, value in (attributes or {}).items()
        }

    def _scrubbed(self, span: ReadableSpan) -> ReadableSpan:
        status = span.status
        if status.description:
            status = Status(status.status_code, self.redactor.text(status.description))
        events = [
            Event(event.name, self._attributes(event.attributes), event.timestamp)
            for event in span.events
        ]
        return ReadableSpan(
            name=span.name,
            context=span.context,
            parent=span.parent,
            resource=span.resource,
            attributes=self._attributes(span.attributes),
            events=events,
            links=span.links,
            kind=span.kind,
            status=status,
            start_time=span.start_time,
            end_time=span.end_time,
            instrumentation_scope=span.instrumentation_scope,
        )

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return self.inner.export([self._scrubbed(span) for span in spans])

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)
