"""WebRTC calls: WHIP-shaped signaling and the peer connections behind it.

    POST   /desks/{desk}/webrtc?conversation=ID   body: an SDP offer (application/sdp)
           -> 201, body: the SDP answer, Location: /desks/{desk}/webrtc/{peer}
    DELETE /desks/{desk}/webrtc/{peer}            ends the call (results are held)

Same token as every call (`Authorization: Bearer` or `?token=`). The offer must carry an
audio section and a data channel (events and playout acks travel on it, as JSON, like the
WebSocket's text frames). ICE is not trickled: the answer holds every candidate. A refused
offer gets a plain-text reason: 400 (bad SDP or conversation id), 401, 404 (unknown desk),
415, 413, or 503 when `max_peer_connections` calls are up already.

Once the peer connects, the call runs on the `Switchboard` like a WebSocket call; it ends
on DELETE, a `hangup` message, ICE failure or silence (see `WebRTCTransport.watch`).

The call's PCM runs at the rate its session works at: 16 kHz for the pipeline (its VAD and
recognizers), the model's 24 kHz for a realtime desk, so the relay passes audio through and
Opus' 48 kHz is converted once each way, never twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from starlette.requests import ClientDisconnect, Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from voicehub.core.clock import Clock
from voicehub.core.jobs import cancel_and_wait
from voicehub.errors import VoicehubError
from voicehub.server.app_state import parts_of
from voicehub.server.auth import presented_token, token_problem
from voicehub.server.calls import CONVERSATION_PATTERN, LiveCall, Switchboard
from voicehub.server.webrtc_peer import answer_offer, check_offer
from voicehub.transports.call_events import Hangup, Playout
from voicehub.transports.webrtc import WebRTCTransport
from voicehub.transports.websocket import (
    CloseCode,
    ProtocolViolation,
    error_event,
    parse_text_message,
)
from voicehub.voice.events import SAMPLE_RATE, CallError
from voicehub.voice.realtime.config import MODEL_RATE

if TYPE_CHECKING:
    from voicehub.voice.session import VoiceSession

__all__ = ["Peer", "WebRTCDesk", "webrtc_routes"]

log = logging.getLogger("voicehub.webrtc")

MAX_OFFER_BYTES = 64 * 1024  # a real offer is 2-6 KB
_ENDED_REMEMBERED = 1024  # ended calls whose DELETE still answers 200
_LAST_EVENTS_TIMEOUT = 2.0  # seconds an ended call's last events may take to leave


@dataclass
class Peer:
    """One WebRTC call: its resource id, peer connection and transport."""

    id: str
    desk: str
    connection: Any  # aiortc RTCPeerConnection
    transport: WebRTCTransport
    task: asyncio.Task[None] | None = None
    connected: asyncio.Event = field(default_factory=asyncio.Event)
    call: LiveCall | None = None


class WebRTCDesk:
    """The peer connections of one server, at most `max_peer_connections` at a time."""

    def __init__(self, board: Switchboard, *, clock: Clock | None = None) -> None:
        self.board = board
        self.settings = board.settings
        self.clock = clock
        self.peers: dict[str, Peer] = {}
        # Recently ended calls: hanging up twice (data channel, then DELETE) is no error.
        self.ended: OrderedDict[str, None] = OrderedDict()

    # -- signaling ----------------------------------------------------------------------------

    async def offer(self, request: Request) -> Response:
        """POST: answer an SDP offer and start the call once the peer connects."""
        settings = self.settings
        problem = token_problem(
            settings.token, presented_token(request.headers, request.query_params)
        )
        if problem is not None:
            return _refuse(401, problem, {"WWW-Authenticate": "Bearer"})
        desk_name = request.path_params["desk"]
        desk = self.board.desks.get(desk_name)
        if desk is None:
            known = ", ".join(sorted(self.board.desks)) or "none"
            return _refuse(404, f"unknown desk {desk_name!r}; desks here: {known}")
        conversation = request.query_params.get("conversation") or uuid.uuid4().hex[:16]
        if not CONVERSATION_PATTERN.fullmatch(conversation):
            return _refuse(
                400,
                f"conversation id {conversation[:80]!r} is not valid: use 1-64 letters, "
                "digits, '.', '_' or '-', starting with a letter or digit",
            )
        kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if kind != "application/sdp":
            return _refuse(415, f"send the SDP offer as application/sdp, not {kind or 'nothing'!r}")
        try:
            body = await request.body()
        except ClientDisconnect:  # the browser went away mid-offer: no fault of ours
            log.info("%s: the sender went away before its offer arrived", request.url.path)
            return _refuse(400, "the offer did not arrive: the client went away")
        if len(body) > MAX_OFFER_BYTES:
            return _refuse(413, f"offer of {len(body)} bytes: at most {MAX_OFFER_BYTES}")
        try:
            sdp = body.decode("utf-8")
        except UnicodeDecodeError:
            return _refuse(400, "malformed SDP: the offer is not UTF-8 text")
        bad = check_offer(sdp)
        if bad is not None:
            return _refuse(400, f"malformed SDP: {bad}")
        if len(self.peers) >= settings.max_peer_connections:
            return _refuse(
                503,
                f"this server is at its limit of {settings.max_peer_connections} WebRTC "
                "calls; try again shortly",
                {"Retry-After": "5"},
            )
        peer_id = uuid.uuid4().hex
        transport = WebRTCTransport(
            sample_rate=MODEL_RATE
            if desk.config.voice.engine == "openai-realtime"
            else SAMPLE_RATE,
            silence_timeout=settings.webrtc_silence_timeout,
            clock=self.clock,
        )
        try:
            connection, answer = await answer_offer(sdp, transport, settings.ice_servers)
        except VoicehubError as exc:  # aiortc missing
            return _refuse(501, str(exc))
        except ValueError as exc:
            return _refuse(400, f"malformed SDP: {exc}")
        peer = Peer(peer_id, desk_name, connection, transport)
        transport.peer_state = lambda: str(connection.connectionState)

        @connection.on("connectionstatechange")  # type: ignore[untyped-decorator]
        def _state() -> None:
            if connection.connectionState in ("connected", "failed", "closed"):
                peer.connected.set()

        self.peers[peer_id] = peer
        call = peer.call = LiveCall(desk, conversation, transport, kind="webrtc")
        peer.task = asyncio.create_task(self._serve(peer, call))
        location = f"/desks/{desk_name}/webrtc/{peer_id}"
        log.info("room %s: WebRTC offer answered (peer %s)", call.room_id, peer_id)
        return Response(
            answer,
            status_code=201,
            media_type="application/sdp",
            headers={"Location": location, "Cache-Control": "no-store"},
        )

    async def hangup(self, request: Request) -> Response:
        """DELETE: end the call of a peer resource."""
        problem = token_problem(
            self.settings.token, presented_token(request.headers, request.query_params)
        )
        if problem is not None:
            return _refuse(401, problem, {"WWW-Authenticate": "Bearer"})
        peer_id = request.path_params["peer"]
        if peer_id in self.ended:
            return Response(status_code=200)  # already over: the hangup is done
        peer = self.peers.get(peer_id)
        if peer is None or peer.desk != request.path_params["desk"]:
            return _refuse(404, "no such WebRTC call here")
        if peer.call is not None:
            peer.call.hang_up()
        peer.transport.close(CloseCode.NORMAL, "hangup")
        return Response(status_code=200)

    async def close_all(self) -> None:
        """End every WebRTC call (server shutdown); results stay held."""
        peers = list(self.peers.values())
        for peer in peers:
            peer.transport.close(CloseCode.GOING_AWAY, "server shutting down")
        tasks = [peer.task for peer in peers if peer.task is not None]
        if tasks:
            await asyncio.wait(tasks, timeout=10)

    # -- one call -----------------------------------------------------------------------------

    async def _serve(self, peer: Peer, call: LiveCall) -> None:
        transport, connection = peer.transport, peer.connection
        try:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.settings.webrtc_silence_timeout):
                    await peer.connected.wait()
            if connection.connectionState != "connected" or transport.ended.is_set():
                log.info("room %s: peer %s never connected", call.room_id, peer.id)
                return
            await self.board.run_call(call, lambda session: self._until_over(call, session))
        except Exception:
            log.exception("room %s: WebRTC call failed", call.room_id)
        finally:
            transport.close()
            with contextlib.suppress(Exception):  # a refusal's reason reaches the caller
                await transport.events_sent(timeout=_LAST_EVENTS_TIMEOUT)
            await transport.aclose()
            with contextlib.suppress(Exception):
                await connection.close()
            self.peers.pop(peer.id, None)
            self.ended[peer.id] = None
            while len(self.ended) > _ENDED_REMEMBERED:
                self.ended.popitem(last=False)

    async def _until_over(self, call: LiveCall, session: VoiceSession) -> None:
        transport = call.transport
        assert isinstance(transport, WebRTCTransport)
        transport.audio_sink = session.push_audio
        jobs = {
            asyncio.create_task(self._read(call, transport, session)),
            asyncio.create_task(transport.ended.wait()),
        }
        watch = asyncio.create_task(transport.watch())
        done, _ = await asyncio.wait({*jobs, watch}, return_when=asyncio.FIRST_COMPLETED)
        if watch in done and not transport.ended.is_set():
            reason = watch.result()
            log.info("room %s: the caller is gone: %s", call.room_id, reason)
            transport.close(CloseCode.GOING_AWAY, reason)
        for job in (*jobs, watch):
            await cancel_and_wait(job)

    async def _read(
        self, call: LiveCall, transport: WebRTCTransport, session: VoiceSession
    ) -> None:
        """Client messages on the data channel: acks, hangup, status requests."""
        max_bytes = self.settings.max_text_bytes
        while True:
            message = await transport.messages.get()
            if isinstance(message, bytes):
                call.send(
                    CallError(
                        code="bad_message",
                        message="binary data-channel messages are not part of the protocol: "
                        "caller audio goes on the audio track",
                    )
                )
                continue
            parsed = parse_text_message(message, max_bytes=max_bytes)
            if isinstance(parsed, ProtocolViolation):
                call.send(error_event(parsed))
                if parsed.close_code is not None:
                    call.end(parsed.close_code, parsed.message, "hung_up")
                    return
            elif isinstance(parsed, Playout):
                session.playout_confirmed(parsed.id)
            elif isinstance(parsed, Hangup):
                call.hang_up()
                return
            else:
                call.send(self.board.status(call))


def _refuse(status: int, message: str, headers: dict[str, str] | None = None) -> Response:
    return PlainTextResponse(message, status_code=status, headers=headers)


def webrtc_routes() -> list[Route]:
    """The signaling routes, on the server's `WebRTCDesk`."""

    async def offer(request: Request) -> Response:
        return await parts_of(request).webrtc.offer(request)

    async def hangup(request: Request) -> Response:
        return await parts_of(request).webrtc.hangup(request)

    return [
        Route("/desks/{desk}/webrtc", offer, methods=["POST"]),
        Route("/desks/{desk}/webrtc/{peer}", hangup, methods=["DELETE"]),
    ]
