"""A job's observability: its calls' turn histograms (on the process' default registry,
which Prometheus' multiprocess mode writes to files the worker's endpoint sums), and, when
`OTEL_*` turn tracing on, the hub's traces (tool calls, tasks, deliveries, turns), each
job process exporting its own.

The histograms and the exporter are made once per process (a process may run several jobs
in turn); each job attaches them to its hub. Its logs and exported spans are scrubbed of
phone numbers and keypad digits (`voicehub.core.redaction`; a desk's own `sensitive`
patterns apply on `voicehub serve`, whose process knows its desks up front).
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from voicehub.core.redaction import Redactor, redact_logs
from voicehub.core.tracing import NO_TRACING
from voicehub.telemetry.setup import start_tracing, tracing_from_env
from voicehub.telemetry.turn_metrics import TurnMetrics, TurnObservers

if TYPE_CHECKING:
    from voicehub.core.tracing import Tracer
    from voicehub.hub import Hub
    from voicehub.telemetry.call_spans import CallSpans
    from voicehub.telemetry.setup import Tracing
    from voicehub.voice.engine.latency import TurnObserver

__all__ = ["JobTelemetry", "job_tracer"]


@functools.cache
def _process() -> tuple[TurnMetrics, Tracing | None]:
    settings = tracing_from_env()
    redactor = Redactor()
    redact_logs(redactor)
    tracing = start_tracing(settings, redactor=redactor) if settings else None
    return TurnMetrics(registry=None), tracing


def job_tracer() -> Tracer:
    """The tracer of the process's jobs' hubs (none unless `OTEL_*` turn tracing on)."""
    tracing = _process()[1]
    return tracing.tracer if tracing is not None else NO_TRACING


class JobTelemetry:
    """The `TurnObserverSource` of a job's calls, on the job's hub (built with
    `job_tracer`)."""

    def __init__(self, hub: Hub) -> None:
        self.hub = hub
        self.metrics, tracing = _process()
        self.spans: CallSpans | None = None
        if tracing is not None:
            from voicehub.telemetry.call_spans import CallSpans

            self.spans = CallSpans(hub, tracing.tracer)

    def turn_observer(self, desk: str, transport: str, room_id: str) -> TurnObserver:
        histograms = self.metrics.observer(desk, transport)
        if self.spans is None:
            return histograms
        return TurnObservers([histograms, self.spans.turn_spans(room_id, self.hub.clock)])
