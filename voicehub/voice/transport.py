"""What a voice session needs from the transport that carries a call's audio.

Transports (WebSocket, Twilio, WebRTC, LiveKit) implement `CallTransport`. Audio in both
directions is PCM16 mono at `sample_rate`; a transport converts to and from its wire format
(Twilio's 8 kHz mu-law, say). Playout confirmation is the transport's job: after `mark(id)`
it must call the session's `playout_confirmed(id)` once every byte sent before the mark has
really been played to the caller (Twilio echoes marks; the browser page acks).

Optional, for a transport whose wire carries audio another way than PCM16 at its session
rate (Twilio: G.711 mu-law at 8 kHz): `wire_audio` names that format (`DeclaresWire`), and
`send_wire_audio(data)` queues agent audio already in it (`WireAudioTransport`). A provider
that can produce the wire's own format (Deepgram's Aura speaks mu-law at 8 kHz, OpenAI
Realtime emits `audio/pcmu`) then skips a decode on its side and an encode on the
transport's, and no audio is resampled on the way. `wire_audio_of` reads it (PCM16 at the
session rate when a transport does not say).

Optional too: a transport that can end the call itself (a socket it closes, a carrier it
asks) is a `HangsUp`; the agent's end of a call then hangs up, others only close.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol, TypeGuard, runtime_checkable

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


@runtime_checkable
class HangsUp(Protocol):
    """A transport that can end the call from the agent's side."""

    async def hang_up(self, reason: str) -> None:
        """End the call (`reason` for the caller's client and the records)."""
        ...


@dataclass(frozen=True)
class WireAudio:
    """How a transport carries audio on its wire: `encoding` at `sample_rate`."""

    encoding: Literal["pcm16", "mulaw"]
    sample_rate: int


@runtime_checkable
class DeclaresWire(Protocol):
    """A transport that says how its wire carries audio."""

    @property
    def wire_audio(self) -> WireAudio:
        """The encoding and rate of the transport's wire."""
        ...


def wire_audio_of(transport: CallTransport) -> WireAudio:
    """The transport's `wire_audio`, or PCM16 at its session rate when it declares none."""
    if isinstance(transport, DeclaresWire):
        return transport.wire_audio
    return WireAudio("pcm16", transport.sample_rate)


@runtime_checkable
class WireAudioTransport(CallTransport, DeclaresWire, Protocol):
    """A `CallTransport` that also takes agent audio in its `wire_audio` format."""

    async def send_wire_audio(self, data: bytes) -> None:
        """Queue agent audio already in `wire_audio`'s format (no conversion)."""
        ...


def plays_mulaw(transport: CallTransport) -> TypeGuard[WireAudioTransport]:
    """The transport's session rate and wire are both 8 kHz and it takes mu-law as it is
    (`send_wire_audio`): a provider can hand it G.711 with no conversion at all."""
    return (
        isinstance(transport, WireAudioTransport)
        and transport.wire_audio == WireAudio("mulaw", 8000)
        and transport.sample_rate == 8000
    )
