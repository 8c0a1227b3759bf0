"""Telnyx's side of a TeXML number, for `voicehub call --carrier telnyx` (the tests' Telnyx
too: `voicehub_dev.fakes.telnyx`): signed webhooks and the media stream.

Written from Telnyx's published docs (docs/carriers.md has the facts): the call webhook is
a form POST signed with Ed25519 over `timestamp|body` (`telnyx-signature-ed25519`,
`telnyx-timestamp`); the answer must be TeXML `<Connect><Stream bidirectionalMode="rtp">`
with PCMU both ways; the stream sends `connected`, `start` (stream id at the top level,
`call_control_id` and `custom_parameters` inside), `media` with string sequence numbers,
`dtmf` and `stop`, echoes each `mark` once the audio before it has played, and returns
the queued marks on `clear`. Anything else the server sends is a problem.

    telnyx = TelnyxSide(server.url, "https://voicehub.test")   # TELNYX_PUBLIC_KEY=telnyx.public_key
    answer = await telnyx.incoming_call("research", "+15550100")
    async with telnyx.stream(answer) as line: ...
"""

from __future__ import annotations

import base64
import contextlib
import json
import time
import uuid
import xml.etree.ElementTree as ET
from typing import Any, Literal
from urllib.parse import urlencode

import httpx

from voicehub.client.carrier_answers import StreamAnswer, Tunnel
from voicehub.client.carrier_line import CarrierLine, Heard
from voicehub.errors import MissingExtraError, ProtocolError
from voicehub.voice.audio import ulaw2lin

__all__ = ["TelnyxDialect", "TelnyxSide"]


class TelnyxSide(Tunnel):
    """Telnyx's side of a TeXML number."""

    def __init__(self, local_url: str, public_url: str, key: bytes | None = None) -> None:
        super().__init__(local_url, public_url)
        try:
            from nacl.signing import SigningKey
        except ImportError:
            raise MissingExtraError("PyNaCl (Ed25519 signatures)", "telnyx") from None
        # the account's key (its 32-byte seed): Telnyx signs webhooks with it
        self.key = SigningKey(key) if key is not None else SigningKey.generate()

    @property
    def public_key(self) -> str:
        """What the portal shows: the base64 Ed25519 public key (`TELNYX_PUBLIC_KEY`)."""
        return base64.b64encode(bytes(self.key.verify_key)).decode()

    def signed(self, body: bytes, timestamp: int | None = None) -> dict[str, str]:
        stamp = str(int(time.time()) if timestamp is None else timestamp)
        signature = self.key.sign(stamp.encode() + b"|" + body).signature
        return {
            "telnyx-signature-ed25519": base64.b64encode(signature).decode(),
            "telnyx-timestamp": stamp,
        }

    async def post(
        self, path: str, params: dict[str, str], *, headers: dict[str, str] | None = None
    ) -> httpx.Response:
        """A form POST to `path` on the public URL, signed unless `headers` are given."""
        body = urlencode(params).encode()
        sent = {"content-type": "application/x-www-form-urlencoded"}
        sent.update(self.signed(body) if headers is None else headers)
        async with httpx.AsyncClient(timeout=10) as client:
            return await client.post(self.local(self.public(path)), content=body, headers=sent)

    async def incoming_call(self, desk: str, caller: str, call_id: str = "") -> StreamAnswer:
        """Ring the desk's TeXML URL and read the stream out of its answer."""
        call_id = call_id or f"v3:{uuid.uuid4().hex}"
        params = {
            "AccountSid": str(uuid.uuid4()),
            "CallSid": call_id,
            "CallSidLegacy": f"v3:{uuid.uuid4().hex}",
            "CallStatus": "ringing",
            "ConnectionId": "1684641123236054244",
            "Direction": "inbound",
            "From": caller,
            "To": "+15550009998",
        }
        response = await self.post(f"/telnyx/{desk}/voice", params)
        response.raise_for_status()
        return parse_texml(response.text, call_id, caller)

    def dialect(self, answer: StreamAnswer) -> TelnyxDialect:
        return TelnyxDialect(answer)

    def stream(
        self, answer: StreamAnswer, **options: Any
    ) -> contextlib.AbstractAsyncContextManager[CarrierLine]:
        return self.open_stream(answer, self.dialect(answer), **options)


def parse_texml(text: str, call_id: str, caller: str) -> StreamAnswer:
    """The `<Connect><Stream>` of a TeXML answer, checked against what Telnyx needs for a
    two-way RTP stream; ProtocolError otherwise."""
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        raise ProtocolError(f"the TeXML answer is not XML ({exc}): {text[:80]!r}") from None
    stream = root.find("./Connect/Stream") if root.tag == "Response" else None
    if stream is None:
        raise ProtocolError(f"no <Response><Connect><Stream> in the TeXML answer: {text[:200]}")
    url = stream.get("url", "")
    if not url.startswith("wss://"):
        raise ProtocolError(f"the <Stream> url {url!r} must be wss://")
    if stream.get("bidirectionalMode") != "rtp":
        raise ProtocolError("bidirectionalMode must be 'rtp' (the default, mp3, plays files)")
    for attribute in ("bidirectionalCodec", "codec"):
        if stream.get(attribute, "PCMU") != "PCMU":
            raise ProtocolError(
                f"{attribute}={stream.get(attribute)!r}: this Telnyx side speaks PCMU"
            )
    params = {p.get("name", ""): p.get("value", "") for p in stream.findall("Parameter")}
    redirect = root.find("./Redirect")
    after = redirect.text if redirect is not None else None
    return StreamAnswer(url, params, call_id, caller, after, dict(stream.attrib))


class TelnyxDialect:
    """Telnyx's frames on a two-way RTP stream of PCMU at 8 kHz."""

    encoding: Literal["mulaw", "pcm16"] = "mulaw"
    rate = 8000
    marks_returned_on_clear = True
    buffer_frames: int | None = None  # no documented bound

    def __init__(self, answer: StreamAnswer) -> None:
        self.answer = answer
        self.stream_id = str(uuid.uuid4())
        self._sequence = 0

    def _numbered(self, frame: dict[str, Any]) -> str:
        self._sequence += 1
        return json.dumps({"sequence_number": str(self._sequence), **frame})

    def opening(self) -> list[str]:
        start = {
            "user_id": str(uuid.uuid4()),
            "call_control_id": self.answer.call_id,
            "call_session_id": str(uuid.uuid4()),
            "from": self.answer.caller,
            "to": "+15550009998",
            "custom_parameters": self.answer.parameters,
            "media_format": {"encoding": "PCMU", "sample_rate": 8000, "channels": 1},
        }
        return [
            json.dumps({"event": "connected", "version": "1.0.0"}),
            self._numbered({"event": "start", "stream_id": self.stream_id, "start": start}),
        ]

    def media(self, chunk: bytes, number: int) -> str:
        media = {
            "track": "inbound",
            "chunk": str(number),
            "timestamp": str(number * 20),
            "payload": base64.b64encode(chunk).decode(),
        }
        return self._numbered({"event": "media", "stream_id": self.stream_id, "media": media})

    def dtmf(self, digit: str) -> str:
        return self._numbered(
            {"event": "dtmf", "stream_id": self.stream_id, "dtmf": {"digit": digit}}
        )

    def stop(self) -> str:
        stop = {"call_control_id": self.answer.call_id}
        return self._numbered({"event": "stop", "stream_id": self.stream_id, "stop": stop})

    def heard(self, message: str | bytes) -> list[Heard]:
        if isinstance(message, bytes):
            return [("problem", "a binary frame: Telnyx takes JSON text only")]
        frame = json.loads(message)
        event = frame.get("event")
        if event == "media":
            payload = frame.get("media", {}).get("payload")
            if not isinstance(payload, str):
                return [("problem", f"media without a payload: {message[:120]}")]
            return [("audio", ulaw2lin(base64.b64decode(payload)))]
        if event == "mark" and isinstance(frame.get("mark", {}).get("name"), str):
            return [("mark", frame["mark"]["name"])]
        if event == "clear":
            return [("clear", None)]
        return [("problem", f"Telnyx does not take this frame: {message[:120]}")]

    def mark_played(self, name: str) -> str:
        return self._numbered(
            {"event": "mark", "stream_id": self.stream_id, "mark": {"name": name}}
        )

    def cleared(self) -> None:
        return None
