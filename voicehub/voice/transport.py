"""What a voice session needs from the transport that carries a call's audio.

Transports (WebSocket, Twilio, WebRTC, LiveKit) implement `CallTransport`. Audio in both
directions is PCM16 mono at `sample_rate`; a transport converts to and from its wire format
(Twilio's 8 kHz mu-law, say). Playout confirmation is the transport's job: after `mark(id)`
it must call the session's `playout_confirmed(id)` once every byte sent before the mark has
really been played to the caller (Twilio echoes marks; the browser page acks).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from voicehub.voice.events import ServerEvent


class CallTransport(Protocol):
    """The outbound half of a call, as the voice session sees it."""

    @property
    def sample_rate(self) -> int:
        """Rate of the PCM16 audio the session sends and receives."""
        ...

    async def send_audio(self, pcm16: bytes) -> None:
        """Queue agent audio for playout."""
        ...

    async def mark(self, speech_id: str) -> None:
        """Ask for a playout confirmation once everything queued so far has played."""
        ...

    async def clear(self) -> None:
        """Drop queued, unplayed audio at once (the caller barged in)."""
        ...

    async def send_event(self, event: ServerEvent) -> None:
        """Send an event to the client (transcripts, states, tasks, deliveries)."""
        ...
