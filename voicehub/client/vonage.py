"""Vonage's side of a Voice application, for `voicehub call --carrier vonage` (the tests'
Vonage too: `voicehub_dev.fakes.vonage`): signed-JWT webhooks and a WebSocket connection.

Written from Vonage's published docs (docs/carriers.md): the answer webhook is a GET with
`to`, `from`, `uuid` and `conversation_uuid`, signed by a JWT (HS256 under the signature
secret) in `Authorization: Bearer`; events are POSTs whose JWT carries the body's SHA-256 as
`payload_hash`. The answer must be an NCCO whose `connect` names a `websocket` endpoint of
`audio/l16;rate=16000`. On the socket Vonage sends `websocket:connected` (the content type
and the endpoint's headers), then binary PCM16 frames of 640 bytes and `websocket:dtmf`;
it takes binary audio of exactly 640 bytes, `{"action": "notify"}` (echoed as
`websocket:notify` once the audio before it has played) and `{"action": "clear"}` (answered
with `websocket:cleared`; the notifies it dropped are forgotten). It buffers 3072 frames of audio
ahead of playback; a frame past that is lost (a problem here). A hang-up closes the socket.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import time
import uuid
from typing import Any, Literal
from urllib.parse import urlencode

import httpx

from voicehub.client.carrier_answers import StreamAnswer, Tunnel
from voicehub.client.carrier_line import CarrierLine, Heard
from voicehub.errors import MissingExtraError, ProtocolError

__all__ = ["BUFFER_MESSAGES", "VonageDialect", "VonageSide"]

_FRAME = 640  # 20 ms of PCM16 at 16 kHz
# "Vonage will only buffer 3072 messages (~60 s)" of audio sent ahead of playback (its
# tutorial on playing audio into a WebSocket): past that, frames are lost.
BUFFER_MESSAGES = 3072


class VonageSide(Tunnel):
    """Vonage's side of a Voice application whose answer URL is ours."""

    def __init__(self, local_url: str, public_url: str, signature_secret: str) -> None:
        super().__init__(local_url, public_url)
        self.secret = signature_secret
        self.api_key = "abcd1234"
        self.application_id = str(uuid.uuid4())

    def token(self, body: bytes = b"") -> str:
        claims: dict[str, Any] = {
            "iat": int(time.time()),
            "jti": str(uuid.uuid4()),
            "iss": "Vonage",
            "api_key": self.api_key,
            "application_id": self.application_id,
        }
        if body:
            claims["payload_hash"] = hashlib.sha256(body).hexdigest()
        try:
            import jwt
        except ImportError:
            raise MissingExtraError("PyJWT (signed webhooks)", "vonage") from None
        return str(jwt.encode(claims, self.secret, algorithm="HS256"))

    async def incoming_call(self, desk: str, caller: str, call_id: str = "") -> StreamAnswer:
        call_id = call_id or str(uuid.uuid4())
        query = {
            "to": "15550009996",
            "from": caller.lstrip("+"),
            "uuid": call_id,
            "conversation_uuid": "CON-" + str(uuid.uuid4()),
        }
        url = self.local(self.public(f"/vonage/{desk}/answer?{urlencode(query)}"))
        async with httpx.AsyncClient(timeout=10) as client:
            response = await client.get(url, headers={"Authorization": f"Bearer {self.token()}"})
        response.raise_for_status()
        return parse_ncco(response.json(), call_id, caller)

    def stream(
        self, answer: StreamAnswer, **options: Any
    ) -> contextlib.AbstractAsyncContextManager[CarrierLine]:
        return self.open_stream(answer, VonageDialect(answer), **options)


def parse_ncco(ncco: Any, call_id: str, caller: str) -> StreamAnswer:
    """The websocket endpoint of an NCCO's `connect`; ProtocolError if there is none."""
    if not isinstance(ncco, list):
        raise ProtocolError(f"an NCCO is a JSON list of actions, not {type(ncco).__name__}")
    for action in ncco:
        if not isinstance(action, dict) or action.get("action") != "connect":
            continue
        for endpoint in action.get("endpoint", []):
            if endpoint.get("type") != "websocket":
                continue
            uri = endpoint.get("uri", "")
            if not uri.startswith(("wss://", "ws://")):
                raise ProtocolError(f"the websocket uri {uri!r} must be wss://")
            if endpoint.get("content-type") != "audio/l16;rate=16000":
                raise ProtocolError(f"content-type {endpoint.get('content-type')!r}: use 16 kHz")
            headers = {k: str(v) for k, v in (endpoint.get("headers") or {}).items()}
            return StreamAnswer(uri, headers, call_id, caller, None, {"content-type": "l16"})
    raise ProtocolError(f"no connect action to a websocket endpoint in the NCCO: {ncco!r}")


class VonageDialect:
    """Vonage's frames on a WebSocket of PCM16 at 16 kHz."""

    encoding: Literal["mulaw", "pcm16"] = "pcm16"
    rate = 16000
    marks_returned_on_clear = False
    buffer_frames: int | None = BUFFER_MESSAGES

    def __init__(self, answer: StreamAnswer) -> None:
        self.answer = answer

    def opening(self) -> list[str]:
        connected = {"event": "websocket:connected", "content-type": "audio/l16;rate=16000"}
        return [json.dumps({**connected, **self.answer.parameters})]

    def media(self, chunk: bytes, number: int) -> bytes:
        return chunk

    def dtmf(self, digit: str) -> str:
        return json.dumps({"event": "websocket:dtmf", "digit": digit, "duration": 260})

    def stop(self) -> None:
        return None

    def heard(self, message: str | bytes) -> list[Heard]:
        if isinstance(message, bytes):
            if len(message) != _FRAME:
                return [("problem", f"an audio frame of {len(message)} bytes, not {_FRAME}")]
            return [("audio", message)]
        frame = json.loads(message)
        action = frame.get("action")
        if action == "clear":
            return [("clear", None)]
        name = (frame.get("payload") or {}).get("name") if action == "notify" else None
        if isinstance(name, str):
            return [("mark", name)]
        return [("problem", f"Vonage does not take this frame: {message[:120]}")]

    def mark_played(self, name: str) -> str:
        return json.dumps({"event": "websocket:notify", "payload": {"name": name}})

    def cleared(self) -> str:
        return json.dumps({"event": "websocket:cleared"})
