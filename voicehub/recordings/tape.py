"""One call's recording as it happens: two tracks on one time axis, and the transcript.

Each track is PCM16 at the call's sample rate, written where the audio is heard:

- the caller's frames where they arrived (a burst that arrives early is laid end to end
  after what came before, as it was spoken);
- the agent's audio where the caller hears it: a transport plays what it is sent in order,
  so a chunk starts when it is sent or when the audio queued before it ends, whichever is
  later; a `clear` (the caller barged in) drops what was queued but not yet heard.

Gaps under `_JOIN` seconds (network jitter) are closed up rather than filled with silence.
The cost per 20 ms frame is a clock read and a bytearray append (`voicehub bench --only
observability`).
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

import numpy as np

from voicehub.voice.events import AgentState, ToolCall, Transcript, UserState

if TYPE_CHECKING:
    from voicehub.core.clock import Clock
    from voicehub.voice.events import ServerEvent

__all__ = ["CallTape"]

_JOIN = 0.06  # seconds: a later frame closer than this to the track's end is laid against it


class _Track:
    """A PCM16 track and the write position where the next audio goes on."""

    __slots__ = ("audio", "join")

    def __init__(self, join_bytes: int) -> None:
        self.audio = bytearray()
        self.join = join_bytes

    def lay(self, at: int, pcm16: bytes) -> None:
        """Lay `pcm16` at byte `at`, or right after what is there when that is later (or
        earlier by less than the jitter allowance)."""
        end = len(self.audio)
        if at > end + self.join:
            self.audio += bytes(at - end)
        self.audio += pcm16

    def cut(self, at: int) -> None:
        """Drop what lies after byte `at` (queued, never heard)."""
        if at < len(self.audio):
            del self.audio[at:]


class CallTape:
    """The recording of one call from `clock`'s now on; `events` become the transcript."""

    def __init__(self, clock: Clock, sample_rate: int, *, audio: bool, transcript: bool) -> None:
        self.clock = clock
        self.sample_rate = sample_rate
        self.record_audio = audio
        self.record_transcript = transcript
        self.started = clock.now()
        self.started_wall = time.time()
        self._bytes_per_second = 2 * sample_rate
        join = int(_JOIN * sample_rate) * 2
        self.caller = _Track(join)
        self.agent = _Track(join)
        self.entries: list[dict[str, Any]] = []

    def _position(self) -> int:
        """Byte offset of now on the tracks (whole samples)."""
        return int((self.clock.now() - self.started) * self.sample_rate) * 2

    def _seconds(self) -> float:
        return round(self.clock.now() - self.started, 3)

    # -- audio -------------------------------------------------------------------------

    def caller_audio(self, pcm16: bytes) -> None:
        if self.record_audio:
            self.caller.lay(self._position(), pcm16)

    def agent_audio(self, pcm16: bytes) -> None:
        if self.record_audio:
            self.agent.lay(self._position(), pcm16)

    def agent_cleared(self) -> None:
        """The caller barged in: what the agent had queued is not heard."""
        if self.record_audio:
            self.agent.cut(max(self._position(), 0))

    # -- the transcript ----------------------------------------------------------------

    def event(self, event: ServerEvent) -> None:
        if not self.record_transcript:
            return
        entry = _entry(event)
        if entry is not None:
            self.entries.append({"at": self._seconds(), **entry})

    def note(self, kind: str, **fields: Any) -> None:
        """An entry of the call's background work (tasks, deliveries); None fields left out."""
        if self.record_transcript:
            given = {key: value for key, value in fields.items() if value is not None}
            self.entries.append({"at": self._seconds(), "kind": kind, **given})

    def caller_typed(self, text: str) -> None:
        if self.record_transcript:
            self.entries.append({"at": self._seconds(), "kind": "caller_text", "text": text})

    # -- the files ---------------------------------------------------------------------

    def seconds(self) -> float:
        longest = max(len(self.caller.audio), len(self.agent.audio))
        return max(longest / self._bytes_per_second, self.clock.now() - self.started)

    def stereo(self) -> bytes:
        """Both tracks as interleaved stereo PCM16: the caller left, the agent right."""
        length = max(len(self.caller.audio), len(self.agent.audio)) // 2
        frames = np.zeros((length, 2), dtype="<i2")
        for channel, track in enumerate((self.caller, self.agent)):
            samples = np.frombuffer(bytes(track.audio), dtype="<i2")
            frames[: samples.size, channel] = samples
        return frames.tobytes()

    def transcript(self, **about: Any) -> str:
        document = {
            **about,
            "started_at": self.started_wall,
            "seconds": round(self.seconds(), 3),
            "sample_rate": self.sample_rate,
            "entries": self.entries,
        }
        return json.dumps(document, indent=1, ensure_ascii=False) + "\n"


def _entry(event: ServerEvent) -> dict[str, Any] | None:
    """What the transcript keeps of an event the caller's client was sent."""
    if isinstance(event, Transcript):
        if not event.final:
            return None
        return {"kind": "speech", "role": event.role, "text": event.text}
    if isinstance(event, ToolCall):
        return {"kind": "tool_call", "name": event.name, "arguments": event.arguments}
    if isinstance(event, UserState | AgentState):
        who = "caller" if isinstance(event, UserState) else "agent"
        return {"kind": "state", "who": who, "state": event.state}
    return None  # tasks and deliveries come from the hub's hooks (`note`)
