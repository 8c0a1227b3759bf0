"""The values one pipeline call is built from, each a frozen group of what belongs together.

`PipelineVoiceSession` takes the desk's side of the call (`CallAgent`), its speech providers
(`CallSpeech`) and what judges its turns (`TurnJudges`); it builds the call's `CallParts`
(what every collaborator reports to) once and hands them to each collaborator at
construction, so nothing is patched in afterwards.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from voicehub.voice.turns.words import ends_open

if TYPE_CHECKING:
    from voicehub.agents.agent import Agent
    from voicehub.agents.tools import Tool
    from voicehub.core.clock import Clock
    from voicehub.voice.activity import VoiceActivity
    from voicehub.voice.denoise import FrameFilter
    from voicehub.voice.engine.history import CallHistory
    from voicehub.voice.engine.records import CallRecords
    from voicehub.voice.session import CallRuntime
    from voicehub.voice.turns.model import EndOfTurnModel

__all__ = ["CallAgent", "CallParts", "CallSpeech", "TurnJudges"]


@dataclass(frozen=True, slots=True)
class CallAgent:
    """The desk's side of a call: the agent that answers first, the call's tools beyond
    the agent's own, the greeting it opens with, and `reply_gate()`: while it returns
    False, caller turns get no reply, only a room transcript (ask_user by voice)."""

    agent: Agent
    extra_tools: Sequence[Tool] = ()
    greeting: str | None = None
    reply_gate: Callable[[], bool] | None = None


@dataclass(frozen=True, slots=True)
class CallSpeech:
    """The call's speech providers: livekit plugins (or ours) used through their public
    interfaces. `voices` maps an agent's `voice` name to a TTS; `tts` is the default.
    `caller_filter` filters the caller's audio the VAD and the speech evidence hear, not the
    recognizer's (noise suppression, `voicehub.voice.denoise`; the call's own, closed with
    it)."""

    stt: Any
    tts: Any
    vad: Any
    voices: Mapping[str, Any] = field(default_factory=dict)
    caller_filter: FrameFilter | None = None


@dataclass(frozen=True, slots=True)
class TurnJudges:
    """What judges the caller's turns beyond silence: the end-of-turn model (for turn mode
    "model"), `words_open(text)`, whether words stop mid-request (a desk's half
    requests), and `words_complete(text)`, whether they make a whole request the desk
    answers (None: no words do; the model alone then holds a turn to the ceiling)."""

    end_of_turn: EndOfTurnModel | None = None
    words_open: Callable[[str], bool] = ends_open
    words_complete: Callable[[str], bool] | None = None


@dataclass(frozen=True, slots=True)
class CallParts:
    """What every collaborator of one call reports to: its runtime and room, the clock,
    the caller's and agent's activity, the records and the conversation history."""

    hub: CallRuntime
    room_id: str
    activity: VoiceActivity
    records: CallRecords
    history: CallHistory

    @property
    def clock(self) -> Clock:
        return self.hub.clock
