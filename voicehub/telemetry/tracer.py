"""voicehub's `Tracer` (`voicehub.core.tracing`) on an OpenTelemetry tracer.

Where a span hangs, in order: the carrier it is given (a task or delivery record's stored
trace context); the span active in this asyncio context (`Span.activate`: a tool call's
span is the parent of the tasks it delegates, a task's span of its worker's tool calls),
if it belongs to the same conversation; else the span bound to the room (`bind`: its call,
or for a child room its task), or to the root room of a child room. With none of them, the
span starts a trace of its own.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from voicehub.core.tracing import AttributeValue

__all__ = ["OTelSpan", "OTelTracer", "root_room"]

_PROPAGATOR = TraceContextTextMapPropagator()
# The conversation (root room) of the span made active in this asyncio context.
_ACTIVE_ROOM: ContextVar[str | None] = ContextVar("voicehub_active_room", default=None)


def root_room(room_id: str) -> str:
    """Child rooms are `<parent>::task-<n>`: the conversation a room belongs to."""
    return room_id.split("::", 1)[0]


class OTelSpan:
    """A `voicehub.core.tracing.Span` on an OpenTelemetry span."""

    __slots__ = ("room_id", "span")

    def __init__(self, span: trace.Span, room_id: str) -> None:
        self.span = span
        self.room_id = room_id

    def set_attribute(self, key: str, value: AttributeValue) -> None:
        self.span.set_attribute(key, value)

    def end(self, error: str | None = None) -> None:
        if error is not None:
            self.span.set_status(Status(StatusCode.ERROR, error[:500]))
        self.span.end()

    def carrier(self) -> dict[str, str]:
        carrier: dict[str, str] = {}
        _PROPAGATOR.inject(carrier, context=trace.set_span_in_context(self.span))
        return carrier

    def activate(self) -> AbstractContextManager[None]:
        return self._active()

    @contextmanager
    def _active(self) -> Iterator[None]:
        token = _ACTIVE_ROOM.set(root_room(self.room_id))
        try:
            with trace.use_span(self.span, end_on_exit=False):
                yield
        finally:
            _ACTIVE_ROOM.reset(token)


class OTelTracer:
    """Starts spans on `tracer` and knows the span of each room this process serves."""

    enabled = True

    def __init__(self, tracer: trace.Tracer) -> None:
        self.tracer = tracer
        self._rooms: dict[str, trace.Span] = {}

    # -- the room bindings (composition side) -------------------------------------------

    def bind(self, room_id: str, span: trace.Span) -> None:
        """Spans about `room_id` (and its child rooms) with no better parent go under
        `span` (the call's span, while the call is live here)."""
        self._rooms[room_id] = span

    def unbind(self, room_id: str, span: trace.Span) -> None:
        if self._rooms.get(room_id) is span:
            del self._rooms[room_id]

    def bound(self, room_id: str) -> trace.Span | None:
        return self._rooms.get(room_id) or self._rooms.get(root_room(room_id))

    # -- voicehub.core.tracing.Tracer ----------------------------------------------------

    def start(
        self,
        name: str,
        *,
        room_id: str,
        attributes: Mapping[str, AttributeValue] | None = None,
        parent: Mapping[str, str] | None = None,
    ) -> OTelSpan:
        span = self.tracer.start_span(
            name, context=self.parent_context(room_id, parent), attributes=attributes
        )
        return OTelSpan(span, room_id)

    def carrier(self, room_id: str) -> dict[str, str]:
        carrier: dict[str, str] = {}
        _PROPAGATOR.inject(carrier, context=self.parent_context(room_id, None))
        return carrier

    def parent_context(self, room_id: str, parent: Mapping[str, str] | None) -> Context | None:
        """The context a new span about `room_id` starts in (None: a new trace)."""
        if parent:
            extracted = _PROPAGATOR.extract(dict(parent))
            if trace.get_current_span(extracted).get_span_context().is_valid:
                return extracted
        if _ACTIVE_ROOM.get() == root_room(room_id):
            return trace.set_span_in_context(trace.get_current_span())
        bound = self.bound(room_id)
        if bound is not None:
            return trace.set_span_in_context(bound)
        return Context()  # empty: the span starts a trace, whatever is current elsewhere
