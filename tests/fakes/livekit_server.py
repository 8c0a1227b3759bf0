"""A fake LiveKit server: the agent worker protocol over a WebSocket on 127.0.0.1.

It speaks the `livekit.protocol.agent` messages the way the server does (as read from
livekit-agents' `worker.py` and the protocol definitions): the worker connects to `/agent`
with a bearer JWT carrying the `agent` video grant, sends `register` and waits for the
server's `register` answer; the server offers a job with an `availability` request, the
worker answers, the server sends the `assignment` (room URL and the agent's room token),
and may send a `termination`. The worker sends `update_worker` (status, load, job count)
and `update_job` messages on the same socket. Rooms themselves (WebRTC) are not faked.

It also serves the SIP service of the server API as livekit's Twirp does (protobuf bodies
on `POST /twirp/livekit.SIP/<Method>`, errors as Twirp JSON): `TransferSIPParticipant` (a
cold transfer: SIP REFER) and `CreateSIPParticipant` (dialling someone into a room), each
checking the bearer token's grants as the server does (`sip.call`; for a transfer also
`roomAdmin` on that room). `sip_outcomes` says how each call goes: "answered", or "busy"
(SIP 486) and "no-answer" (480) as the SIP errors livekit returns; `sip_requests` records
every accepted request.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from typing import Any

import jwt
from aiohttp import WSMsgType, web
from livekit import api
from livekit.protocol import agent, models, sip

_SIP_ERRORS = {"busy": ("486", "Busy Here"), "no-answer": ("480", "Temporarily Unavailable")}


class FakeLiveKitServer:
    """Serves one worker connection at a time; `received` has every worker message."""

    def __init__(
        self, api_key: str = "devkey", api_secret: str = "a-dev-secret-32-bytes-long-xxxxx"
    ):
        self.api_key, self.api_secret = api_key, api_secret
        self.url = ""
        self.auth_claims: dict[str, Any] | None = None
        self.registration: agent.RegisterWorkerRequest | None = None
        self.received: list[agent.WorkerMessage] = []
        self._arrived = asyncio.Condition()
        self.connected = asyncio.Event()
        self._socket: web.WebSocketResponse | None = None
        self._runner: web.AppRunner | None = None
        self.sip_outcomes: deque[str] = deque()
        self.sip_requests: list[tuple[str, Any]] = []  # (method, request message)

    async def start(self) -> str:
        app = web.Application()
        app.router.add_get("/agent", self._agent)
        app.router.add_post("/twirp/livekit.SIP/{method}", self._sip)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{port}"
        return self.url

    async def aclose(self) -> None:
        if self._socket is not None:
            await self._socket.close()
        if self._runner is not None:
            await self._runner.cleanup()

    # -- the SIP service -----------------------------------------------------------------

    async def _sip(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        kinds = {
            "TransferSIPParticipant": sip.TransferSIPParticipantRequest,
            "CreateSIPParticipant": sip.CreateSIPParticipantRequest,
        }
        if method not in kinds:
            return _twirp_error(404, "bad_route", f"no method {method}")
        if request.content_type != "application/protobuf":
            return _twirp_error(400, "malformed", f"content type {request.content_type}")
        message = kinds[method]()
        message.ParseFromString(await request.read())
        try:
            claims = jwt.decode(
                request.headers.get("Authorization", "").removeprefix("Bearer "),
                self.api_secret,
                algorithms=["HS256"],
            )
        except jwt.PyJWTError:
            return _twirp_error(401, "unauthenticated", "invalid token")
        video = claims.get("video", {})
        admin = video.get("roomAdmin") and video.get("room") == message.room_name
        if not claims.get("sip", {}).get("call") or (
            method == "TransferSIPParticipant" and not admin
        ):
            return _twirp_error(403, "permission_denied", "the token lacks the SIP grants")
        self.sip_requests.append((method, message))
        outcome = self.sip_outcomes.popleft() if self.sip_outcomes else "answered"
        if outcome in _SIP_ERRORS:
            code, status = _SIP_ERRORS[outcome]
            meta = {"sip_status_code": code, "sip_status": status}
            return _twirp_error(503, "unavailable", f"sip call failed: {code} {status}", meta)
        if method == "TransferSIPParticipant":
            answer: Any = sip.TransferSIPParticipantResponse(
                transfer_id="STR_fake", status=sip.STS_TRANSFER_SUCCESSFUL
            )
        else:
            answer = sip.SIPParticipantInfo(
                participant_id="PA_fake",
                participant_identity=message.participant_identity,
                room_name=message.room_name,
                sip_call_id="SCL_fake",
            )
        return web.Response(body=answer.SerializeToString(), content_type="application/protobuf")

    # -- the protocol, server side ---------------------------------------------------------

    async def _agent(self, request: web.Request) -> web.StreamResponse:
        header = request.headers.get("Authorization", "")
        try:
            claims = jwt.decode(
                header.removeprefix("Bearer "), self.api_secret, algorithms=["HS256"]
            )
        except jwt.PyJWTError:
            return web.Response(status=401, text="invalid token")
        if claims.get("iss") != self.api_key or not claims.get("video", {}).get("agent"):
            return web.Response(status=403, text="the token has no agent grant")
        self.auth_claims = claims
        socket = web.WebSocketResponse()
        await socket.prepare(request)
        first = agent.WorkerMessage()
        first.ParseFromString(await socket.receive_bytes())
        if first.WhichOneof("message") != "register":
            await socket.close(code=1002, message=b"expected register")
            return socket
        self.registration = first.register
        answer = agent.ServerMessage(
            register=agent.RegisterWorkerResponse(
                worker_id="AW_fake", server_info=models.ServerInfo(version="fake", protocol=16)
            )
        )
        await socket.send_bytes(answer.SerializeToString())
        self._socket = socket
        self.connected.set()
        async for message in socket:
            if message.type != WSMsgType.BINARY:
                continue
            parsed = agent.WorkerMessage()
            parsed.ParseFromString(message.data)
            async with self._arrived:
                self.received.append(parsed)
                self._arrived.notify_all()
        return socket

    async def send(self, message: agent.ServerMessage) -> None:
        assert self._socket is not None, "no worker connected"
        await self._socket.send_bytes(message.SerializeToString())

    async def wait_for(
        self, kind: str, predicate: Callable[[Any], bool] = lambda _: True, timeout: float = 10
    ) -> Any:
        """The first worker message of `kind` (e.g. "update_worker") satisfying `predicate`,
        among those received so far and later."""

        def found() -> Any:
            for message in self.received:
                if message.WhichOneof("message") == kind and predicate(getattr(message, kind)):
                    return getattr(message, kind)
            return None

        async def wait() -> Any:
            async with self._arrived:
                await self._arrived.wait_for(lambda: found() is not None)
            return found()

        return await asyncio.wait_for(wait(), timeout)

    async def registered(self, timeout: float = 20) -> agent.RegisterWorkerRequest:
        """The worker's registration, once it has been answered."""
        await asyncio.wait_for(self.connected.wait(), timeout)
        assert self.registration is not None
        return self.registration

    def job(self, job_id: str, room: str, *, metadata: str = "", agent_name: str = "") -> agent.Job:
        return agent.Job(
            id=job_id,
            dispatch_id=f"AD_{job_id}",
            type=agent.JobType.JT_ROOM,
            room=models.Room(sid=f"RM_{room}", name=room),
            metadata=metadata,
            agent_name=agent_name,
        )

    async def offer(self, job: agent.Job) -> agent.AvailabilityResponse:
        """Ask the worker whether it takes `job`; assign it if it does."""
        await self.send(agent.ServerMessage(availability=agent.AvailabilityRequest(job=job)))
        answer: agent.AvailabilityResponse = await self.wait_for(
            "availability", lambda a: a.job_id == job.id
        )
        if answer.available:
            token = (
                api.AccessToken(self.api_key, self.api_secret)
                .with_identity(answer.participant_identity)
                .with_kind("agent")
                .with_grants(api.VideoGrants(room_join=True, room=job.room.name, agent=True))
                .to_jwt()
            )
            assignment = agent.JobAssignment(job=job, url=self.url, token=token)
            await self.send(agent.ServerMessage(assignment=assignment))
        return answer

    async def terminate(self, job_id: str) -> None:
        await self.send(agent.ServerMessage(termination=agent.JobTermination(job_id=job_id)))


def _twirp_error(
    status: int, code: str, message: str, meta: dict[str, str] | None = None
) -> web.Response:
    body = {"code": code, "msg": message, **({"meta": meta} if meta else {})}
    return web.json_response(body, status=status)
