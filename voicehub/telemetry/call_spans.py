"""The spans of a call: the call itself, each answered turn, each delivery attempt.

`CallSpans` is the composition side's half of tracing (tool calls and tasks trace
themselves through the hub's tracer):

- a call span from the call's start to its end, bound to the room, so what happens in the
  conversation while it is live here hangs under it;
- a turn span per answered caller turn, timed from the end of the caller's speech, with the
  engine's stage figures as attributes (`TurnLatency`);
- a delivery span per attempt to speak a result (BEFORE_DELIVER to AFTER_DELIVER), under
  the trace context the delivery record carries (the dispatch that produced it, possibly on
  another instance) and linked to the call it was spoken into; a result held or expired
  without an attempt gets a span of its own for that outcome.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Link, Status, StatusCode

from voicehub.core.hooks import HookContext, HookTrigger
from voicehub.core.tracing import TRACE_KEY
from voicehub.telemetry.tracer import OTelTracer, root_room

if TYPE_CHECKING:
    from voicehub.core.clock import Clock
    from voicehub.core.events import Event
    from voicehub.hub import Hub
    from voicehub.voice.engine.latency import TurnLatency

__all__ = ["CallSpans", "TurnSpans"]

_TURN_STAGES = ("end_of_turn_delay", "stt_final_delay", "llm_ttft", "tts_ttfb", "voice_to_voice")


class CallSpans:
    """Call, turn and delivery spans for the calls of one hub."""

    def __init__(self, hub: Hub, tracer: OTelTracer) -> None:
        self.hub = hub
        self.tracer = tracer
        self._calls: dict[str, trace.Span] = {}  # room id -> the live call's span
        self._attempts: dict[str, trace.Span] = {}  # delivery id -> its open attempt
        hooks = hub.hooks
        hooks.add(HookTrigger.BEFORE_DELIVER, self._attempt_started, name="tracing")
        hooks.add(HookTrigger.AFTER_DELIVER, self._attempt_ended, name="tracing")

    # -- calls -------------------------------------------------------------------------

    def call_started(self, room_id: str, attributes: dict[str, Any]) -> None:
        """A call of `room_id` went live on this process."""
        span = self.tracer.tracer.start_span(
            f"call {attributes.get('voicehub.desk', '')}".strip(),
            context=Context(),  # each call is a trace of its own
            attributes={"voicehub.room.id": room_id, **attributes},
        )
        self._calls[room_id] = span
        self.tracer.bind(room_id, span)

    def call_ended(self, room_id: str) -> None:
        span = self._calls.pop(room_id, None)
        if span is not None:
            self.tracer.unbind(room_id, span)
            span.end()

    def turn_spans(self, room_id: str, clock: Clock) -> TurnSpans:
        """A `TurnObserver` making one span per answered turn of `room_id`'s call."""
        return TurnSpans(self, room_id, clock)

    # -- deliveries (hub hooks) ----------------------------------------------------------

    async def _attempt_started(self, event: Event, context: HookContext) -> None:
        meta = event.metadata
        delivery_id = str(meta.get("delivery_id"))
        attributes: dict[str, Any] = {
            "voicehub.delivery.id": delivery_id,
            "voicehub.delivery.strategy": str(meta.get("strategy")),
            "voicehub.delivery.attempt": int(meta.get("attempt") or 0),
            "voicehub.room.id": event.room_id,
        }
        wait = self._waited(event.room_id, delivery_id)
        if wait is not None:
            attributes["voicehub.delivery.wait_seconds"] = wait
        self._attempts[delivery_id] = self._delivery_span("delivery attempt", event, attributes)

    async def _attempt_ended(self, event: Event, context: HookContext) -> None:
        meta = event.metadata
        delivery_id = str(meta.get("delivery_id"))
        outcome = str(meta.get("outcome"))
        span = self._attempts.pop(delivery_id, None)
        if span is None:  # held or expired: no attempt was made
            span = self._delivery_span(
                f"delivery {outcome}",
                event,
                {
                    "voicehub.delivery.id": delivery_id,
                    "voicehub.delivery.strategy": str(meta.get("strategy")),
                    "voicehub.room.id": event.room_id,
                },
            )
        span.set_attribute("voicehub.delivery.outcome", outcome)
        span.set_attribute("voicehub.delivery.final", bool(meta.get("final")))
        if outcome == "failed":
            span.set_status(Status(StatusCode.ERROR, str(meta.get("error") or "failed")))
        span.end()

    def _delivery_span(self, name: str, event: Event, attributes: dict[str, Any]) -> trace.Span:
        stored = event.metadata.get(TRACE_KEY)
        context = self.tracer.parent_context(
            event.room_id, stored if isinstance(stored, dict) else None
        )
        call = self._calls.get(root_room(event.room_id))
        links = [Link(call.get_span_context())] if call is not None else None
        return self.tracer.tracer.start_span(
            name, context=context, attributes=attributes, links=links
        )

    def _waited(self, room_id: str, delivery_id: str) -> float | None:
        """Seconds since the result arrived (or was released to this call), if known."""
        now = self.hub.clock.now()
        for record in self.hub.delivery.pending(room_id):
            if record.id == delivery_id and 0.0 < record.arrived_at <= now:
                return round(now - record.arrived_at, 6)
        return None


class TurnSpans:
    """One span per answered turn of a call, from the end of the caller's speech."""

    def __init__(self, spans: CallSpans, room_id: str, clock: Clock) -> None:
        self.spans = spans
        self.room_id = room_id
        self.clock = clock

    def turn_measured(self, latency: TurnLatency) -> None:
        now_clock, now_ns = self.clock.now(), time.time_ns()

        def wall(at: float) -> int:
            return now_ns - int((now_clock - at) * 1e9)

        started = latency.speech_ended_at
        ended = now_ns
        if started is not None and latency.voice_to_voice is not None:
            ended = wall(started + latency.voice_to_voice)
        attributes: dict[str, Any] = {
            "voicehub.room.id": self.room_id,
            "voicehub.turn": latency.turn,
            "voicehub.turn.interrupted": latency.interrupted,
        }
        for stage in _TURN_STAGES:
            value = getattr(latency, stage)
            if value is not None:
                attributes[f"voicehub.turn.{stage}_seconds"] = round(value, 6)
        tracer = self.spans.tracer
        span = tracer.tracer.start_span(
            f"turn {latency.turn}",
            context=tracer.parent_context(self.room_id, None),
            attributes=attributes,
            start_time=wall(started) if started is not None else now_ns,
        )
        span.end(end_time=max(ended, wall(started) if started is not None else ended))
