"""Observability of calls: OpenTelemetry traces and per-turn latency metrics.

- `setup`: tracing from the standard `OTEL_*` variables (off unless they configure it), on
  the official SDK and OTLP exporters (HTTP or gRPC), imported only when on.
- `tracer`: voicehub's `Tracer` (`voicehub.core.tracing`) on OpenTelemetry: tool calls and
  delegated tasks trace themselves through the hub; trace context rides in task and
  delivery records, so work finished on one instance and spoken on another is one trace.
- `call_spans`: the spans of a call, its turns and its delivery attempts.
- `export`: the bounded export queue, and the count of spans dropped when the collector is
  away (on /metrics: `span_metrics`).
- `turn_metrics`: per-turn stage histograms by desk and transport.

This is the composition side: the layers below see only `voicehub.core.tracing`.
"""
