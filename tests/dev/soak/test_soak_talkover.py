"""Talk-over and yield from a call's timeline: which overlaps count as what."""

from __future__ import annotations

from voicehub.client.report import AgentSegment, CallReport, ReceivedEvent, Utterance
from voicehub.voice.events import SAMPLE_RATE, ClearAudio, DeliveryAttempt, DeliveryOutcome
from voicehub_dev.soak.talkover import overlap_of

ROOM = "research:c"


def _attempt(delivery_id: str) -> DeliveryAttempt:
    return DeliveryAttempt(
        delivery_id=delivery_id,
        strategy="wait_for_idle",
        attempt=1,
        kind=None,
        text="r",
        room_id=ROOM,
    )


def _outcome(delivery_id: str, outcome: str) -> DeliveryOutcome:
    return DeliveryOutcome(
        delivery_id=delivery_id,
        strategy="wait_for_idle",
        attempt=1,
        kind=None,
        text="r",
        room_id=ROOM,
        outcome=outcome,
        final=outcome == "delivered",
        error=None,
    )


def _segment(at: float, seconds: float) -> AgentSegment:
    size = int(seconds * SAMPLE_RATE) * 2
    return AgentSegment(first_audio_at=at, start=0, end=size, last_audio_at=at)


def _spoken(started: float, ended: float) -> Utterance:
    return Utterance("caller", ended - started, started_at=started, voice_ended_at=ended)


def test_result_audio_over_a_speaking_caller_is_talkover_and_a_barge_in_is_yield() -> None:
    report = CallReport(desk="research", conversation="c")
    report.events = [
        ReceivedEvent(1.0, _attempt("d1")),
        ReceivedEvent(6.3, ClearAudio()),  # the agent stopped 0.3 s after the barge-in
        ReceivedEvent(6.4, _outcome("d1", "interrupted")),
        ReceivedEvent(9.0, _attempt("d2")),
        ReceivedEvent(12.0, _outcome("d2", "delivered")),
    ]
    report.segments = [
        _segment(0.2, 0.8),  # an ordinary reply before any delivery: never counted
        _segment(5.0, 2.0),  # result d1 from 5.0, cut at 6.3
        _segment(9.5, 2.0),  # result d2, nobody speaking
    ]
    report.utterances = [
        _spoken(0.5, 1.0),  # over the ordinary reply: not a delivery
        _spoken(4.0, 5.5),  # already speaking when d1 started: 500 ms of talk-over
        _spoken(6.0, 8.0),  # barges in at 6.0, the clear comes at 6.3: 300 ms to yield
    ]
    figures = overlap_of(report)
    assert figures.talkover_ms == [500.0]
    assert figures.yield_ms == [300.0]


def test_no_overlap_no_figures() -> None:
    report = CallReport(desk="research", conversation="c")
    report.events = [
        ReceivedEvent(1.0, _attempt("d1")),
        ReceivedEvent(4.0, _outcome("d1", "delivered")),
    ]
    report.segments = [_segment(1.1, 2.0)]
    report.utterances = [_spoken(3.2, 4.0)]  # after the result's audio ended (3.1)
    figures = overlap_of(report)
    assert figures.talkover_ms == [] and figures.yield_ms == []
