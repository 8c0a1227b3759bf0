"""A fake LiveKit server: the agent worker protocol over a WebSocket on 127.0.0.1, and the
two server API calls a fail-over needs.

It speaks the `livekit.protocol.agent` messages the way the server does (as read from
livekit-agents' `worker.py` and the protocol definitions): the worker connects to `/agent`
with a bearer JWT carrying the `agent` video grant, sends `register` and waits for the
server's `register` answer; the server offers a job with an `availability` request, the
worker answers, the server sends the `assignment` (room URL and the agent's room token),
and may send a `termination`. The worker sends `update_worker` (status, load, job count)
and `update_job` messages on the same socket. Several workers may be connected at once;
`send` and `offer` go to the last one unless told which.

The server API is Twirp (protobuf over HTTP POST, a bearer JWT with the `roomAdmin` grant),
as livekit's `api.LiveKitAPI` calls it: `RoomService/ListParticipants` answers from
`participants` (room name -> identities, set by the test), and
`AgentDispatchService/CreateDispatch` records the dispatch and offers a job for the room to
a connected worker registered under its agent name (one that did not run the room's last
job, if there is one). Rooms themselves (WebRTC) are not faked.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from typing import Any

import jwt
from aiohttp import WSMsgType, web
from livekit import api
from livekit.protocol import agent, agent_dispatch, models, room


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

    async def start(self) -> str:
        app = web.Application()
        app.router.add_get("/agent", self._agent)
        app.router.add_post("/twirp/livekit.RoomService/ListParticipants", self._participants)
        app.router.add_post(
            "/twirp/livekit.AgentDispatchService/CreateDispatch", self._create_dispatch
        )
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
            return web.json_response({"code": "unauthenticated", "msg": "no"}, status=401)
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
            return web.json_response({"code": "unauthenticated", "msg": "no"}, status=401)
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
