"""Talk-over from one call's timeline (client clock): agent delivery audio against the
caller's voiced speech.

A delivery's audio is the agent audio that starts between its `delivery_attempt` and its
outcome. It plays from its first frame for its duration, or until a `clear` cut it.
Overlap with a caller utterance that was already under way when the audio started is
talk-over (the agent spoke over the caller); overlap with an utterance that started during
the audio is a barge-in, and its length is how long the agent took to yield.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from voicehub.client.report import CallReport
from voicehub.voice.events import ClearAudio, DeliveryAttempt, DeliveryOutcome

__all__ = ["CallOverlap", "overlap_of"]


@dataclass
class CallOverlap:
    """Per-call figures in milliseconds."""

    talkover_ms: list[float] = field(default_factory=list)  # one per overlapping pair
    yield_ms: list[float] = field(default_factory=list)


def _delivery_windows(report: CallReport) -> list[tuple[float, float]]:
    windows: list[tuple[float, float]] = []
    opened: dict[str | None, float] = {}
    for received in report.events:
        event = received.event
        if isinstance(event, DeliveryAttempt):
            opened[event.delivery_id] = received.at
        elif isinstance(event, DeliveryOutcome) and event.delivery_id in opened:
            windows.append((opened.pop(event.delivery_id), received.at))
    windows.extend((start, float("inf")) for start in opened.values())
    return windows


def overlap_of(report: CallReport) -> CallOverlap:
    """Talk-over and yield times of the deliveries in `report`."""
    clears = [r.at for r in report.events if isinstance(r.event, ClearAudio)]
    windows = _delivery_windows(report)
    voiced = [
        (u.started_at, u.speech_end)
        for u in report.utterances
        if u.started_at is not None and u.speech_end is not None
    ]
    figures = CallOverlap()
    for segment in report.segments:
        start = segment.first_audio_at
        if not any(low <= start <= high for low, high in windows):
            continue
        end = start + segment.seconds
        end = min([end, *(at for at in clears if at >= start)])
        for spoke_at, stopped_at in voiced:
            overlap = min(end, stopped_at) - max(start, spoke_at)
            if overlap <= 0:
                continue
            target = figures.talkover_ms if spoke_at <= start else figures.yield_ms
            target.append(round(overlap * 1000, 1))
    return figures
