"""livekit's tracer, without its per-span work while no tracer provider records spans.

livekit-agents (1.8.9, pinned) opens a few dozen spans per turn through its
`_DynamicTracer` (the reply, the LLM and TTS nodes, the user turn...). Each `start_span`,
`start_as_current_span` and `use_span` first binds its arguments to a signature
(`inspect.Signature.bind`, several microseconds) to add the conversation id to the span's
attributes and take over exception recording. While the tracer underneath is
OpenTelemetry's no-op one (no provider set, globally or through livekit's
`set_tracer_provider`: voicehub sets none), the span it returns records nothing, so the
attributes are dropped and there is no exception to record on it: the calls here go
straight to that tracer (and a non-recording span straight to OpenTelemetry's `use_span`),
with the same arguments. Once a provider records, livekit's own methods run. The check is
made at every span, so a provider set later takes effect at once (a recorded exception's
stack trace then has one frame of this module more).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from voicehub.voice.providers import vendor_import

with vendor_import("livekit-agents"):
    from livekit.agents.telemetry import traces
    from opentelemetry import trace as trace_api
    from opentelemetry.util._decorator import _agnosticcontextmanager

__all__ = [
    "install",
    "livekit_tracer_methods",
    "records",
    "start_as_current_span",
    "start_span",
    "use_span",
]

_Tracer = traces._DynamicTracer
livekit_tracer_methods: dict[str, Any] = {
    name: getattr(_Tracer, name) for name in ("start_span", "start_as_current_span", "use_span")
}


def _no_op_tracer(tracer: _Tracer) -> trace_api.Tracer | None:
    """The no-op tracer under livekit's tracer, or None when spans are recorded."""
    inner: trace_api.Tracer = tracer._tracer
    if type(inner) is trace_api.ProxyTracer:
        inner = inner._tracer  # the global provider's tracer once one is set
    return inner if type(inner) is trace_api.NoOpTracer else None


def records(tracer: _Tracer) -> bool:
    """Whether livekit's tracer records spans now (a provider is set)."""
    return _no_op_tracer(tracer) is None


def start_span(self: _Tracer, *args: Any, **kwargs: Any) -> trace_api.Span:
    """livekit's `start_span`; straight to the no-op tracer while nothing records."""
    no_op = _no_op_tracer(self)
    if no_op is None:
        span: trace_api.Span = livekit_tracer_methods["start_span"](self, *args, **kwargs)
        return span
    return no_op.start_span(*args, **kwargs)


@_agnosticcontextmanager
def start_as_current_span(self: _Tracer, *args: Any, **kwargs: Any) -> Iterator[trace_api.Span]:
    """livekit's `start_as_current_span` (a context manager and a decorator, decided at
    each entry); straight to the no-op tracer while nothing records."""
    no_op = _no_op_tracer(self)
    if no_op is None:
        manager = livekit_tracer_methods["start_as_current_span"](self, *args, **kwargs)
    else:
        manager = no_op.start_as_current_span(*args, **kwargs)
    with manager as span:
        yield span


def use_span(self: _Tracer, *args: Any, **kwargs: Any) -> Any:
    """livekit's `use_span`; OpenTelemetry's own for a span that records nothing (both
    record an exception only on a recording span)."""
    span = args[0] if args else kwargs.get("span")
    if isinstance(span, trace_api.Span) and not span.is_recording():
        return trace_api.use_span(*args, **kwargs)
    return livekit_tracer_methods["use_span"](self, *args, **kwargs)


def install() -> None:
    """Replace the three methods on livekit's tracer class (idempotent)."""
    _Tracer.start_span = start_span  # type: ignore[method-assign]
    _Tracer.start_as_current_span = start_as_current_span  # type: ignore[method-assign]
    _Tracer.use_span = use_span  # type: ignore[method-assign]
