"""The voice session seam.

A `VoiceSession` runs one call: caller audio in (`push_audio`), agent audio out through the
call's `CallTransport`. It feeds the room's `VoiceActivity` (which drives delivery) and
appends transcript events to the room. It implements the delivery `Injector`: `inject`
speaks a result verbatim (`say`) or through the model (`generate_reply`) and returns only
when the speech finished (with the transport's playout confirmation) or was interrupted.

The pipeline session also implements the delivery's `PreparingInjector` (results are
pre-rendered while they wait) and feeds per-frame caller speech evidence to its activity
(`voicehub.voice.speech_evidence`): a result is held at its first frame, and yields at
once, when the caller speaks.

Two engines fit behind it: voicehub's pipeline engine (`voicehub.voice.engine`: VAD, STT,
the agent's model, TTS) and the speech-to-speech relay (`voicehub.voice.realtime_session`).
A voice stack builds one for each call (`voicehub.desks.voice_stack`); delivery tests use
a scripted fake on a virtual clock.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from voicehub.core.runtime import Runtime
from voicehub.delivery.injector import InjectOutcome

if TYPE_CHECKING:
    from voicehub.agents.agent import Agent
    from voicehub.agents.tools import Tool
    from voicehub.delivery.injector import SessionRegistry
    from voicehub.voice.activity import VoiceActivity


class CallRuntime(Runtime, Protocol):
    """What a voice session needs of the hub: the core runtime (post events, clock) and
    the delivery service to register with while the call is live."""

    @property
    def delivery(self) -> SessionRegistry: ...


class VoiceSession(Protocol):
    """One live call."""

    room_id: str
    activity: VoiceActivity

    async def start(self) -> None:
        """Start processing; speaks the desk greeting if there is one."""
        ...

    async def push_audio(self, pcm16: bytes) -> None:
        """Caller audio: PCM16 mono at the transport's sample rate, any whole frame size."""
        ...

    async def push_text(self, text: str) -> None:
        """A caller turn as text (phone keypad digits): answered like a spoken turn."""
        ...

    def playout_confirmed(self, speech_id: str) -> None:
        """The transport reports that speech `speech_id` has been played to the caller."""
        ...

    async def say(self, text: str, *, allow_interrupt: bool = True) -> InjectOutcome:
        """Speak `text` verbatim; returns when played out or interrupted."""
        ...

    async def generate_reply(self, instructions: str) -> InjectOutcome:
        """Have the agent's model answer `instructions` aloud; returns when done."""
        ...

    async def inject(
        self, text: str, *, allow_interrupt: bool, metadata: dict[str, Any]
    ) -> InjectOutcome:
        """The delivery `Injector`: speak a background result into the call."""
        ...

    async def interrupt(self) -> None:
        """Stop the agent's current speech."""
        ...

    async def update_agent(self, agent: Agent, *, extra_tools: list[Tool] | None = None) -> None:
        """Switch the agent on the call (handoff): instructions, tools and voice."""
        ...

    async def flush(self) -> None:
        """Return once what the call has recorded so far (what was said, tool calls) has
        reached the room and the transport's queue: a line closed after it (a hand-over)
        still carries the last transcript to the caller. Bounded: a stuck store gives up."""
        ...

    async def aclose(self) -> None:
        """End the call's processing (the room stays; held results wait for a reconnect)."""
        ...
