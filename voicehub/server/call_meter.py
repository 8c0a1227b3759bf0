"""Turn-taking figures of one call, read off its transport as the session uses it.

The voice session sends everything the caller experiences through its `CallTransport`:
user and agent states, transcripts, agent audio. `MeteredTransport` passes each call on
unchanged and shows it to a `CallMeter`, which measures (the voice-to-voice latency is the
engine's, fed to the metric by `voicehub.server.call_telemetry`):

- turns: final transcripts, by role;
- talk-over: the agent began a speech segment (its first audio after a speech mark, a
  clear or silence) while the caller was speaking: the agent talking over the caller,
  labelled by whether a delivery or an ordinary reply began. Audio goes out ahead of
  playout, so only a segment's start tells when the caller hears it begin;
- barge-ins: the caller began speaking while the agent was speaking (its state stays
  "speaking" until the transport confirmed playout), labelled the same way.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from voicehub.voice.events import AgentState, Transcript, UserState

if TYPE_CHECKING:
    from voicehub.core.clock import Clock
    from voicehub.voice.events import ServerEvent
    from voicehub.voice.transport import CallTransport

__all__ = ["CallMeter", "MeteredTransport"]


class _Counts(Protocol):
    def inc(self, amount: float = 1) -> None: ...


class CallMeter:
    """The turn-taking state of one call, and the metrics it feeds."""

    def __init__(
        self,
        clock: Clock,
        *,
        turns: Callable[[str], _Counts],
        talk_over: Callable[[str], _Counts],
        barge_ins: Callable[[str], _Counts],
    ) -> None:
        self.clock = clock
        self.started_at = clock.now()
        self.delivering = False  # a delivery attempt is being spoken (set by the hooks)
        self._turns = turns
        self._talk_over, self._barge_ins = talk_over, barge_ins
        self._user_speaking = self._agent_speaking = False
        self._segment_open = False  # agent audio sent since the last mark or clear

    def event(self, event: ServerEvent) -> None:
        if isinstance(event, UserState):
            speaking = event.state == "speaking"
            if speaking and not self._user_speaking and self._agent_speaking:
                self._barge_ins(self._speech()).inc()
            self._user_speaking = speaking
        elif isinstance(event, AgentState):
            speaking = event.state == "speaking"
            if self._agent_speaking and not speaking:
                self.delivering = False  # a delivery that spoke is over (its hook may lag)
            self._agent_speaking = speaking
        elif isinstance(event, Transcript) and event.final:
            self._turns(event.role).inc()

    def agent_audio(self) -> None:
        if not self._segment_open:
            self._segment_open = True
            if self._user_speaking:
                self._talk_over(self._speech()).inc()

    def segment_ended(self) -> None:
        """A speech mark or a clear: the next agent audio starts a new segment."""
        self._segment_open = False

    def _speech(self) -> str:
        return "delivery" if self.delivering else "reply"


class MeteredTransport:
    """A `CallTransport` that shows what goes through it to a `CallMeter`."""

    def __init__(self, inner: CallTransport, meter: CallMeter) -> None:
        self.inner = inner
        self.meter = meter

    @property
    def sample_rate(self) -> int:
        return self.inner.sample_rate

    async def send_audio(self, pcm16: bytes) -> None:
        self.meter.agent_audio()
        await self.inner.send_audio(pcm16)

    async def mark(self, speech_id: str) -> None:
        self.meter.segment_ended()
        await self.inner.mark(speech_id)

    async def clear(self) -> None:
        self.meter.segment_ended()
        await self.inner.clear()

    async def send_event(self, event: ServerEvent) -> None:
        self.meter.event(event)
        await self.inner.send_event(event)
