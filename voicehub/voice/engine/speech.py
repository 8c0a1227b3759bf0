"""One thing the agent says on a call: a reply's step, a line said verbatim, or a result.

A `Speech` is a handle: the driver creates it with its audio (PCM16 at the transport's rate,
produced lazily by the TTS), the `SpeechPlayer` plays it, and whoever waits on `wait()`
learns how it ended: played out (the transport confirmed playout), interrupted (the caller
cut it, or the driver did), held (a result not started because the caller was speaking), or
failed (its TTS raised). A speech may be paused (the caller spoke over it) and resumed from
where the caller stopped hearing it: its audio is kept for that.
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
        self.seconds_sent = 0.0  # audio produced (sent, or kept while paused)
        self.heard_seconds = 0.0  # what the caller heard, once it ended
        self.pcm = bytearray()  # every byte of its audio so far (a resume replays from it)
        # the stretch now playing: where in the audio it starts, since when, its mark
        self.segment = 0
        self.segment_from = 0.0
        self.segment_started_at: float | None = None
        self.marked = False  # the stretch's mark went out after its last frame
        self.paused = False
        self.changed = asyncio.Event()  # set on a pause, a resume and the end
        self._done: asyncio.Future[SpeechEnd] = asyncio.get_running_loop().create_future()

    @property
    def done(self) -> bool:
        return self._done.done()

    @property
    def audio_started(self) -> bool:
        return self.audio_started_at is not None

    @property
    def mark_id(self) -> str:
        """The mark of the stretch now playing (its speech id, then `id#2`, ...)."""
        return self.id if self.segment <= 1 else f"{self.id}#{self.segment}"

    def heard_until(self, now: float) -> float:
        """Seconds into the audio the caller has heard by `now`."""
        if self.segment_started_at is None:
            return self.segment_from
        playing = max(0.0, now - self.segment_started_at)
        return min(self.seconds_sent, self.segment_from + playing)

    def finish(self, end: SpeechEnd, error: BaseException | None = None) -> None:
        """Settle the speech (the first settlement wins)."""
        if not self._done.done():
            self.end, self.error = end, error
            self._done.set_result(end)
            self.changed.set()  # a waiting player wakes, and finds it over

    def set_paused(self, paused: bool) -> None:
        self.paused = paused
        self.changed.set()

    async def until(self, paused: bool) -> None:
        """Returns once the speech is paused (or not, as `paused` says), or over."""
        while self.paused is not paused and not self.done:
            self.changed.clear()
            await self.changed.wait()

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
