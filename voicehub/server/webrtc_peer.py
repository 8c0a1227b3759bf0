"""Building the aiortc peer connection for an offer (aiortc is imported here, lazily)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from voicehub.server.settings import IceServer
from voicehub.transports.rtc_media import import_aiortc
from voicehub.transports.webrtc import WebRTCTransport

__all__ = ["answer_offer", "check_offer"]


def check_offer(sdp: str) -> str | None:
    """None if `sdp` looks like an offer this server can answer, else what is missing.

    Cheap checks first, so junk never reaches the SDP parser; aiortc finds the rest."""
    lines = [line.strip() for line in sdp.strip().splitlines()]
    if not lines or lines[0] != "v=0":
        return "an SDP offer starts with the line v=0"
    media = [line for line in lines if line.startswith("m=")]
    if not any(line.startswith("m=audio ") for line in media):
        return "the offer has no audio section (m=audio): add a microphone track"
    if not any(line.startswith("m=application ") and "DTLS/SCTP" in line for line in media):
        return (
            "the offer has no data channel (m=application): open one before the offer; "
            "call events and playout acks travel on it"
        )
    if not any(line.startswith("a=fingerprint:") for line in lines):
        return "the offer has no DTLS fingerprint (a=fingerprint): media cannot be secured"
    return None


async def answer_offer(
    sdp: str, transport: WebRTCTransport, ice_servers: Sequence[IceServer]
) -> tuple[Any, str]:
    """A peer connection wired to `transport`, and its SDP answer (all candidates in it).

    Raises ValueError with aiortc's reason when the offer cannot be answered."""
    aiortc = import_aiortc()
    configuration = aiortc.RTCConfiguration(
        iceServers=[
            aiortc.RTCIceServer(urls=s.urls, username=s.username, credential=s.credential)
            for s in ice_servers
        ]
    )
    connection = aiortc.RTCPeerConnection(configuration=configuration)

    @connection.on("datachannel")  # type: ignore[untyped-decorator]
    def _channel(channel: Any) -> None:
        transport.attach_channel(channel)

    @connection.on("track")  # type: ignore[untyped-decorator]
    def _track(track: Any) -> None:
        if track.kind == "audio":
            transport.attach_track(track)

    try:
        await connection.setRemoteDescription(aiortc.RTCSessionDescription(sdp=sdp, type="offer"))
        connection.addTrack(transport.outbound_track())
        answer = await connection.createAnswer()
        await connection.setLocalDescription(answer)
    except Exception as exc:  # aiortc raises many kinds for a bad offer
        await connection.close()
        detail = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        raise ValueError(f"the offer could not be used ({detail})") from None
    return connection, str(connection.localDescription.sdp)
