"""Per-turn latency on /metrics: one histogram, a series per desk, transport and stage.

The voice engine reports every answered caller turn's stages (`TurnLatency`) to the
session's `TurnObserver`; `TurnMetrics.observer(desk, transport)` is one for a call, with
its labelled series resolved once, so a turn costs a few `observe` calls. Stages the engine
could not measure (None) are left out of their series, not counted as zero.

    voicehub_turn_stage_seconds{desk, transport, stage}   stage: end_of_turn_delay,
        stt_final_delay, llm_ttft, tts_ttfb, voice_to_voice
    voicehub_turns_answered_total{desk, transport, interrupted}
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from prometheus_client import Counter, Histogram

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from voicehub.voice.engine.latency import TurnLatency, TurnObserver

__all__ = ["STAGES", "TurnMetrics", "TurnObservers"]

STAGES = ("end_of_turn_delay", "stt_final_delay", "llm_ttft", "tts_ttfb", "voice_to_voice")
# Seconds; the stages run from tens of milliseconds (a first token) to seconds (a slow turn).
_BUCKETS = (0.025, 0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0)


class TurnMetrics:
    """The turn histograms, on `registry` (None: the process default, as the LiveKit
    worker's job processes use in Prometheus' multiprocess mode)."""

    def __init__(self, registry: CollectorRegistry | None) -> None:
        self.stage_seconds = Histogram(
            "voicehub_turn_stage_seconds",
            "Each answered caller turn's latency by stage (end_of_turn_delay, "
            "stt_final_delay, llm_ttft, tts_ttfb, voice_to_voice), as the voice engine "
            "measured it, by desk and transport.",
            ["desk", "transport", "stage"],
            buckets=_BUCKETS,
            registry=registry,
        )
        self.answered = Counter(
            "voicehub_turns_answered",
            "Caller turns the agent answered, by desk, transport and whether the answer was "
            "interrupted.",
            ["desk", "transport", "interrupted"],
            registry=registry,
        )

    def observer(self, desk: str, transport: str) -> TurnStageObserver:
        """A `TurnObserver` counting one call's turns into its desk's and transport's series."""
        return TurnStageObserver(self, desk, transport)


class TurnStageObserver:
    """Feeds one call's turns into the histograms."""

    def __init__(self, metrics: TurnMetrics, desk: str, transport: str) -> None:
        self._series = [
            (stage, metrics.stage_seconds.labels(desk, transport, stage)) for stage in STAGES
        ]
        self._answered = metrics.answered.labels(desk, transport, "false")
        self._interrupted = metrics.answered.labels(desk, transport, "true")

    def turn_measured(self, latency: TurnLatency) -> None:
        for stage, series in self._series:
            value = getattr(latency, stage)
            if value is not None:
                series.observe(max(0.0, value))
        (self._interrupted if latency.interrupted else self._answered).inc()


class TurnObservers:
    """Several observers as one (metrics and traces of the same call)."""

    def __init__(self, observers: Sequence[TurnObserver]) -> None:
        self.observers = tuple(observers)

    def turn_measured(self, latency: TurnLatency) -> None:
        for observer in self.observers:
            observer.turn_measured(latency)
