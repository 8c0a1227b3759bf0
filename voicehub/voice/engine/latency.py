"""What one caller turn cost, stage by stage, as the engine measured it.

The engine reports a `TurnLatency` for every caller turn it answered to the session's
`TurnObserver` (metrics, traces); stages it could not measure (a typed turn has no speech
end, a scripted model's first token is its whole answer) are None. Times are seconds on the
hub's clock.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

__all__ = ["TurnLatency", "TurnObserver"]


@dataclass(frozen=True, slots=True)
class TurnLatency:
    """The stages of one answered caller turn.

    - `end_of_turn_delay`: end of the caller's last voiced frame to the turn's commit.
    - `stt_final_delay`: end of the caller's speech to the recognizer's final transcript.
    - `llm_ttft`: the reply's start to the model's first token (text or tool call).
    - `tts_ttfb`: the first sentence sent to the TTS to its first audio.
    - `voice_to_voice`: end of the caller's speech to the first agent audio handed to the
      transport.
    """

    room_id: str
    turn: int
    speech_ended_at: float | None
    end_of_turn_delay: float | None = None
    stt_final_delay: float | None = None
    llm_ttft: float | None = None
    tts_ttfb: float | None = None
    voice_to_voice: float | None = None
    interrupted: bool = False


class TurnObserver(Protocol):
    """Receives each answered turn's latency (synchronously, on the event loop: keep it
    cheap, hand slow work elsewhere)."""

    def turn_measured(self, latency: TurnLatency) -> None: ...
