"""Helpers for desk calls with the real offline stack: `start_pipeline_call` on a desk from
`channels/`, the caller's words synthesized by Piper and pushed as 20 ms frames faster than
real time, and waits on what the transport receives (never on the wall clock)."""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from tests.support.speech import spoken
from voicehub.desks.desk import Desk, load_desks
from voicehub.desks.pipeline_call import start_pipeline_call
from voicehub.desks.voice_stack import CallSpec
from voicehub.hub import Hub
from voicehub.testing import MemoryTransport
from voicehub.voice.audio import frame_bytes
from voicehub.voice.engine.call_parts import CallSpeech
from voicehub.voice.engine.session import PipelineVoiceSession
from voicehub.voice.events import Transcript
from voicehub.voice.providers.offline import PiperTTS, PocketSphinxSTT, load_vad

RATE = 16000
FRAME = frame_bytes(RATE)
CHANNELS = Path(__file__).resolve().parents[2] / "channels"


@functools.cache
def offline_models() -> dict[str, Any]:
    """The shared plugins, loaded once per test process."""
    stt = PocketSphinxSTT()
    stt.prewarm()
    piper = PiperTTS(sample_rate=22050)
    piper.prewarm()
    # The desks' "espeak" voice is played by a second Piper instance: the switch is visible
    # on the agent, and eSpeak's C library (which keeps state between utterances) stays out.
    return {
        "stt": stt,
        "vad": load_vad("silero"),
        "tts": piper,
        "espeak": PiperTTS(sample_rate=RATE),
    }


@functools.cache
def example_desks() -> dict[str, Desk]:
    return load_desks(CHANNELS)


@dataclass
class DeskCallHarness:
    """One call: the session `start_pipeline_call` returned and its in-memory transport."""

    session: PipelineVoiceSession
    transport: MemoryTransport

    async def caller_says(self, words: str, silence: float = 0.8) -> None:
        """The caller says `words`, then stays silent."""
        audio = spoken(words, rate=RATE)
        audio += bytes(2 * int(RATE * silence))
        for start in range(0, len(audio), FRAME):
            await self.session.push_audio(audio[start : start + FRAME])

    def agent_lines(self) -> list[str]:
        """What the agents said so far (the transcripts sent to the caller's client)."""
        return [e.text for e in self.transport.events_of(Transcript) if e.role == "assistant"]

    async def agent_said(self, words: str, timeout: float = 30.0) -> str:
        """Wait until an agent line contains `words`; return that line."""
        await self.transport.wait_for(
            lambda: any(words in line for line in self.agent_lines()), timeout
        )
        return next(line for line in self.agent_lines() if words in line)


async def call_desk(
    hub: Hub, desk: Desk, room_id: str, *, voices: dict[str, Any] | None = None
) -> DeskCallHarness:
    """Start `desk` on a call in `room_id` (playout confirmed at once); `voices` replaces
    the agents' voices (default: "espeak")."""
    models = offline_models()
    transport = MemoryTransport(RATE, ack="immediate")
    providers = CallSpeech(
        stt=models["stt"],
        tts=models["tts"],
        vad=models["vad"],
        voices={"espeak": models["espeak"]} if voices is None else voices,
    )
    call = await CallSpec.for_room(hub, desk, room_id, transport)
    session = await start_pipeline_call(call, providers)
    transport.session = session
    return DeskCallHarness(session, transport)
