"""A fake LiveKit server: the agent worker protocol over a WebSocket on 127.0.0.1, and the
server API calls fail-over (room participants, dispatch) and SIP control need.

It speaks the `livekit.protocol.agent` messages the way the server does (as read from
livekit-agents' `worker.py` and the protocol definitions): the worker connects to `/agent`
with a bearer JWT carrying the `agent` video grant, sends `register` and waits for the
server's `register` answer; the server offers a job with an `availability` request, the
worker answers, the server sends the `assignment` (room URL and the agent's room token),
and may send a `termination`. The worker sends `update_worker` (status, load, job count)
and `update_job` messages on the same socket. Several workers may be connected at once;
`send` and `offer` go to the last one unless told which.

The server API is Twirp (protobuf over HTTP POST, a bearer JWT, errors as Twirp JSON), as
livekit's `api.LiveKitAPI` calls it. Rooms themselves (WebRTC) are not faked.

- `RoomService/ListParticipants` (grant `roomAdmin`) answers from `participants` (room name
  -> identities, set by the test).
- `AgentDispatchService/CreateDispatch` (grant `roomAdmin`) records the dispatch and offers a
  job for the room to a connected worker registered under its agent name (one that did not
  run the room's last job, if there is one).
- The SIP service (`POST /twirp/livekit.SIP/<Method>`): `TransferSIPParticipant` (a cold
  transfer: SIP REFER) and `CreateSIPParticipant` (dialling someone into a room), each
  checking the token's grants as the server does (`sip.call`; for a transfer also
  `roomAdmin` on that room). `sip_outcomes` says how each call goes: "answered", or "busy"
  (SIP 486) and "no-answer" (480) as the SIP errors livekit returns; `sip_requests` records
  every accepted request.
"""

from __future__ import annotations

import asyncio
import itertools
from collections import deque
from collections.abc import Callable
from typing import Any

import jwt
from aiohttp import WSMsgType, web
from livekit import api
from livekit.protocol import agent, agent_dispatch, models, room, sip

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
        self.senders: list[str] = []  # the worker id of each message in `received`
        self._arrived = asyncio.Condition()
        self.connected = asyncio.Event()
        self._socket: web.WebSocketResponse | None = None
        self._runner: web.AppRunner | None = None
        self.workers: dict[str, tuple[web.WebSocketResponse, agent.RegisterWorkerRequest]] = {}
        self.participants: dict[str, list[str]] = {}
        self.dispatches: list[agent_dispatch.CreateAgentDispatchRequest] = []
        self.jobs: list[tuple[str, agent.Job]] = []  # (worker id, job) of each assignment
        self._ids = itertools.count(1)
        self.sip_outcomes: deque[str] = deque()
        self.sip_requests: list[tuple[str, Any]] = []  # (method, request message)

    async def start(self) -> str:
        app = web.Application()
        app.router.add_get("/agent", self._agent)
        app.router.add_post("/twirp/livekit.RoomService/ListParticipants", self._participants)
        app.router.add_post(
            "/twirp/livekit.AgentDispatchService/CreateDispatch", self._create_dispatch
        )
        app.router.add_post("/twirp/livekit.SIP/{method}", self._sip)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{port}"
        return self.url

    async def aclose(self) -> None:
        for socket, _ in list(self.workers.values()):
            await socket.close()
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
        number = next(self._ids)
        worker_id = "AW_fake" if number == 1 else f"AW_fake{number}"
        answer = agent.ServerMessage(
            register=agent.RegisterWorkerResponse(
                worker_id=worker_id, server_info=models.ServerInfo(version="fake", protocol=16)
            )
        )
        await socket.send_bytes(answer.SerializeToString())
        self._socket = socket
        self.workers[worker_id] = (socket, first.register)
        self.connected.set()
        try:
            async for message in socket:
                if message.type != WSMsgType.BINARY:
                    continue
                parsed = agent.WorkerMessage()
                parsed.ParseFromString(message.data)
                async with self._arrived:
                    self.received.append(parsed)
                    self.senders.append(worker_id)
                    self._arrived.notify_all()
        finally:
            self.workers.pop(worker_id, None)  # the worker is gone (or was killed)
        return socket

    async def send(self, message: agent.ServerMessage, worker: str | None = None) -> None:
        socket = self.workers[worker][0] if worker is not None else self._socket
        assert socket is not None, "no worker connected"
        await socket.send_bytes(message.SerializeToString())

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

    async def offer(self, job: agent.Job, worker: str | None = None) -> agent.AvailabilityResponse:
        """Ask the worker (the last connected, or `worker`) whether it takes `job`; assign
        it if it does."""
        request = agent.ServerMessage(availability=agent.AvailabilityRequest(job=job))
        await self.send(request, worker)
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
            await self.send(agent.ServerMessage(assignment=assignment), worker)
            chosen = worker or next(w for w, (s, _) in self.workers.items() if s is self._socket)
            self.jobs.append((chosen, job))
        return answer

    # -- the server API (Twirp) --------------------------------------------------------------

    def _admin(self, request: web.Request, room_name: str) -> bool:
        header = request.headers.get("Authorization", "")
        try:
            claims = jwt.decode(
                header.removeprefix("Bearer "), self.api_secret, algorithms=["HS256"]
            )
        except jwt.PyJWTError:
            return False
        video = claims.get("video", {})
        return bool(claims.get("iss") == self.api_key and video.get("roomAdmin")) and (
            video.get("room") in (None, "", room_name)
        )

    async def _participants(self, request: web.Request) -> web.Response:
        asked = room.ListParticipantsRequest()
        asked.ParseFromString(await request.read())
        if not self._admin(request, asked.room):
            return _twirp_error(401, "unauthenticated", "the token lacks roomAdmin")
        found = room.ListParticipantsResponse(
            participants=[
                models.ParticipantInfo(identity=identity, state=models.ParticipantInfo.ACTIVE)
                for identity in self.participants.get(asked.room, [])
            ]
        )
        return web.Response(body=found.SerializeToString(), content_type="application/protobuf")

    async def _create_dispatch(self, request: web.Request) -> web.Response:
        asked = agent_dispatch.CreateAgentDispatchRequest()
        asked.ParseFromString(await request.read())
        if not self._admin(request, asked.room):
            return _twirp_error(401, "unauthenticated", "the token lacks roomAdmin")
        self.dispatches.append(asked)
        number = len(self.dispatches)
        job = self.job(
            f"job-dispatch-{number}",
            asked.room,
            metadata=asked.metadata,
            agent_name=asked.agent_name,
        )
        last = next((w for w, j in reversed(self.jobs) if j.room.name == asked.room), None)
        named = [w for w, (_, r) in self.workers.items() if r.agent_name == asked.agent_name]
        chosen = next((w for w in named if w != last), named[0] if named else None)
        if chosen is not None:
            asyncio.get_running_loop().create_task(self.offer(job, chosen))
        dispatch = agent_dispatch.AgentDispatch(
            id=f"AD_{number}", agent_name=asked.agent_name, room=asked.room, metadata=asked.metadata
        )
        return web.Response(body=dispatch.SerializeToString(), content_type="application/protobuf")

    async def terminate(self, job_id: str) -> None:
        await self.send(agent.ServerMessage(termination=agent.JobTermination(job_id=job_id)))


def _twirp_error(
    status: int, code: str, message: str, meta: dict[str, str] | None = None
) -> web.Response:
    body = {"code": code, "msg": message, **({"meta": meta} if meta else {})}
    return web.json_response(body, status=status)
