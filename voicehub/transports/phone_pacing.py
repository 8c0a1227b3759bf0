"""Pacing agent audio to a carrier whose playback buffer is bounded.

A carrier plays the audio we send at 20 ms a frame from the moment it has a frame, and
buffers what is ahead of the caller's ear. Vonage buffers at most 3072 messages (about a
minute): audio sent faster than it plays, past that, is lost. `PlayoutPacer` keeps what
the carrier holds under `lead` seconds: frames go at once until the estimated buffer holds
`lead`, then one every 20 ms, as the carrier plays them. A `clear` empties the carrier's
buffer (`flushed`). Time is the injected clock's.

    pacer = PlayoutPacer(clock, lead=20.0, is_audio=codec.is_audio)
    queue = SendQueue(pacer=pacer)     # the pump waits `pacer.delay(frame)` before each
"""

from __future__ import annotations

from collections.abc import Callable

from voicehub.core.clock import Clock

__all__ = ["FRAME_SECONDS", "PlayoutPacer"]

FRAME_SECONDS = 0.02  # every carrier's media frame: 20 ms
# A wait shorter than this is rounding in the sums of 20 ms, not a wait: none (a clock whose
# time cannot move by so little would wake the sleeper at the same instant, forever).
_ROUNDING = 1e-6


class PlayoutPacer:
    """The estimated playback buffer at the carrier, kept under `lead` seconds."""

    def __init__(
        self,
        clock: Clock,
        *,
        lead: float,
        is_audio: Callable[[bytes | str], bool],
        frame_seconds: float = FRAME_SECONDS,
    ) -> None:
        if lead < frame_seconds:
            raise ValueError(f"lead {lead} s is shorter than one frame ({frame_seconds} s)")
        self.clock = clock
        self.lead = lead
        self.frame_seconds = frame_seconds
        self._is_audio = is_audio
        self._played_until = clock.now()  # when the audio sent so far will have played

    def buffered(self) -> float:
        """Seconds of audio the carrier holds, by the estimate."""
        return max(0.0, self._played_until - self.clock.now())

    def delay(self, frame: bytes | str) -> float:
        """Seconds to wait before `frame` may go (0 for a frame that is not audio)."""
        if not self._is_audio(frame):
            return 0.0
        wait = self.buffered() + self.frame_seconds - self.lead
        return wait if wait > _ROUNDING else 0.0

    def sent(self, frame: bytes | str) -> None:
        """`frame` went out: an audio frame adds 20 ms to the carrier's buffer."""
        if self._is_audio(frame):
            self._played_until = max(self._played_until, self.clock.now()) + self.frame_seconds

    def flushed(self) -> None:
        """The carrier was told to drop what it buffered (a barge-in's clear)."""
        self._played_until = self.clock.now()
