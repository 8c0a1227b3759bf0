"""The server's observability of calls: traces (when `OTEL_*` turn them on) and the
per-turn latency histograms, wired to the switchboard and the session factory.

    telemetry = CallTelemetry(hub, metrics, tracing)   # tracing: None, or started
    lifecycle.observe(telemetry)
    lifecycle.observe_turns(telemetry)
    ...
    await telemetry.aclose()

It sees each call start and end (a `CallObserver`: the call's span) and gives each call's
voice session a `TurnObserver` labelled with its desk and transport (the turn histograms,
and a span per turn).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from typing import TYPE_CHECKING

from voicehub.telemetry.span_metrics import SpanCountCollector
from voicehub.telemetry.turn_metrics import TurnObservers

if TYPE_CHECKING:
    from prometheus_client import Histogram

    from voicehub.hub import Hub
    from voicehub.server.calls import LiveCall
    from voicehub.server.metrics import ServerMetrics
    from voicehub.telemetry.call_spans import CallSpans
    from voicehub.telemetry.setup import Tracing
    from voicehub.voice.engine.latency import TurnLatency, TurnObserver
    from voicehub.voice.transport import CallTransport

__all__ = ["CallTelemetry", "VoiceToVoice"]

log = logging.getLogger("voicehub.server")
_SHUTDOWN_WAIT = 3.0  # seconds the last export may take at shutdown (a collector away)


class CallTelemetry:
    """Call spans and turn observers for one server: a `CallObserver` (each call's span)
    and the calls' `TurnObserverSource` (the server subscribes it to both). `tracing` is
    on when `OTEL_*` turn it on (the hub then has its tracer too)."""

    def __init__(self, hub: Hub, metrics: ServerMetrics, tracing: Tracing | None) -> None:
        self.hub = hub
        self.metrics = metrics
        self.tracing = tracing
        self.spans: CallSpans | None = None
        if tracing is not None:
            from voicehub.telemetry.call_spans import CallSpans

            self.spans = CallSpans(hub, tracing.tracer)
        metrics.registry.register(SpanCountCollector(tracing.counts if tracing else None))

    async def aclose(self) -> None:
        """Export what is left, waiting at most a few seconds for the collector. The export
        runs on a daemon thread of its own: the loop's executor would hold the process' exit
        until a collector that does not answer timed out."""
        if self.tracing is None:
            return
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()

        def finished() -> None:
            if not done.done():
                done.set_result(None)

        def shut_down() -> None:
            try:
                assert self.tracing is not None
                self.tracing.shutdown()
            finally:
                with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                    loop.call_soon_threadsafe(finished)

        threading.Thread(target=shut_down, name="voicehub-trace-shutdown", daemon=True).start()
        try:
            async with asyncio.timeout(_SHUTDOWN_WAIT):
                await done
        except TimeoutError:
            log.warning("tracing: the collector did not take the last spans in time")

    # -- CallObserver ------------------------------------------------------------------

    def call_started(self, call: LiveCall, transport: CallTransport) -> CallTransport:
        if self.spans is not None:
            attributes = {
                "voicehub.desk": call.desk.name,
                "voicehub.transport": call.kind,
                "voicehub.conversation": call.conversation,
                "voicehub.instance": self.hub.instance_id,
            }
            self.spans.call_started(call.room_id, attributes)
        return transport

    def call_accepted(self, call: LiveCall) -> None:
        pass

    def call_ended(self, call: LiveCall) -> None:
        if self.spans is not None:
            self.spans.call_ended(call.room_id)

    # -- TurnObserverSource ----------------------------------------------------------------

    def turn_observer(self, desk: str, transport: str, room_id: str) -> TurnObserver:
        """The observer of one call's turns: its histograms, and its turn spans."""
        histograms = self.metrics.turn_stages.observer(desk, transport)
        observers: list[TurnObserver] = [
            histograms,
            VoiceToVoice(self.metrics.voice_to_voice.labels(desk)),
        ]
        if self.spans is not None:
            observers.append(self.spans.turn_spans(room_id, self.hub.clock))
        return TurnObservers(observers)


class VoiceToVoice:
    """Feeds `voicehub_voice_to_voice_seconds` of one desk: each answered turn's
    voice-to-voice as the engine measured it (end of the caller's last voiced audio to
    the first agent audio), the one definition the CLI and the docs use too."""

    def __init__(self, series: Histogram) -> None:
        self._series = series

    def turn_measured(self, latency: TurnLatency) -> None:
        if latency.voice_to_voice is not None:
            self._series.observe(max(0.0, latency.voice_to_voice))
