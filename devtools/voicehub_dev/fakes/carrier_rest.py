"""Fake REST APIs of Telnyx, Plivo and Vonage for call control, served on 127.0.0.1 over
HTTPS (a certificate made for the test), which the carriers' official SDKs talk to.

Written from the carriers' API references (docs/carriers.md):

- Telnyx: `POST /v2/calls/{call_control_id}/actions/{hangup|transfer|send_dtmf}`, Bearer API
  key; `transfer` needs `to`, `send_dtmf` needs `digits`; a call already ended answers 422
  with error code 90018. An outbound TeXML call: `POST /v2/texml/Accounts/{account_sid}/Calls`
  (JSON, `ApplicationSid`, `To` and `From` required; `Url`, `StatusCallback`,
  `MachineDetection`), answered with `{"from", "to", "status": "queued"}`; a live TeXML call's
  update: `POST /v2/texml/Accounts/{account_sid}/Calls/{call_sid}` (`Url`, `Method`), 404 for
  a call that is over.
- Plivo: `/v1/Account/{auth_id}/Call/{uuid}/`, HTTP Basic: POST with `legs`/`aleg_url` (a
  transfer), DELETE (hang up: 204), POST `.../DTMF/` with `digits`; an unknown call is 404.
  An outbound call: `POST /v1/Account/{auth_id}/Call/` (`from`, `to`, `answer_url` required),
  201 with `request_uuid`.
- Vonage: `PUT /v1/calls/{uuid}` with `{"action": "hangup"}` or `{"action": "transfer",
  "destination": {"type": "ncco", "ncco": [...]}}` (204), `PUT /v1/calls/{uuid}/dtmf` with
  `digits`; a JWT (RS256) under the application's key, checked with its public key. An
  outbound call: `POST /v1/calls` (`to`, and `answer_url` or `ncco`), 201 with `uuid`.

    async with CarrierRest(public_key_pem) as rest:   # rest.url: https://127.0.0.1:<port>
        ...
        rest.requests   # (carrier, hangup|transfer|send_digits|dial, call id, body) in order
        rest.ended      # call ids that are over (their actions fail as the carrier's do)
"""

from __future__ import annotations

import asyncio
import base64
import json
import ssl
import tempfile
import uuid
from pathlib import Path
from typing import Any

import jwt
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from voicehub.server.in_loop import LoopServer
from voicehub_dev.fakes.webhook_receiver import make_certificate

__all__ = ["CarrierRest"]

TELNYX_KEY = "KEYtelnyx0123456789"
PLIVO_ID, PLIVO_TOKEN = "MAPLIVO0000000000000", "plivo-token-0123456789"


class CarrierRest:
    """See the module docstring."""

    def __init__(self, vonage_public_key: str) -> None:
        self.vonage_public_key = vonage_public_key
        self.requests: list[tuple[str, str, str, dict[str, Any]]] = []
        self.ended: set[str] = set()
        self._dir = tempfile.TemporaryDirectory(prefix="voicehub-carrier-rest-")
        self.cert, self.key = make_certificate(Path(self._dir.name))
        self.port = 0
        self._server: LoopServer | None = None
        self._serving: asyncio.Task[None] | None = None

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def ssl_context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.cert))

    async def __aenter__(self) -> CarrierRest:
        routes = [
            Route("/v2/calls/{call}/actions/{action}", self._telnyx, methods=["POST"]),
            Route("/v2/texml/Accounts/{account}/Calls", self._telnyx_dial, methods=["POST"]),
            Route(
                "/v2/texml/Accounts/{account}/Calls/{call}", self._telnyx_update, methods=["POST"]
            ),
            Route("/v1/Account/{account}/Call/", self._plivo_dial, methods=["POST"]),
            Route("/v1/calls", self._vonage_dial, methods=["POST"]),
            Route("/v1/Account/{account}/Call/{call}/", self._plivo, methods=["POST", "DELETE"]),
            Route("/v1/Account/{account}/Call/{call}/DTMF/", self._plivo_dtmf, methods=["POST"]),
            Route("/v1/calls/{call}", self._vonage, methods=["PUT"]),
            Route("/v1/calls/{call}/dtmf", self._vonage_dtmf, methods=["PUT"]),
        ]
        config = uvicorn.Config(
            Starlette(routes=routes),
            host="127.0.0.1",
            port=0,
            log_level="warning",
            loop="asyncio",
            timeout_graceful_shutdown=1,
            ssl_certfile=str(self.cert),
            ssl_keyfile=str(self.key),
        )
        self._server = server = LoopServer(config)
        self._serving = asyncio.create_task(server.serve())
        await server.listening.wait()
        self.port = server.servers[0].sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None and self._serving is not None
        self._server.should_exit = True
        await asyncio.wait_for(self._serving, 30)
        self._dir.cleanup()

    # -- Telnyx ------------------------------------------------------------------------------

    async def _telnyx(self, request: Request) -> Response:
        if request.headers.get("authorization") != f"Bearer {TELNYX_KEY}":
            return _telnyx_error(401, "10009", "Authentication failed")
        call, action = request.path_params["call"], request.path_params["action"]
        body = json.loads(await request.body() or b"{}")
        needed = {"hangup": (), "transfer": ("to",), "send_dtmf": ("digits",)}.get(action)
        if needed is None:
            return _telnyx_error(404, "10005", f"unknown action {action!r}")
        if missing := [key for key in needed if not body.get(key)]:
            return _telnyx_error(422, "10032", f"missing {', '.join(missing)}")
        if call in self.ended:
            return _telnyx_error(422, "90018", "Call has already ended")
        recorded = "send_digits" if action == "send_dtmf" else action
        self.requests.append(("telnyx", recorded, call, body))
        if action in ("hangup", "transfer"):
            self.ended.add(call)
        return JSONResponse({"data": {"result": "ok"}})

    async def _telnyx_dial(self, request: Request) -> Response:
        if request.headers.get("authorization") != f"Bearer {TELNYX_KEY}":
            return _telnyx_error(401, "10009", "Authentication failed")
        body = json.loads(await request.body() or b"{}")
        if missing := [key for key in ("ApplicationSid", "To", "From") if not body.get(key)]:
            return _telnyx_error(422, "10032", f"missing {', '.join(missing)}")
        call = f"v3:{uuid.uuid4().hex}"
        self.requests.append(("telnyx", "dial", call, body))
        return JSONResponse({"from": body["From"], "to": body["To"], "status": "queued"})

    async def _telnyx_update(self, request: Request) -> Response:
        if request.headers.get("authorization") != f"Bearer {TELNYX_KEY}":
            return _telnyx_error(401, "10009", "Authentication failed")
        call = request.path_params["call"]
        body = json.loads(await request.body() or b"{}")
        if call in self.ended:
            return _telnyx_error(404, "10005", "Resource not found")
        if not str(body.get("Url", "")).startswith("https://"):
            return _telnyx_error(422, "10032", "Url must be an https URL")
        self.requests.append(("telnyx", "redirect", call, body))
        return JSONResponse({"call_sid": call, "status": "in-progress"})

    # -- Plivo -------------------------------------------------------------------------------

    async def _plivo_dial(self, request: Request) -> Response:
        if not self._plivo_auth(request):
            return JSONResponse({"error": "authentication failed"}, status_code=401)
        body = json.loads(await request.body() or b"{}")
        if missing := [key for key in ("from", "to", "answer_url") if not body.get(key)]:
            return JSONResponse({"error": f"missing {', '.join(missing)}"}, status_code=400)
        call = str(uuid.uuid4())
        self.requests.append(("plivo", "dial", call, body))
        reply = {"api_id": str(uuid.uuid4()), "message": "call fired", "request_uuid": call}
        return JSONResponse(reply, status_code=201)

    def _plivo_auth(self, request: Request) -> bool:
        expected = base64.b64encode(f"{PLIVO_ID}:{PLIVO_TOKEN}".encode()).decode()
        auth_ok = request.headers.get("authorization") == f"Basic {expected}"
        return auth_ok and request.path_params["account"] == PLIVO_ID

    async def _plivo(self, request: Request) -> Response:
        if not self._plivo_auth(request):
            return JSONResponse({"error": "authentication failed"}, status_code=401)
        call = request.path_params["call"]
        if call in self.ended:
            return JSONResponse({"error": "call not found"}, status_code=404)
        if request.method == "DELETE":
            self.requests.append(("plivo", "hangup", call, {}))
            self.ended.add(call)
            return Response(status_code=204)
        body = json.loads(await request.body() or b"{}")
        if body.get("legs") != "aleg" or not str(body.get("aleg_url", "")).startswith("https://"):
            return JSONResponse({"error": "legs=aleg and an https aleg_url"}, status_code=400)
        self.requests.append(("plivo", "transfer", call, body))
        self.ended.add(call)
        return JSONResponse({"api_id": "x", "message": "call transferred"}, status_code=202)

    async def _plivo_dtmf(self, request: Request) -> Response:
        if not self._plivo_auth(request):
            return JSONResponse({"error": "authentication failed"}, status_code=401)
        call = request.path_params["call"]
        body = json.loads(await request.body() or b"{}")
        if call in self.ended or not body.get("digits"):
            return JSONResponse({"error": "call not found or no digits"}, status_code=404)
        self.requests.append(("plivo", "send_digits", call, body))
        return JSONResponse({"api_id": "x", "message": "digits sent"}, status_code=202)

    # -- Vonage ------------------------------------------------------------------------------

    async def _vonage_dial(self, request: Request) -> Response:
        if not self._vonage_auth(request):
            return JSONResponse({"title": "Unauthorized"}, status_code=401)
        body = json.loads(await request.body() or b"{}")
        if not body.get("to") or not (body.get("answer_url") or body.get("ncco")):
            return JSONResponse({"title": "Bad Request"}, status_code=400)
        call = str(uuid.uuid4())
        self.requests.append(("vonage", "dial", call, body))
        reply = {
            "uuid": call,
            "status": "started",
            "direction": "outbound",
            "conversation_uuid": "CON-" + str(uuid.uuid4()),
        }
        return JSONResponse(reply, status_code=201)

    def _vonage_auth(self, request: Request) -> bool:
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        try:
            jwt.decode(token, self.vonage_public_key, algorithms=["RS256"])
        except jwt.PyJWTError:
            return False
        return scheme == "Bearer"

    async def _vonage(self, request: Request) -> Response:
        if not self._vonage_auth(request):
            return JSONResponse({"title": "Unauthorized"}, status_code=401)
        call = request.path_params["call"]
        body = json.loads(await request.body() or b"{}")
        action = body.get("action")
        if call in self.ended:
            return JSONResponse({"title": "Not Found"}, status_code=404)
        destination = body.get("destination") or {}
        if action == "transfer" and destination.get("type") != "ncco":
            return JSONResponse({"title": "Bad Request"}, status_code=400)
        if action not in ("hangup", "transfer"):
            return JSONResponse({"title": "Bad Request"}, status_code=400)
        self.requests.append(("vonage", action, call, body))
        self.ended.add(call)
        return Response(status_code=204)

    async def _vonage_dtmf(self, request: Request) -> Response:
        if not self._vonage_auth(request):
            return JSONResponse({"title": "Unauthorized"}, status_code=401)
        call = request.path_params["call"]
        body = json.loads(await request.body() or b"{}")
        if call in self.ended or not body.get("digits"):
            return JSONResponse({"title": "Not Found"}, status_code=404)
        self.requests.append(("vonage", "send_digits", call, body))
        return JSONResponse({"message": "DTMF sent", "uuid": call})


def _telnyx_error(status: int, code: str, title: str) -> JSONResponse:
    return JSONResponse({"errors": [{"code": code, "title": title}]}, status_code=status)
