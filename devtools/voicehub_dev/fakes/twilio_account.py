"""A stand-in for a Twilio account's REST API, served on 127.0.0.1, that the real `twilio`
client talks to (its `api.base_url` pointed here, as `TWILIO_API_URL` does). `voicehub call
--twilio --twilio-api` runs one for the call it places (loaded through the
`voicehub.twilio_account` entry point); the tests use it as their fake. It is the product's
`voicehub.client.twilio_side.TwilioSide` (calls running TwiML, webhooks, media streams)
with the REST API, `<Dial>` (callees, conferences) and messages on top.

    async with TwilioAccount(twilio) as account:       # twilio: the `TwilioCaller` side
        account.callees.extend(["no-answer", "machine", "human"])  # who each call meets
        ...
        phone = await account.answered.get()           # a stream a callee's call opened

Resources: `Calls` (create, fetch, update with `Twiml`, `Url` or `Status`), `Messages`
(create, list by `To`, `From`, `DateSent>`), `Conferences` and their `Participants` (list,
fetch). Like Twilio, every request needs HTTP basic auth with the account sid and auth token
(401, code 20003) and the documented parameters (400 with Twilio's error code); an unknown
sid is 404 (20404) and redirecting a call that is over 400 (21220). Every callback Twilio
would make (answer and `action` URLs, status callbacks, `AsyncAmdStatusCallback`, conference
events) is a signed POST.

Each outbound call meets the next entry of `callees`: "no-answer", "busy" or "failed" end it
with that status; "human" and "machine" answer it. With `MachineDetection` the answer says
who (`AnsweredBy`: human, machine_start, or machine_end_beep for `DetectMessageEnd`): in the
answer webhook, or with `AsyncAmd=true` in the `AsyncAmdStatusCallback` posted once the
answer's TwiML runs. The calls' TwiML runs in `voicehub.client.twiml_call`.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import re
import xml.etree.ElementTree as ET
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import parse_qsl

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from voicehub.client.twilio import PhoneLineClient, StreamAnswer, TwilioCaller
from voicehub.client.twilio_side import TwilioSide
from voicehub.client.twiml_call import ENDED, Call
from voicehub.core.clock import Clock
from voicehub_dev.fakes.twilio_rooms import (
    Conference,
    conference,
    conferences,
    join_conference,
    messages,
    participants,
    rfc2822,
)

__all__ = ["TwilioAccount"]

_BASE = "/2010-04-01/Accounts/{account}"
_DIALABLE = re.compile(r"\+[1-9][0-9]{6,14}|sips?:\S+@\S+|client:\S+")


def _error(status: int, code: int, message: str) -> JSONResponse:
    body = {"code": code, "message": message, "more_info": f"twilio error {code}", "status": status}
    return JSONResponse(body, status_code=status)


class _Uvicorn(uvicorn.Server):
    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.listening = asyncio.Event()

    async def startup(self, sockets: Any = None) -> None:
        await super().startup(sockets=sockets)
        self.listening.set()

    @contextlib.contextmanager
    def capture_signals(self) -> Any:  # signals belong to the program around it
        yield


def call_resource(call: Call) -> dict[str, Any]:
    """A call as the REST API shows it."""
    account = call.account.account_sid
    return {
        "sid": call.sid,
        "account_sid": account,
        "to": call.to,
        "from": call.from_,
        "status": call.status,
        "direction": call.direction,
        "answered_by": call.answered_by,
        "api_version": "2010-04-01",
        "date_created": rfc2822(call.created),
        "uri": f"/2010-04-01/Accounts/{account}/Calls/{call.sid}.json",
    }


class TwilioAccount(TwilioSide):
    """One Twilio account: its REST API, calls, conferences and messages (see the module)."""

    def __init__(
        self,
        twilio: TwilioCaller,
        *,
        clock: Clock | None = None,
        playout_speed: float = 16.0,
        port: int = 0,
    ) -> None:
        super().__init__(twilio, clock=clock, playout_speed=playout_speed)
        self.auth_token = twilio.auth_token  # what the API takes (webhooks keep the caller's)
        self.callees: deque[str] = deque()
        self.default_callee = "no-answer"
        self.created: list[dict[str, str]] = []  # the form of every accepted call create
        self.updates: list[tuple[str, dict[str, str]]] = []  # (call sid, form) accepted
        self.refused = 0
        self.conferences: dict[str, Conference] = {}
        self.messages: list[dict[str, Any]] = []
        # While set and not set(): a message is accepted, then its response held back (a
        # sender killed mid-request never learns that it went out).
        self.message_gate: asyncio.Event | None = None
        self._server: _Uvicorn | None = None
        self._serving: asyncio.Task[None] | None = None
        self.port = port

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def __aenter__(self) -> TwilioAccount:
        base = _BASE
        app = Starlette(
            routes=[
                Route(f"{base}/Calls.json", self._create_call, methods=["POST"]),
                Route(f"{base}/Calls/{{sid}}.json", self._call, methods=["GET", "POST"]),
                Route(f"{base}/Messages.json", self._on(messages), methods=["GET", "POST"]),
                Route(f"{base}/Conferences.json", self._on(conferences), methods=["GET"]),
                Route(f"{base}/Conferences/{{sid}}.json", self._on(conference), methods=["GET"]),
                Route(
                    f"{base}/Conferences/{{sid}}/Participants.json",
                    self._on(participants),
                    methods=["GET"],
                ),
            ]
        )
        config = uvicorn.Config(
            app,
            host="127.0.0.1",
            port=self.port,
            log_level="warning",
            loop="asyncio",
            timeout_graceful_shutdown=1,
        )
        self._server = server = _Uvicorn(config)
        self._serving = asyncio.create_task(server.serve())
        listening = asyncio.create_task(server.listening.wait())
        await asyncio.wait({self._serving, listening}, return_when=asyncio.FIRST_COMPLETED)
        if not server.started:
            listening.cancel()
            await self._serving
            raise RuntimeError(f"the stand-in Twilio API could not listen on port {self.port}")
        self.port = server.servers[0].sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.end_calls()
        if self.message_gate is not None:
            self.message_gate.set()
        assert self._server is not None and self._serving is not None
        self._server.should_exit = True
        await asyncio.wait_for(self._serving, 30)

    # -- calls placed from outside the API -------------------------------------------------

    def adopt_inbound(self, answer: StreamAnswer, phone: PhoneLineClient, caller: str) -> Call:
        """An incoming call whose stream the caller opened (`TwilioCaller`): the API can
        redirect it from now on; it ends when the caller hangs up."""
        call = Call(self, to="+15550009999", from_=caller, direction="inbound", sid=answer.call_sid)
        call.status = "in-progress"
        call.add_leg(phone)
        call.history.append("stream: connected to the server")
        self.add_call(call)

        async def until_hung_up() -> None:
            await phone.closed.wait()
            if call.stream is phone:  # the caller hung up (not a redirect)
                await call.end()

        self.spawn(until_hung_up())
        return call

    # -- the REST API: calls ---------------------------------------------------------------

    async def _create_call(self, request: Request) -> JSONResponse:
        form = await self.form(request)
        if isinstance(form, JSONResponse):
            return form
        for name in ("To", "From"):
            if not form.get(name):
                return self.refuse(400, 21201, f"Missing required parameter {name}")
        if not form.get("Url") and not form.get("Twiml"):
            return self.refuse(400, 21205, "Url parameter is required")
        if not _DIALABLE.fullmatch(form["To"]):
            return self.refuse(400, 21211, f"Invalid 'To' Phone Number: {form['To']}")
        self.created.append(form)
        call = Call(self, to=form["To"], from_=form["From"], direction="outbound-api", form=form)
        self.add_call(call)
        callee = self.callees.popleft() if self.callees else self.default_callee
        self.spawn(self._place(call, callee))
        return JSONResponse(call_resource(call), status_code=201)

    async def _call(self, request: Request) -> JSONResponse:
        form = await self.form(request)
        if isinstance(form, JSONResponse):
            return form
        call = self.calls.get(request.path_params["sid"])
        if call is None:
            return self.refuse(
                404, 20404, f"The requested resource {request.url.path} was not found"
            )
        if request.method == "GET":
            return JSONResponse(call_resource(call))
        if call.status in ENDED:
            return self.refuse(400, 21220, "Call is not in-progress. Cannot redirect.")
        self.updates.append((call.sid, form))
        status = form.get("Status")
        if status in ("completed", "canceled"):
            self.spawn(call.end(status))
        elif form.get("Twiml"):
            call.run(form["Twiml"])
        elif form.get("Url"):
            self.spawn(self.redirect(call, form["Url"]))
        else:
            return self.refuse(400, 21205, "Url, Twiml or Status is required")
        self.touch()
        return JSONResponse(call_resource(call))

    async def _place(self, call: Call, callee: str) -> None:
        """An outbound call from `calls.create` meets `callee`."""
        call.status = "ringing"
        if callee in ("no-answer", "busy", "failed"):
            await call.end(callee)
            return
        call.status = "in-progress"
        form = call.form
        detection = form.get("MachineDetection")
        verdict = None
        if detection is not None:
            machine = "machine_end_beep" if detection == "DetectMessageEnd" else "machine_start"
            verdict = "human" if callee == "human" else machine
        asynchronous = form.get("AsyncAmd", "false").lower() == "true"
        if verdict is not None and not asynchronous:
            call.answered_by = verdict
        twiml = form.get("Twiml") or await self.fetch_twiml(call, form["Url"])
        if twiml is None:
            await call.end("failed")
            return
        call.run(twiml)
        if verdict is not None and asynchronous:
            callback = form.get("AsyncAmdStatusCallback")
            if not callback:
                self.problems.append(f"call {call.sid}: AsyncAmd without AsyncAmdStatusCallback")
                return
            await asyncio.sleep(0)  # the answer's TwiML is running: then the verdict comes
            call.answered_by = verdict
            await self.post(callback, call.params(MachineDetectionDuration="2400"), "AMD")

    # -- what calls do, for `Call` ---------------------------------------------------------

    async def dial(self, call: Call, dial: ET.Element) -> str | None:
        """`<Dial>` with a number, `<Number>`, `<Sip>` (a leg to a callee: bridged when
        answered, the `action` URL told `DialCallStatus` otherwise) or `<Conference>`."""
        timeout = float(dial.get("timeout", "30"))
        conference = dial.find("Conference")
        if conference is not None:
            await join_conference(self, call, conference)
            status = "completed"
        else:
            nouns = [n for n in dial if n.tag in ("Number", "Sip")]
            to = (nouns[0].text if nouns else dial.text) or ""
            try:
                status = await self.dial_leg(call, to.strip(), timeout)
            except asyncio.CancelledError:
                # Hung up during the dial: Twilio still requests the action (its TwiML unused).
                action = dial.get("action")
                if action is not None and call.status in ENDED:
                    ended = "completed" if call.bridged else "canceled"
                    self.spawn(self.fetch_twiml(call, action, DialCallStatus=ended))
                raise
        action = dial.get("action")
        if action is None or call.status in ENDED:
            return None
        return await self.fetch_twiml(call, action, DialCallStatus=status)

    def describe(self) -> list[str]:
        lines = super().describe()
        for room in self.conferences.values():
            lines.append(f"conference {room.name}: {room.status}, {len(room.joined)} joined")
        return lines + [f"SMS to {m['to']}: {m['body']!r}" for m in self.messages]

    def transfer_resolved(self, call: Call) -> bool:
        conference = self.conferences.get(call.conference or "")
        joined = conference is not None and conference.status == "in-progress"
        return joined or super().transfer_resolved(call)

    async def dial_leg(self, parent: Call, to: str, timeout: float) -> str:
        """`<Dial>` to a number or SIP URI: the callee's answer, or why there was none."""
        leg = Call(self, to=to, from_=parent.to, direction="outbound-dial")
        self.add_call(leg)
        parent.history.append(f"dial: {to}")
        callee = self.callees.popleft() if self.callees else self.default_callee
        if callee in ("no-answer", "busy", "failed"):
            await leg.end(callee)
            parent.history.append(f"dial: {to} {callee}")
            return callee
        leg.status, parent.bridged = "in-progress", True
        parent.history.append(f"dial: {to} answered: bridged")
        waits = {asyncio.create_task(leg.ended.wait()), asyncio.create_task(parent.ended.wait())}
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in waits:
                task.cancel()
            await leg.end()
        return "completed"

    # -- plumbing --------------------------------------------------------------------------

    def _on(self, endpoint: Callable[[TwilioAccount, Request], Awaitable[JSONResponse]]) -> Any:
        async def handle(request: Request) -> JSONResponse:
            return await endpoint(self, request)

        return handle

    def page(self, request: Request, key: str, items: list[dict[str, Any]]) -> JSONResponse:
        size = int(request.query_params.get("PageSize", "50"))
        return JSONResponse(
            {
                key: items[:size],
                "page": 0,
                "page_size": size,
                "start": 0,
                "end": max(0, min(size, len(items)) - 1),
                "first_page_uri": request.url.path,
                "next_page_uri": None,
                "previous_page_uri": None,
                "uri": request.url.path,
            }
        )

    async def form(self, request: Request) -> dict[str, str] | JSONResponse:
        if not self._authorized(request) or request.path_params["account"] != self.account_sid:
            return self.refuse(401, 20003, "Authenticate")
        return dict(parse_qsl((await request.body()).decode(), keep_blank_values=True))

    def _authorized(self, request: Request) -> bool:
        header = request.headers.get("authorization", "")
        if not header.startswith("Basic "):
            return False
        user, _, password = base64.b64decode(header[6:]).decode().partition(":")
        return (user, password) == (self.account_sid, self.auth_token)

    def refuse(self, status: int, code: int, message: str) -> JSONResponse:
        self.refused += 1
        return _error(status, code, message)

    def change(self, conference: Conference) -> None:
        conference.changed.set()
        self.touch()
