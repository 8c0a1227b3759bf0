"""Spans around the runtime's own work, and the trace context a task or delivery keeps.

The layers below the composition side trace through this protocol only: a tool call
(`Tool.invoke`), a delegated task in its child room (`Delegation`), and the trace context
stamped on a delivery record (`Hub.deliver`), which is how a result finished on one
instance and spoken on another stays one trace. `voicehub.telemetry` implements it on
OpenTelemetry; nothing here imports a vendor SDK.

`NO_TRACING`, the default, is off: callers check `tracer.enabled` first, so tracing that
is not configured costs one attribute read per traced step.

A carrier is the W3C trace context of a span as text headers (`{"traceparent": ...}`): it
is stored in a record's metadata under `TRACE_KEY` and hands the trace on.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from typing import Protocol

__all__ = ["NO_TRACING", "TRACE_KEY", "AttributeValue", "Span", "Tracer"]

AttributeValue = str | bool | int | float
TRACE_KEY = "trace"
"""The metadata key under which tasks and deliveries keep their trace context."""


class Span(Protocol):
    """One timed step of work."""

    def set_attribute(self, key: str, value: AttributeValue) -> None: ...

    def end(self, error: str | None = None) -> None:
        """Close the span; `error` marks it failed with that description."""
        ...

    def carrier(self) -> dict[str, str]:
        """The span's trace context as W3C headers ({} when off)."""
        ...

    def activate(self) -> AbstractContextManager[None]:
        """Make the span the parent of spans started inside the block (and in the asyncio
        tasks started there)."""
        ...


class Tracer(Protocol):
    """Starts spans; `enabled` is False when tracing is off."""

    @property
    def enabled(self) -> bool: ...

    def start(
        self,
        name: str,
        *,
        room_id: str,
        attributes: Mapping[str, AttributeValue] | None = None,
        parent: Mapping[str, str] | None = None,
    ) -> Span:
        """Start a span about work in `room_id`: under `parent` (a carrier) when given,
        else under the active span of that call, else under the room's own (its call or
        its task)."""
        ...

    def carrier(self, room_id: str) -> dict[str, str]:
        """Where work started now for `room_id` belongs (to store with a record)."""
        ...


class _NoSpan:
    def set_attribute(self, key: str, value: AttributeValue) -> None:
        pass

    def end(self, error: str | None = None) -> None:
        pass

    def carrier(self) -> dict[str, str]:
        return {}

    def activate(self) -> AbstractContextManager[None]:
        return _nothing()


@contextmanager
def _nothing() -> Iterator[None]:
    yield


class _NoTracing:
    enabled = False

    def start(
        self,
        name: str,
        *,
        room_id: str,
        attributes: Mapping[str, AttributeValue] | None = None,
        parent: Mapping[str, str] | None = None,
    ) -> Span:
        return _NO_SPAN

    def carrier(self, room_id: str) -> dict[str, str]:
        return {}


_NO_SPAN = _NoSpan()
NO_TRACING: Tracer = _NoTracing()
