"""Which audio of a caller's utterance a whole-utterance recognizer decodes, and when it
can start decoding it before the utterance is declared over: a sans-I/O state machine.

Whisper decodes a whole utterance at once. Waiting for the end of the turn (the VAD's
silence, then a flush) to start would put the whole decoding after the caller stopped. A
cheap per-frame speech gate sees the caller pause first, so the utterance is decoded while
the turn is still being decided; if the caller goes on, the result is only an interim.

The audio decoded is always the same function of the call's audio and the gate: from
`pre_roll` before the speech the gate first heard (`min_speech` of it in a row) to `tail`
after the last frame it heard as speech. So the decoding started at a pause (`Pause`) is
exactly the final one when no speech followed, and the final is the same text whether it
was decoded ahead or after the flush; benches decode the same window (`window_of`).
While the caller speaks, the window so far may also be decoded every `interim_every`
seconds of speech (`Interim`: partial transcripts; never reused as a final).

An utterance never flushed (noise the session's VAD did not take for speech) is forgotten
when speech starts again after `forget_after` seconds of silence. The window keeps at most
`max_seconds` (the oldest audio goes first: Whisper reads 30 s at a time).

A flush may come late: the session's VAD, on a busy machine, decides the end of speech
after the caller has already spoken on ("find out about ... wind turbines": its end falls
in the pause, but is known only during "wind"). `flush_at` ends the utterance where the VAD
decided, not where the stream has got to: the frames after that point start the next
utterance, exactly as if the flush had come in time, so a word said after the pause is not
split between two decodings. It replays the frames pushed since the last flush (kept, with
the gate's decisions, up to `max_seconds`).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

__all__ = ["Interim", "Pause", "UtteranceWindow", "WindowAudio", "window_of"]


@dataclass(frozen=True, slots=True)
class WindowAudio:
    """A window to decode: `audio` (PCM16 at the stream's rate), the utterance it belongs
    to, and where it starts and ends in the stream (frame indexes since the first frame)."""

    utterance: int
    start: int
    end: int
    audio: bytes

    @property
    def key(self) -> tuple[int, int, int]:
        """Two windows with the same key hold the same audio."""
        return (self.utterance, self.start, self.end)


@dataclass(frozen=True, slots=True)
class Pause:
    """The caller paused for `tail`: decode `window`, likely the utterance's final."""

    window: WindowAudio


@dataclass(frozen=True, slots=True)
class Interim:
    """The caller has spoken `interim_every` more seconds: decode `window` for a partial."""

    window: WindowAudio


_REBASE_FRAMES = 50  # a closed, quiet window restarts its replay log after this many frames


@dataclass(frozen=True, slots=True)
class _Snapshot:
    """What a closed window is: `flush_at` restarts from it and replays the frames since."""

    utterance: int
    index: int
    last_speech_end: int
    speech_run: int
    silent_run: int
    recent: tuple[bytes, ...]


class UtteranceWindow:
    """Feed it 20 ms frames with the gate's decision (`push`); it says when to decode
    ahead; `flush` gives the utterance's final window (None when the gate heard no speech)
    and starts the next utterance."""

    def __init__(
        self,
        *,
        frame_ms: int = 20,
        pre_roll: float = 0.3,
        tail: float = 0.2,
        min_speech: float = 0.06,
        interim_every: float | None = 1.0,
        forget_after: float = 3.0,
        max_seconds: float = 30.0,
    ) -> None:
        def frames(seconds: float) -> int:
            return max(1, round(seconds * 1000 / frame_ms))

        self._pre_roll_frames = frames(pre_roll)
        self._tail = frames(tail)
        self._min_speech = frames(min_speech)
        self._interim_every = frames(interim_every) if interim_every else None
        self._forget_after = frames(forget_after)
        self._max_frames = frames(max_seconds)
        self.frame_ms = frame_ms
        self.utterance = 0
        self._index = 0  # frames pushed since the stream started
        self._recent: deque[bytes] = deque(maxlen=self._pre_roll_frames + self._min_speech)
        self._frames: deque[bytes] = deque()  # the open utterance's audio
        self._start = 0  # stream index of self._frames[0]
        self._open = False
        self._speech_run = 0  # gate speech frames in a row
        self._silent_run = 0  # gate silence frames in a row
        self._last_speech_end = 0  # stream index just after the last speech frame
        self._speech_since_decode = 0
        # for `flush_at`: the frames since `_base` (a state it can restart from), decided
        self._log: list[tuple[bytes, bool]] = []
        self._base = self._snapshot()

    @property
    def open(self) -> bool:
        """The gate heard speech since the last flush."""
        return self._open

    @property
    def frames_pushed(self) -> int:
        """Frames pushed since the stream started."""
        return self._index

    def push(self, frame: bytes, speech: bool) -> Pause | Interim | None:
        """One frame and the gate's decision for it."""
        log = self._log
        if not self._open and not speech and len(log) >= _REBASE_FRAMES:
            self._log, self._base = [], self._snapshot()  # closed and quiet: start over here
            log = self._log
        if len(log) < self._max_frames:
            log.append((frame, speech))
        else:
            self._base = None  # too long ago to replay: `flush_at` flushes now
        index = self._index
        self._index += 1
        if speech:
            self._speech_run += 1
            self._silent_run = 0
        else:
            self._speech_run = 0
            self._silent_run += 1
        if self._open and speech and index - self._last_speech_end >= self._forget_after:
            # Speech again long after a stretch nobody flushed: that stretch was not taken
            # for speech by the session (noise); this is a new utterance, with its pre-roll.
            self.utterance += 1
            self._open = False
            before = list(self._frames)[-(self._pre_roll_frames + self._min_speech - 1) :]
            self._frames.clear()
            self._recent.clear()
            self._recent.extend(before)
        if not self._open:
            self._recent.append(frame)
            if self._speech_run >= self._min_speech:
                self._open_utterance(index)
            return None
        self._frames.append(frame)
        if len(self._frames) > self._max_frames:
            self._frames.popleft()
            self._start += 1
        if speech:
            self._last_speech_end = index + 1
            self._speech_since_decode += 1
            every = self._interim_every
            if every is not None and self._speech_since_decode >= every:
                self._speech_since_decode = 0
                return Interim(self._window(self._index))
            return None
        if self._silent_run == self._tail:
            self._speech_since_decode = 0
            return Pause(self._window(self._index))
        return None

    def flush(self) -> WindowAudio | None:
        """The utterance is over: its window (to the last speech and `tail`, or to now if
        the tail has not passed yet), or None if the gate heard no speech. The next frame
        starts a new utterance."""
        window = None
        if self._open:
            end = min(self._index, self._last_speech_end + self._tail)
            window = self._window(end)
        self.utterance += 1
        self._open = False
        self._frames.clear()
        self._recent.clear()
        self._speech_run = self._silent_run = self._speech_since_decode = 0
        self._log, self._base = [], self._snapshot()
        return window

    def flush_at(self, at: int) -> tuple[WindowAudio | None, list[Pause | Interim]]:
        """The utterance ended at stream index `at` (see the module): its window, as
        `flush` would have given it then, and what the frames pushed since then ask for
        in the next utterance (their pauses and interims, to decode ahead). At or after
        the frames pushed, or before what can be replayed, it is `flush` now."""
        base = self._base
        if base is None or at >= self._index or at < base.index:
            return self.flush(), []
        log = self._log
        split = at - base.index
        self._restore(base)
        for frame, speech in log[:split]:  # their decodings were asked for already
            self.push(frame, speech)
        window = self.flush()
        actions = [a for frame, speech in log[split:] if (a := self.push(frame, speech))]
        return window, actions

    def _snapshot(self) -> _Snapshot | None:
        """The state to replay from, when the window is closed (else None)."""
        if self._open:
            return None
        return _Snapshot(
            self.utterance,
            self._index,
            self._last_speech_end,
            self._speech_run,
            self._silent_run,
            tuple(self._recent),
        )

    def _restore(self, base: _Snapshot) -> None:
        self.utterance, self._index = base.utterance, base.index
        self._last_speech_end = base.last_speech_end
        self._speech_run, self._silent_run = base.speech_run, base.silent_run
        self._recent.clear()
        self._recent.extend(base.recent)
        self._frames.clear()
        self._open = False
        self._speech_since_decode = 0
        self._log, self._base = [], base

    def _open_utterance(self, index: int) -> None:
        self._open = True
        self._frames = deque(self._recent)
        self._start = index + 1 - len(self._frames)
        self._recent.clear()
        self._last_speech_end = index + 1
        self._speech_since_decode = self._speech_run

    def _window(self, end: int) -> WindowAudio:
        """The open utterance's audio from its start to stream index `end`."""
        kept = list(self._frames)[: max(0, end - self._start)]
        return WindowAudio(self.utterance, self._start, self._start + len(kept), b"".join(kept))


def window_of(
    frames: list[bytes], speech: list[bool], **options: float | int | None
) -> WindowAudio | None:
    """The final window `UtteranceWindow` gives for these frames and gate decisions, then
    a flush: what a bench decodes to hear what the stream would."""
    window = UtteranceWindow(**options)  # type: ignore[arg-type]
    for frame, is_speech in zip(frames, speech, strict=True):
        window.push(frame, is_speech)
    return window.flush()
