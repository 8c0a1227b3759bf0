"""Turning tracing on from the standard `OTEL_*` variables, and off again.

Tracing is off unless the environment configures it, as OpenTelemetry's SDKs read it:

- `OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` set (or
  `OTEL_TRACES_EXPORTER=otlp`) turns OTLP export on; `OTEL_TRACES_EXPORTER=console` prints
  spans; `none`, or `OTEL_SDK_DISABLED=true`, keeps it off.
- `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL` / `OTEL_EXPORTER_OTLP_PROTOCOL`: `http/protobuf`
  (the default) or `grpc`. The exporters read their endpoint, headers, timeout and
  compression from the same variables; `OTEL_SERVICE_NAME` (default `voicehub`) and
  `OTEL_RESOURCE_ATTRIBUTES` name the process, `OTEL_TRACES_SAMPLER` samples.
- `OTEL_BSP_MAX_QUEUE_SIZE`, `OTEL_BSP_MAX_EXPORT_BATCH_SIZE`, `OTEL_BSP_SCHEDULE_DELAY`:
  the export queue (2048 spans), batch (512) and delay (5000 ms).

Nothing imports OpenTelemetry until tracing is on; a missing SDK names the extra to
install (`pip install 'voicehub[otel]'`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict

from voicehub.errors import ConfigError
from voicehub.voice.providers import vendor_import

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter

    from voicehub.core.redaction import Redactor
    from voicehub.telemetry.export import SpanCounts
    from voicehub.telemetry.tracer import OTelTracer

__all__ = ["Tracing", "TracingSettings", "start_tracing", "tracing_from_env"]

Protocol_ = Literal["http/protobuf", "grpc"]
_PROTOCOLS = ("http/protobuf", "grpc")
_EXPORTERS = ("otlp", "console", "none")


class TracingSettings(BaseModel):
    """How spans leave the process (read from the environment by `tracing_from_env`)."""

    model_config = ConfigDict(frozen=True)

    exporter: Literal["otlp", "console"] = "otlp"
    protocol: Protocol_ = "http/protobuf"
    service_name: str = "voicehub"
    max_queue_size: int = 2048
    max_export_batch_size: int = 512
    schedule_delay_millis: float = 5000.0


def tracing_from_env(environ: Mapping[str, str] | None = None) -> TracingSettings | None:
    """The tracing the `OTEL_*` variables ask for; None when they leave it off. A value
    voicehub cannot use raises ConfigError naming the variable and the valid values."""
    env = os.environ if environ is None else environ
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    chosen = env.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if chosen and chosen not in _EXPORTERS:
        raise ConfigError(
            f"OTEL_TRACES_EXPORTER={chosen!r}: voicehub exports traces with {', '.join(_EXPORTERS)}"
        )
    endpoint = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or env.get(
        "OTEL_EXPORTER_OTLP_ENDPOINT"
    )
    if chosen == "none" or (not chosen and not endpoint):
        return None
    name = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
    protocol = env.get(name) or env.get(name := "OTEL_EXPORTER_OTLP_PROTOCOL") or _PROTOCOLS[0]
    if protocol not in _PROTOCOLS:
        raise ConfigError(f"{name}={protocol!r}: expected one of {', '.join(_PROTOCOLS)}")
    return TracingSettings(
        exporter="console" if chosen == "console" else "otlp",
        protocol=protocol,
        service_name=env.get("OTEL_SERVICE_NAME") or "voicehub",
        max_queue_size=_whole(env, "OTEL_BSP_MAX_QUEUE_SIZE", 2048),
        max_export_batch_size=_whole(env, "OTEL_BSP_MAX_EXPORT_BATCH_SIZE", 512),
        schedule_delay_millis=_whole(env, "OTEL_BSP_SCHEDULE_DELAY", 5000),
    )


def _whole(env: Mapping[str, str], name: str, default: int) -> int:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    if not raw.strip().isdigit() or int(raw) < 1:
        raise ConfigError(f"{name}={raw!r}: expected a whole number of at least 1")
    return int(raw)


class Tracing:
    """The process's tracing: the tracer the hub uses, the provider, the drop counts."""

    def __init__(self, provider: TracerProvider, tracer: OTelTracer, counts: SpanCounts) -> None:
        self.provider = provider
        self.tracer = tracer
        self.counts = counts

    def flush(self) -> bool:
        """Export what is queued now (tests, shutdown)."""
        return bool(self.provider.force_flush())

    def shutdown(self) -> None:
        """Stop exporting. Call it off the event loop: a collector that does not answer
        holds it up to the exporter's timeout."""
        self.provider.shutdown()


def start_tracing(
    settings: TracingSettings,
    *,
    exporter: SpanExporter | None = None,
    resource: Mapping[str, Any] | None = None,
    redactor: Redactor | None = None,
) -> Tracing:
    """Tracing on `settings`' exporter (or `exporter`: an in-memory one in tests, the
    bench), its spans scrubbed by `redactor` when given (`voicehub.telemetry.redaction`).
    The provider is this process' own: the global one is left alone."""
    with vendor_import("opentelemetry-sdk", "otel"):
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider

        from voicehub.telemetry.export import BoundedSpanProcessor, SpanCounts
        from voicehub.telemetry.tracer import OTelTracer
    counts = SpanCounts()
    chosen = exporter if exporter is not None else _exporter(settings)
    if redactor is not None:
        from voicehub.telemetry.redaction import RedactingExporter

        chosen = RedactingExporter(chosen, redactor)
    attributes = {"service.name": settings.service_name, **(resource or {})}
    provider = TracerProvider(resource=Resource.create(attributes))
    provider.add_span_processor(
        BoundedSpanProcessor(
            chosen,
            counts,
            max_queue_size=settings.max_queue_size,
            max_export_batch_size=settings.max_export_batch_size,
            schedule_delay_millis=settings.schedule_delay_millis,
        )
    )
    return Tracing(provider, OTelTracer(provider.get_tracer("voicehub")), counts)


def _exporter(settings: TracingSettings) -> SpanExporter:
    if settings.exporter == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter()
    if settings.protocol == "grpc":
        with vendor_import("opentelemetry-exporter-otlp-proto-grpc", "otel"):
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
                OTLPSpanExporter as GrpcExporter,
            )
        return GrpcExporter()
    with vendor_import("opentelemetry-exporter-otlp-proto-http", "otel"):
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    return OTLPSpanExporter()
