"""A fake Twilio REST API for `calls.create`, served on a free loopback port, that the real
`twilio` client talks to (its `api.base_url` pointed here, as `TWILIO_API_URL` does).

    async with FakeTwilioRest(twilio) as rest:       # twilio: the FakeTwilio of the account
        rest.callees.extend(["no-answer", "machine", "human"])   # what each call meets
        ...
        phone = await rest.answered.get()            # a PhoneLineClient once a person answers

Like Twilio, a create needs HTTP basic auth with the account sid and auth token (401
otherwise) and `To`, `From` and `Url` (400 otherwise), and answers 201 with the call
resource. Then the call plays out as the next entry of `callees` says: "no-answer", "busy"
or "failed" post that status to the `StatusCallback`; "machine" posts the `Url` with
`AnsweredBy=machine_start` (the answer must hang up) and then `completed`; "human" posts the
`Url` with `AnsweredBy=human`, opens the `<Connect><Stream>` of its TwiML like an incoming
call and hands the line to the test, and reports `completed` once the line is closed.
Every callback is signed like Twilio's.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import uuid
import xml.etree.ElementTree as ET
from collections import deque
from typing import Any
from urllib.parse import parse_qsl

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from tests.e2e_helpers import _Server
from tests.fakes.twilio import FakeTwilio, PhoneLineClient, parse_twiml
from voicehub.core.clock import SystemClock


class FakeTwilioRest:
    """The REST side of a fake Twilio account (see the module docstring)."""

    def __init__(self, twilio: FakeTwilio, *, playout_speed: float = 16.0) -> None:
        self.twilio = twilio
        self.playout_speed = playout_speed
        self.callees: deque[str] = deque()
        self.created: list[dict[str, str]] = []  # the form of every accepted create
        self.refused = 0
        self.auth_token = twilio.auth_token  # what the API takes (the webhooks keep theirs)
        self.answered: asyncio.Queue[PhoneLineClient] = asyncio.Queue()
        self.problems: list[str] = []  # what the server under test got wrong
        self._tasks: set[asyncio.Task[None]] = set()
        self._server: uvicorn.Server | None = None
        self._serving: asyncio.Task[None] | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def __aenter__(self) -> FakeTwilioRest:
        app = Starlette(
            routes=[
                Route("/2010-04-01/Accounts/{account}/Calls.json", self._create, methods=["POST"])
            ]
        )
        config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", loop="asyncio")
        self._server = server = _Server(config)
        self._serving = asyncio.create_task(server.serve())
        listening = asyncio.create_task(server.listening.wait())
        await asyncio.wait({self._serving, listening}, return_when=asyncio.FIRST_COMPLETED)
        if not server.started:
            listening.cancel()
            await self._serving
            raise RuntimeError("the fake REST API did not start")
        self.port = server.servers[0].sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        assert self._server is not None and self._serving is not None
        self._server.should_exit = True
        await asyncio.wait_for(self._serving, 30)

    # -- the API ---------------------------------------------------------------------------

    async def _create(self, request: Request) -> JSONResponse:
        if (
            not self._authorized(request)
            or request.path_params["account"] != self.twilio.account_sid
        ):
            self.refused += 1
            return JSONResponse(
                {"code": 20003, "message": "Authenticate", "status": 401}, status_code=401
            )
        form = dict(parse_qsl((await request.body()).decode(), keep_blank_values=True))
        missing = [name for name in ("To", "From", "Url") if not form.get(name)]
        if missing:
            self.refused += 1
            message = f"Missing required parameter {missing[0]}"
            return JSONResponse({"code": 21201, "message": message, "status": 400}, status_code=400)
        sid = "CA" + uuid.uuid4().hex
        self.created.append(form)
        callee = self.callees.popleft() if self.callees else "no-answer"
        task = asyncio.create_task(self._play(sid, form, callee))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        resource: dict[str, Any] = {
            "sid": sid,
            "account_sid": self.twilio.account_sid,
            "to": form["To"],
            "from": form["From"],
            "status": "queued",
            "direction": "outbound-api",
            "api_version": "2010-04-01",
            "uri": f"/2010-04-01/Accounts/{self.twilio.account_sid}/Calls/{sid}.json",
        }
        return JSONResponse(resource, status_code=201)

    def _authorized(self, request: Request) -> bool:
        header = request.headers.get("authorization", "")
        if not header.startswith("Basic "):
            return False
        user, _, password = base64.b64decode(header[6:]).decode().partition(":")
        return (user, password) == (self.twilio.account_sid, self.auth_token)

    # -- the call --------------------------------------------------------------------------

    async def _play(self, sid: str, form: dict[str, str], callee: str) -> None:
        params = {
            "AccountSid": self.twilio.account_sid,
            "CallSid": sid,
            "From": form["From"],
            "To": form["To"],
            "Direction": "outbound-api",
            "ApiVersion": "2010-04-01",
        }
        if callee in ("no-answer", "busy", "failed"):
            await self._status(form, {**params, "CallStatus": callee})
            return
        detected = "human" if callee == "human" else "machine_start"
        answer = await self.twilio.post_to(
            form["Url"], {**params, "CallStatus": "in-progress", "AnsweredBy": detected}
        )
        if answer.status_code != 200:
            self.problems.append(f"answer webhook gave {answer.status_code}: {answer.text}")
        elif callee == "machine":
            if ET.fromstring(answer.text).find("Hangup") is None:
                self.problems.append(f"a machine answered and got {answer.text}")
        else:
            phone = PhoneLineClient(
                self.twilio.local(parse_twiml(answer.text, sid).url, scheme="ws"),
                parse_twiml(answer.text, sid),
                account_sid=self.twilio.account_sid,
                clock=SystemClock(),
                playout_speed=self.playout_speed,
            )
            await phone.open()
            await self.answered.put(phone)
            await phone.closed.wait()
        await self._status(form, {**params, "CallStatus": "completed"})

    async def _status(self, form: dict[str, str], params: dict[str, str]) -> None:
        url = form.get("StatusCallback")
        if url:
            with contextlib.suppress(Exception):  # the server may be shutting down
                reply = await self.twilio.post_to(url, params)
                if reply.status_code >= 300:
                    self.problems.append(f"status callback gave {reply.status_code}")
