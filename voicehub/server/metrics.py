"""Prometheus metrics of one server: every metric voicehub exports is defined here.

    metrics = ServerMetrics(clock)
    hub = Hub(store=metrics.timed(store)) # store operation latency
    CallMetrics(metrics, board)           # hub hooks + the calls (`voicehub.server.call_metrics`)
    metrics.render()                      # the text exposition format, for GET /metrics

Each app has its own `CollectorRegistry` (not the process-wide default), so several apps in
one test process count independently. The figures come from the hub's hooks (tasks,
deliveries) and from the call lifecycle (`CallObserver` of `voicehub.server.calls`): a
call's transport is wrapped by a `CallMeter` that sees the caller's and the agent's turns
as they go out on the wire. Nothing else in the code base counts anything.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from voicehub.server.decoder_metrics import DecoderPoolCollector, WhisperQueueCollector
from voicehub.server.timed_store import TimedStore
from voicehub.telemetry.turn_metrics import TurnMetrics

if TYPE_CHECKING:
    from voicehub.core.clock import Clock
    from voicehub.core.store.base import Store

__all__ = ["CONTENT_TYPE", "ServerMetrics"]

log = logging.getLogger("voicehub.server")

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

# Bucket edges in seconds, chosen around what each figure is expected to be.
_V2V_BUCKETS = (0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 2.0, 3.0, 5.0, 8.0)
_LAG_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 300.0)
_TASK_BUCKETS = (0.1, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 300.0, 1800.0)
_STORE_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0)
_LOOP_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0)


class ServerMetrics:
    """The server's metrics on a registry of their own, fed by `CallMetrics` and `timed`."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.registry = registry = CollectorRegistry()
        self.active_calls = Gauge(
            "voicehub_active_calls", "Calls connected now.", registry=registry
        )
        self.calls = Counter(
            "voicehub_calls",
            "Calls accepted, by desk and transport (websocket, twilio, webrtc).",
            ["desk", "transport"],
            registry=registry,
        )
        self.calls_refused = Counter(
            "voicehub_calls_refused",
            "Calls refused before they started, by entry point (or transport) and reason "
            "(draining; session_failed: the desk's call could not start).",
            ["entry", "reason"],
            registry=registry,
        )
        self.turns = Counter(
            "voicehub_turns",
            "Finished turns (final transcripts), by desk and role (user, assistant).",
            ["desk", "role"],
            registry=registry,
        )
        self.voice_to_voice = Histogram(
            "voicehub_voice_to_voice_seconds",
            "Voice-to-voice of each answered caller turn: from the end of the caller's speech "
            "(their last voiced audio) to the first agent audio sent (the voice engine's "
            "voice_to_voice stage).",
            ["desk"],
            buckets=_V2V_BUCKETS,
            registry=registry,
        )
        self.talk_over = Counter(
            "voicehub_talk_over",
            "Agent speech segments begun while the caller was speaking, by desk and what "
            "the agent began to say (reply, delivery).",
            ["desk", "speech"],
            registry=registry,
        )
        self.barge_ins = Counter(
            "voicehub_barge_ins",
            "Times the caller began speaking while the agent spoke, by desk and what the "
            "agent was saying (reply, delivery).",
            ["desk", "speech"],
            registry=registry,
        )
        self.deliveries = Counter(
            "voicehub_deliveries",
            "Delivery outcomes (delivered, interrupted, held, expired, failed) by strategy.",
            ["strategy", "outcome"],
            registry=registry,
        )
        self.delivery_lag = Histogram(
            "voicehub_delivery_lag_beyond_buffer_seconds",
            "At a result's first attempt: seconds past the moment its strategy allowed it "
            "(arrival, or the caller's reconnect for a held result, plus the buffer).",
            ["strategy"],
            buckets=_LAG_BUCKETS,
            registry=registry,
        )
        self.tasks = Counter(
            "voicehub_tasks", "Finished background tasks by status.", ["status"], registry=registry
        )
        self.tasks_running = Gauge(
            "voicehub_tasks_running", "Background tasks running here now.", registry=registry
        )
        self.task_duration = Histogram(
            "voicehub_task_duration_seconds",
            "From delegation to the end of a background task, by status.",
            ["status"],
            buckets=_TASK_BUCKETS,
            registry=registry,
        )
        self.store_latency = Histogram(
            "voicehub_store_operation_seconds",
            "Latency of store operations, by operation.",
            ["operation"],
            buckets=_STORE_BUCKETS,
            registry=registry,
        )
        self.loop_lag = Histogram(
            "voicehub_event_loop_lag_seconds",
            "How late the event loop woke the lag probe's timer (`LoopHealth`, every 0.1 s).",
            buckets=_LOOP_BUCKETS,
            registry=registry,
        )
        self.draining = Gauge(
            "voicehub_draining", "1 while the server drains (SIGTERM).", registry=registry
        )
        # per-turn stage latency, fed by each call's voice engine (`CallTelemetry`)
        self.turn_stages = TurnMetrics(registry)
        registry.register(DecoderPoolCollector())
        registry.register(WhisperQueueCollector())

    # -- wiring ------------------------------------------------------------------------------

    def timed(self, store: Store) -> TimedStore:
        """`store` with each operation's latency recorded."""
        return TimedStore(store, self.store_latency.labels)

    def render(self) -> bytes:
        """The metrics in Prometheus' text format."""
        return generate_latest(self.registry)

    def refused(self, entry: str, reason: str) -> None:
        self.calls_refused.labels(entry, reason).inc()
