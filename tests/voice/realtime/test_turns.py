"""The realtime session reports each answered caller turn's voice-to-voice to its
`TurnObserver`: from the model's end of the caller's speech to the answer's first audio
handed to the transport, on the hub's clock (the fake Realtime server, the real SDK)."""

from __future__ import annotations

from tests.support.speech import spoken
from tests.support.waiting import until_activity
from tests.voice.realtime.test_session import Harness, call, speak
from voicehub.core.clock import VirtualClock
from voicehub.voice.engine.latency import TurnLatency

__all__ = ["call"]

RATE = 16000


class Turns:
    def __init__(self) -> None:
        self.measured: list[TurnLatency] = []

    def turn_measured(self, latency: TurnLatency) -> None:
        self.measured.append(latency)


async def test_each_answered_turn_reports_its_voice_to_voice(call: Harness) -> None:
    turns = Turns()
    session, _, activity = await call.start(ack="immediate", turn_observer=turns)
    assert isinstance(call.hub.clock, VirtualClock)
    await speak(session, spoken("hello there", rate=RATE))
    await until_activity(activity, lambda s: s.agent_speaking)
    [turn] = turns.measured  # at the answer's first audio
    await until_activity(activity, lambda s: s.is_idle)
    assert turns.measured == [turn]  # once per turn
    assert (turn.room_id, turn.turn) == ("call-1", 1)
    assert turn.speech_ended_at is not None and turn.voice_to_voice is not None
    assert 0.0 <= turn.voice_to_voice < 5.0
    assert turn.llm_ttft is None and turn.tts_ttfb is None  # the model measures no stage
