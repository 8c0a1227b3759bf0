"""Plivo's side of a number, for `voicehub call --carrier plivo` (the tests' Plivo too:
`voicehub_dev.fakes.plivo`): V3-signed webhooks and a bidirectional audio stream.

Written from Plivo's published docs (docs/carriers.md): the answer URL gets a form POST
signed V3 (`X-Plivo-Signature-V3` over the URL and the sorted parameters, with a nonce,
HMAC-SHA256 under the auth token; computed here from the docs, not with the SDK the server
checks it with); the answer must be Plivo XML `<Stream bidirectional="true">` of
`audio/x-mulaw;rate=8000`; the stream sends `start`, `media` (numeric sequence numbers,
unix-ms timestamps) and `dtmf`, answers a `checkpoint` with `playedStream` once the audio
before it has played, and answers `clearAudio` with `clearedAudio`, forgetting the
checkpoints it dropped. There is no stop frame: a hang-up closes the socket.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import json
import secrets
import time
import uuid
import xml.etree.ElementTree as ET
from typing import Any, Literal
from urllib.parse import parse_qsl, urlsplit

import httpx

from voicehub.client.carrier_answers import StreamAnswer, Tunnel
from voicehub.client.carrier_line import CarrierLine, Heard
from voicehub.errors import ProtocolError
from voicehub.voice.audio import ulaw2lin

__all__ = ["PlivoDialect", "PlivoSide", "v3_signature"]


def v3_signature(auth_token: str, url: str, params: dict[str, str], nonce: str) -> str:
    """Plivo's V3 signature of a POST to `url` with form `params`."""
    parts = urlsplit(url)
    message = f"{parts.scheme}://{parts.netloc}{parts.path}"
    query = sorted(parse_qsl(parts.query, keep_blank_values=True))
    if query or not params:
        if query:
            message += "?" + "&".join(f"{k}={v}" for k, v in query)
    else:
        message += "?"
    if query and params:
        message += "."
    message += "".join(f"{key}{params[key]}" for key in sorted(params))
    digest = hmac.new(auth_token.encode(), f"{message}.{nonce}".encode(), hashlib.sha256)
    return base64.b64encode(digest.digest()).decode()


class PlivoSide(Tunnel):
    """Plivo's side of a number whose application answers at our URL."""

    def __init__(self, local_url: str, public_url: str, auth_token: str) -> None:
        super().__init__(local_url, public_url)
        self.auth_token = auth_token

    async def post(
        self, path: str, params: dict[str, str], *, headers: dict[str, str] | None = None
    ) -> httpx.Response:
        url = self.public(path)
        nonce = secrets.token_hex(10)
        signature = v3_signature(self.auth_token, url, params, nonce)
        sent = {
            "X-Plivo-Signature-V3": signature,
            "X-Plivo-Signature-Ma-V3": signature,
            "X-Plivo-Signature-V3-Nonce": nonce,
        }
        if headers is not None:
            sent = headers
        async with httpx.AsyncClient(timeout=10) as client:
            return await client.post(self.local(url), data=params, headers=sent)

    async def incoming_call(self, desk: str, caller: str, call_id: str = "") -> StreamAnswer:
        call_id = call_id or str(uuid.uuid4())
        params = {
            "CallUUID": call_id,
            "From": caller.lstrip("+"),
            "To": "15550009997",
            "Direction": "inbound",
            "CallStatus": "in-progress",
        }
        response = await self.post(f"/plivo/{desk}/answer", params)
        response.raise_for_status()
        return parse_plivo_xml(response.text, call_id, caller)

    def stream(
        self, answer: StreamAnswer, **options: Any
    ) -> contextlib.AbstractAsyncContextManager[CarrierLine]:
        return self.open_stream(answer, PlivoDialect(answer), **options)


def parse_plivo_xml(text: str, call_id: str, caller: str) -> StreamAnswer:
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        raise ProtocolError(f"the Plivo XML answer is not XML ({exc}): {text[:80]!r}") from None
    stream = root.find("./Stream") if root.tag == "Response" else None
    if stream is None or not (stream.text or "").startswith("wss://"):
        raise ProtocolError(f"no <Response><Stream>wss://...</Stream> in the answer: {text[:200]}")
    if stream.get("bidirectional") != "true" or stream.get("audioTrack", "inbound") != "inbound":
        raise ProtocolError("a two-way stream needs bidirectional=true and audioTrack=inbound")
    if stream.get("contentType") != "audio/x-mulaw;rate=8000":
        raise ProtocolError(
            f"contentType {stream.get('contentType')!r}: this Plivo side speaks mu-law"
        )
    url = (stream.text or "").strip()
    headers = dict(
        pair.split("=", 1) for pair in (stream.get("extraHeaders") or "").split(",") if "=" in pair
    )
    headers.update(parse_qsl(urlsplit(url).query))  # data in the stream URL's query
    redirect = root.find("./Redirect")
    after = redirect.text if redirect is not None else None
    return StreamAnswer(url, headers, call_id, caller, after, dict(stream.attrib))


class PlivoDialect:
    """Plivo's frames on a bidirectional stream of mu-law at 8 kHz."""

    encoding: Literal["mulaw", "pcm16"] = "mulaw"
    rate = 8000
    marks_returned_on_clear = False
    buffer_frames: int | None = None  # no documented bound

    def __init__(self, answer: StreamAnswer) -> None:
        self.answer = answer
        self.stream_id = str(uuid.uuid4())
        self._sequence = 0
        self._extra = ";".join(f"{k}={v}" for k, v in answer.parameters.items())

    def _numbered(self, frame: dict[str, Any]) -> str:
        self._sequence += 1
        return json.dumps({"sequenceNumber": self._sequence, **frame})

    def opening(self) -> list[str]:
        start = {
            "callId": self.answer.call_id,
            "streamId": self.stream_id,
            "accountId": "MA" + "0" * 18,
            "tracks": ["inbound"],
            "mediaFormat": {"encoding": "audio/x-mulaw", "sampleRate": 8000},
        }
        return [self._numbered({"event": "start", "start": start, "extra_headers": self._extra})]

    def media(self, chunk: bytes, number: int) -> str:
        media = {
            "track": "inbound",
            "timestamp": str(int(time.time() * 1000)),
            "chunk": number,
            "payload": base64.b64encode(chunk).decode(),
        }
        frame = {"event": "media", "streamId": self.stream_id, "media": media}
        return self._numbered({**frame, "extra_headers": self._extra})

    def dtmf(self, digit: str) -> str:
        return self._numbered(
            {"event": "dtmf", "streamId": self.stream_id, "dtmf": {"digit": digit}}
        )

    def stop(self) -> None:
        return None

    def heard(self, message: str | bytes) -> list[Heard]:
        if isinstance(message, bytes):
            return [("problem", "a binary frame: Plivo takes JSON text only")]
        frame = json.loads(message)
        event = frame.get("event")
        if event == "playAudio":
            media = frame.get("media", {})
            if media.get("contentType") != "audio/x-mulaw" or media.get("sampleRate") != 8000:
                return [("problem", f"playAudio of another format: {message[:120]}")]
            return [("audio", ulaw2lin(base64.b64decode(media["payload"])))]
        if frame.get("streamId") != self.stream_id:
            return [("problem", f"{event!r} for another stream: {message[:120]}")]
        if event == "checkpoint" and isinstance(frame.get("name"), str):
            return [("mark", frame["name"])]
        if event == "clearAudio":
            return [("clear", None)]
        return [("problem", f"Plivo does not take this frame: {message[:120]}")]

    def mark_played(self, name: str) -> str:
        return self._numbered({"event": "playedStream", "streamId": self.stream_id, "name": name})

    def cleared(self) -> str:
        return self._numbered({"event": "clearedAudio", "streamId": self.stream_id})
