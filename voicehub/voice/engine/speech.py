"""One thing the agent says on a call: a reply's step, a line said verbatim, or a result.

A `Speech` is a handle: the driver creates it with its audio (PCM16 at the transport's rate,
produced lazily by the TTS), the `SpeechPlayer` plays it, and whoever waits on `wait()`
learns how it ended: played out (the transport confirmed playout), interrupted (the caller
cut it, or the driver did), held (a result not started because the caller was speaking), or
failed (its TTS raised).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from enum import StrEnum

from voicehub.voice.engine.turn_engine import AgentSpeech

__all__ = ["Speech", "SpeechEnd"]


class SpeechEnd(StrEnum):
    PLAYED = "played"
    INTERRUPTED = "interrupted"
    HELD = "held"
    FAILED = "failed"


class Speech:
    """A speech and how it ended (see the module docstring)."""

    def __init__(
        self,
        speech_id: str,
        kind: AgentSpeech,
        text: str,
        audio: AsyncIterator[bytes],
        *,
        interruptible: bool = True,
        agent_id: str = "",
    ) -> None:
        self.id, self.kind, self.text = speech_id, kind, text
        self.agent_id = agent_id  # whose words these are (the room's record says so)
        self.audio = audio
        self.interruptible = interruptible
        self.end: SpeechEnd | None = None
        self.error: BaseException | None = None
        self.audio_started_at: float | None = None  # clock time of its first audio sent
        self.seconds_sent = 0.0  # audio handed to the transport
        self.heard_seconds = 0.0  # what the caller heard, once it ended
        self._done: asyncio.Future[SpeechEnd] = asyncio.get_running_loop().create_future()

    @property
    def done(self) -> bool:
        return self._done.done()

    @property
    def audio_started(self) -> bool:
        return self.audio_started_at is not None

    def finish(self, end: SpeechEnd, error: BaseException | None = None) -> None:
        """Settle the speech (the first settlement wins)."""
        if not self._done.done():
            self.end, self.error = end, error
            self._done.set_result(end)

    async def wait(self) -> SpeechEnd:
        """How it ended, once it did (cancelling the wait leaves the speech alone)."""
        return await asyncio.shield(self._done)

    def heard_text(self) -> str:
        """The words the caller heard: all of them when played out, else the share of the
        text that the heard audio covers (words are spread evenly over the audio)."""
        if self.end is SpeechEnd.PLAYED:
            return self.text
        if not self.seconds_sent or not self.heard_seconds:
            return ""
        words = self.text.split()
        share = min(1.0, self.heard_seconds / self.seconds_sent)
        return " ".join(words[: round(len(words) * share)])

    def __repr__(self) -> str:
        return f"Speech({self.id!r}, {self.kind}, end={self.end})"
