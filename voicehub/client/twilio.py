"""Twilio's side of a phone call, for `voicehub call --twilio` and the tests' fake Twilio:
the webhook signer and the Media Streams client.

    twilio = TwilioCaller(server.url, public_url="https://voicehub.test", auth_token=TOKEN)
    answer = await twilio.incoming_call("research", caller="+15550100")   # signed POST
    async with twilio.stream(answer) as phone:      # the WebSocket Twilio would open
        await phone.wait_quiet(1.0)                 # the greeting has played
        await phone.say(pcm16_16k)                  # 20 ms mu-law frames, real-time pace
        ...

Like Twilio, it signs each webhook (`X-Twilio-Signature` over the public URL and the
form, computed by the `twilio` package's own validator), reads the TwiML answer, and opens
the `<Stream url>` it names, reached through the "tunnel" (the public host maps to the local
server). On the stream it sends `connected`, `start` with the `<Parameter>`s, then `media`
every 20 ms (silence between utterances, as an open phone line does) and `stop` on hangup.
It plays the agent's `media` on a virtual speaker (`playout_speed` times real time, on an
injected clock), echoes each `mark` once the audio before it has played, and on `clear`
drops the unplayed audio and echoes the pending marks at once.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import uuid
import xml.etree.ElementTree as ET
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httpx
from twilio.request_validator import RequestValidator
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from voicehub.core.clock import Clock, SystemClock
from voicehub.errors import ProtocolError
from voicehub.voice.audio import lin2ulaw, resample_pcm16, ulaw2lin

FRAME = 160  # 20 ms of 8 kHz mu-law
FRAME_SECONDS = 0.02
SILENCE = b"\xff" * FRAME  # mu-law zero
_INTERNAL_ERROR = 1011  # the server closed the stream: the call could not start (or broke)


def sign(auth_token: str, url: str, params: dict[str, str]) -> str:
    """The `X-Twilio-Signature` Twilio computes for a webhook request."""
    return str(RequestValidator(auth_token).compute_signature(url, params))


@dataclass(frozen=True)
class StreamAnswer:
    """What a TwiML `<Connect><Stream>` answer asks Twilio to open."""

    url: str  # as written in the TwiML (wss://public-host/...)
    parameters: dict[str, str]
    call_sid: str
    status_callback: str | None


@dataclass
class TwilioCaller:
    """Twilio's side of the account: signs webhooks and opens media streams."""

    local_url: str  # http://127.0.0.1:<port>: where the tunnel ends
    public_url: str  # https://voicehub.test: what Twilio was told
    auth_token: str
    account_sid: str = "AC" + "0" * 32

    def local(self, public: str, scheme: str = "http") -> str:
        """The tunnel: a public URL as the local server's URL."""
        parts = urlsplit(public)
        local = urlsplit(self.local_url)
        scheme = scheme if parts.scheme in ("https", "http") else "ws"
        return f"{scheme}://{local.netloc}{parts.path}" + (f"?{parts.query}" if parts.query else "")

    async def post(
        self,
        path: str,
        params: dict[str, str],
        *,
        signature: str | bool | None = True,
    ) -> httpx.Response:
        """A webhook POST to `path`, signed like Twilio (`signature=True`), or with the
        header `signature` given (None: no header)."""
        return await self.post_to(self.public_url.rstrip("/") + path, params, signature=signature)

    async def post_to(
        self, url: str, params: dict[str, str], *, signature: str | bool | None = True
    ) -> httpx.Response:
        """A webhook POST to the public `url` (as a TwiML `url` attribute names it)."""
        headers = {}
        if signature is True:
            headers["X-Twilio-Signature"] = sign(self.auth_token, url, params)
        elif isinstance(signature, str):
            headers["X-Twilio-Signature"] = signature
        async with httpx.AsyncClient(timeout=10) as client:
            return await client.post(self.local(url), data=params, headers=headers)

    def call_params(self, caller: str, call_sid: str | None = None) -> dict[str, str]:
        return {
            "AccountSid": self.account_sid,
            "CallSid": call_sid or "CA" + uuid.uuid4().hex,
            "From": caller,
            "To": "+15550009999",
            "CallStatus": "ringing",
            "Direction": "inbound",
            "ApiVersion": "2010-04-01",
        }

    async def incoming_call(
        self, desk: str, caller: str, call_sid: str | None = None
    ) -> StreamAnswer:
        """Ring the desk's voice webhook and read the stream out of its TwiML."""
        params = self.call_params(caller, call_sid)
        response = await self.post(f"/twilio/{desk}/voice", params)
        response.raise_for_status()
        return parse_twiml(response.text, params["CallSid"])

    @contextlib.asynccontextmanager
    async def stream(
        self,
        answer: StreamAnswer,
        *,
        clock: Clock | None = None,
        playout_speed: float = 1.0,
        hang_up: bool = True,
    ) -> AsyncIterator[PhoneLineClient]:
        """Open the media stream the TwiML named; `stop` and close at the end."""
        phone = PhoneLineClient(
            self.local(answer.url, scheme="ws"),
            answer,
            account_sid=self.account_sid,
            clock=clock or SystemClock(),
            playout_speed=playout_speed,
        )
        await phone.open()
        try:
            yield phone
        finally:
            await phone.hang_up() if hang_up else await phone.close()


def parse_twiml(text: str, call_sid: str) -> StreamAnswer:
    """The `<Connect><Stream>` of a TwiML answer; ProtocolError if there is none or it
    breaks Twilio's rules (a `wss` URL without a query)."""
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        raise ProtocolError(f"the TwiML answer is not XML ({exc}): {text[:80]!r}") from None
    stream = root.find("./Connect/Stream") if root.tag == "Response" else None
    if stream is None:
        raise ProtocolError(f"no <Response><Connect><Stream> in the TwiML answer: {text[:200]}")
    url = stream.get("url", "")
    if not url.startswith("wss://") or "?" in url:
        raise ProtocolError(f"the <Stream> url {url!r} must be wss:// without a query")
    params = {p.get("name", ""): p.get("value", "") for p in stream.findall("Parameter")}
    return StreamAnswer(url, params, call_sid, stream.get("statusCallback"))


@dataclass
class _Played:
    """Agent audio that has "played" on the phone, and the marks echoed after it;
    `arrivals` is when each media frame arrived (clock time, bytes of 8 kHz PCM16)."""

    pcm16: bytearray = field(default_factory=bytearray)  # 8 kHz
    marks: list[tuple[str, float]] = field(default_factory=list)  # name, clock time
    arrivals: list[tuple[float, int]] = field(default_factory=list)

    def first_audio_after(self, moment: float) -> float | None:
        """When the first agent audio after `moment` arrived (None: none yet)."""
        return next((at for at, _ in self.arrivals if at > moment), None)


class PhoneLineClient:
    """The caller's end of one media stream (what Twilio does for a live call)."""

    def __init__(
        self,
        url: str,
        answer: StreamAnswer,
        *,
        account_sid: str,
        clock: Clock,
        playout_speed: float,
    ) -> None:
        self.url, self.answer, self.clock = url, answer, clock
        self.account_sid = account_sid
        self.playout_speed = playout_speed
        self.stream_sid = "MZ" + uuid.uuid4().hex
        self.received: list[dict[str, Any]] = []  # every frame from the server, parsed
        self.problems: list[str] = []  # frames real Twilio would reject
        self.clears = 0
        self.played = _Played()
        self.last_audio_at = clock.now()  # when agent audio last arrived or played
        self.closed = asyncio.Event()
        self.close_code: int | None = None  # how the server closed the stream, if it did
        self.close_reason = ""
        self._ws: ClientConnection | None = None
        self._sequence = 0
        self._chunk = 0
        self._speech: deque[bytes] = deque()
        self._speech_done: asyncio.Event | None = None
        self._inbox: deque[tuple[str, Any]] = deque()
        self._inbox_ready = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self.hold_marks = False  # a stalled phone: audio "plays" but no mark comes back
        self._held_marks: list[str] = []

    # -- the stream ------------------------------------------------------------------------

    def carry_over(self, previous: PhoneLineClient) -> None:
        """Go on where `previous` (the call's last stream) stopped, before `open`: the
        caller's words not yet sent, and what was received and played so far."""
        self.played, self.received, self.problems = previous.played, previous.received, []
        self.problems = previous.problems
        self._speech, self._speech_done = previous._speech, previous._speech_done
        self.clears, self.last_audio_at = previous.clears, previous.last_audio_at
        self.hold_marks = previous.hold_marks

    async def open(self) -> None:
        self._ws = await connect(self.url, max_size=None, compression=None)
        await self.send({"event": "connected", "protocol": "Call", "version": "1.0.0"})
        start = {
            "streamSid": self.stream_sid,
            "accountSid": self.account_sid,
            "callSid": self.answer.call_sid,
            "tracks": ["inbound"],
            "customParameters": self.answer.parameters,
            "mediaFormat": {"encoding": "audio/x-mulaw", "sampleRate": 8000, "channels": 1},
        }
        await self.send(self._numbered({"event": "start", "start": start}))
        for job in (self._mic(), self._receive(), self._speaker()):
            self._tasks.append(asyncio.create_task(job))

    async def send(self, frame: dict[str, Any] | str) -> None:
        """Send one frame (a dict as JSON; a str as it is, for garbage)."""
        assert self._ws is not None
        text = frame if isinstance(frame, str) else json.dumps(frame)
        with contextlib.suppress(ConnectionClosed):
            await self._ws.send(text)

    async def press(self, digit: str) -> None:
        await self.send(
            self._numbered({"event": "dtmf", "dtmf": {"track": "inbound_track", "digit": digit}})
        )

    async def say(self, pcm16: bytes, sample_rate: int = 16000) -> None:
        """Speak caller audio down the line in real time; returns when it has been sent."""
        ulaw = lin2ulaw(resample_pcm16(pcm16, sample_rate, 8000))
        ulaw += SILENCE[: -len(ulaw) % FRAME]
        self._speech.extend(ulaw[i : i + FRAME] for i in range(0, len(ulaw), FRAME))
        self._speech_done = done = asyncio.Event()
        spoken = asyncio.ensure_future(done.wait())
        gone = asyncio.ensure_future(self.closed.wait())  # the call moved on: stop talking
        try:
            await asyncio.wait({spoken, gone}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            spoken.cancel()
            gone.cancel()

    async def hang_up(self) -> None:
        """The caller hangs up: Twilio sends `stop` and closes the socket."""
        if self._ws is not None and not self.closed.is_set():
            stop = {"accountSid": self.account_sid, "callSid": self.answer.call_sid}
            await self.send(self._numbered({"event": "stop", "stop": stop}))
        await self.close()

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._ws is not None:
            await self._ws.close()
        self.closed.set()

    async def wait_quiet(self, quiet: float, *, after: int = 0, timeout: float = 60.0) -> None:
        """Until more than `after` media frames arrived, all of them played, every mark
        was handled, and no agent audio came for `quiet` seconds (the agent is done)."""

        async def until() -> None:
            while True:
                left = self.last_audio_at + quiet - self.clock.now()
                if left <= 0 and not self._inbox and self.media_frames() > after:
                    return
                await self.clock.sleep(max(left, 0.05))

        async with asyncio.timeout(timeout):
            await until()

    def refusal(self) -> str | None:
        """Why the server refused the call, if it did: it closed the stream as an internal
        error (1011: the call could not start, a desk missing its keys) before any agent
        audio came; None otherwise. A carrier's stream carries no error event, so the close
        reason is all the caller is told (the server's log names the cause)."""
        if not self.closed.is_set() or self.close_code != _INTERNAL_ERROR or self.media_frames():
            return None
        return self.close_reason or "the server could not start the call"

    def media_frames(self) -> int:
        return sum(1 for f in self.received if f.get("event") == "media")

    def played_seconds(self) -> float:
        return len(self.played.pcm16) / 2 / 8000

    # -- internals -------------------------------------------------------------------------

    def _numbered(self, frame: dict[str, Any]) -> dict[str, Any]:
        self._sequence += 1
        return {"sequenceNumber": str(self._sequence), "streamSid": self.stream_sid, **frame}

    async def _mic(self) -> None:
        """An open phone line: a media frame every 20 ms, speech when queued, else silence
        (until the stream closes: words not yet sent go to the call's next stream)."""
        next_at = self.clock.now()
        while not self.closed.is_set():
            payload = self._speech.popleft() if self._speech else SILENCE
            if not self._speech and self._speech_done is not None:
                self._speech_done.set()
                self._speech_done = None
            self._chunk += 1
            media = {
                "track": "inbound",
                "chunk": str(self._chunk),
                "timestamp": str(self._chunk * 20),
                "payload": base64.b64encode(payload).decode(),
            }
            await self.send(self._numbered({"event": "media", "media": media}))
            next_at += FRAME_SECONDS
            await self.clock.sleep(max(0.0, next_at - self.clock.now()))

    async def _receive(self) -> None:
        assert self._ws is not None
        try:
            async for message in self._ws:
                if not isinstance(message, str):
                    self.problems.append("a binary frame: Twilio takes text only (31950)")
                    continue
                try:
                    await self._handle(message)
                except (ValueError, KeyError, TypeError) as exc:
                    self.problems.append(f"malformed frame (31924): {exc!r}: {message[:120]}")
                self._inbox_ready.set()
        except ConnectionClosed:
            pass
        finally:
            if (code := self._ws.close_code) is not None:
                self.close_code, self.close_reason = code, self._ws.close_reason or ""
            self.closed.set()
            self._inbox_ready.set()  # the speaker plays out what arrived, then stops

    async def _handle(self, message: str) -> None:
        frame = json.loads(message)
        self.received.append(frame)
        if frame.get("streamSid") != self.stream_sid:
            self.problems.append(f"wrong streamSid (31951): {message[:120]}")
        event = frame.get("event")
        if event == "media":
            pcm16 = ulaw2lin(base64.b64decode(frame["media"]["payload"]))
            self._inbox.append(("media", pcm16))
            self.last_audio_at = self.clock.now()
            self.played.arrivals.append((self.last_audio_at, len(pcm16)))
        elif event == "mark":
            self._inbox.append(("mark", frame["mark"]["name"]))
        elif event == "clear":
            self.clears += 1
            marks = self._held_marks + [i[1] for i in self._inbox if i[0] == "mark"]
            self._inbox.clear()
            self._held_marks = []
            for name in marks:  # Twilio echoes the pending marks on clear
                await self._echo(name)
        else:
            self.problems.append(f"Twilio rejects event {event!r} (31951)")

    async def _speaker(self) -> None:
        while True:
            while not self._inbox:
                if self.closed.is_set():
                    return  # the stream is over: nothing more will play on it
                self._inbox_ready.clear()
                await self._inbox_ready.wait()
            kind, item = self._inbox[0]
            if kind == "media":
                await self.clock.sleep(len(item) / 2 / 8000 / self.playout_speed)
                if self._inbox and self._inbox[0][1] is item:  # not cleared meanwhile
                    self._inbox.popleft()
                    self.played.pcm16.extend(item)
                    self.last_audio_at = self.clock.now()
            else:
                self._inbox.popleft()
                if self.hold_marks:
                    self._held_marks.append(item)
                else:
                    await self._echo(item)

    async def release_marks(self) -> None:
        """Echo the marks held back since `hold_marks` was set, and stop holding."""
        self.hold_marks = False
        held, self._held_marks = self._held_marks, []
        for name in held:
            await self._echo(name)

    async def _echo(self, name: str) -> None:
        await self.send(self._numbered({"event": "mark", "mark": {"name": name}}))
        self.played.marks.append((name, self.clock.now()))
