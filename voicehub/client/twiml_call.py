"""A call on Twilio's side, running its TwiML verb by verb as Twilio does, until it ends or
is redirected: what `voicehub call --twilio` needs of Twilio to put a phone call through.

Verbs run: `<Say>` (its text is what the other end heard: `Call.said`), `<Play>` (a URL,
or `digits`: `Call.digits`), `<Pause length>`, `<Hangup/>`, `<Redirect>`, `<Connect><Stream>`
(a media stream to the server, `PhoneLineClient`; it runs until either side closes it).
`<Dial>` is the account's (`TwilioSide.dial`): bridging a callee or a conference needs the
stand-in for the account's REST API of the development tools (`voicehub call --twilio-api`,
`voicehub_dev.fakes.twilio_account`), which the server reaches for transfers. A redirect
(the REST API's call update) stops the verb running, closing a live stream Twilio's way
(`stop`, then the socket closes), and runs the new TwiML. When the TwiML runs out, the call
is over.

A stream the server closes without a hang-up lets the TwiML go on: the `<Redirect>` after
`<Connect><Stream>` brings the call to another instance (fail-over). Each stream is a leg
(`Call.legs`); a new one carries over the caller's words not yet sent and the agent's audio
played so far, as on a phone.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from typing import TYPE_CHECKING

from voicehub.client.twilio import PhoneLineClient, StreamAnswer

if TYPE_CHECKING:
    from voicehub.client.twilio_side import TwilioSide

__all__ = ["ENDED", "Call", "StreamLeg"]

ENDED = frozenset({"completed", "busy", "no-answer", "failed", "canceled"})


@dataclass
class StreamLeg:
    """One media stream of a call: when its socket was asked for (`requested_at`: the
    TwiML's `<Stream>` ran; None when it was not opened by TwiML), when it opened (connected
    and started) and when it closed (the account's clock)."""

    line: PhoneLineClient
    opened_at: float
    closed_at: float | None = None
    requested_at: float | None = None


class Call:
    """One call of the account, inbound or outbound, running its TwiML."""

    def __init__(
        self,
        account: TwilioSide,
        *,
        to: str,
        from_: str,
        direction: str,
        form: dict[str, str] | None = None,
        sid: str | None = None,
    ) -> None:
        self.account = account
        self.sid = sid or "CA" + uuid.uuid4().hex
        self.to, self.from_, self.direction = to, from_, direction
        self.form = form or {}
        self.status = "queued"
        self.created = time.time()
        self.answered_by: str | None = None
        self.stream: PhoneLineClient | None = None  # the live stream, if any
        self.legs: list[StreamLeg] = []  # every stream the call ran, in order
        self.said: list[str] = []  # <Say> texts: what the other end heard
        self.digits: list[str] = []  # <Play digits>
        self.played: list[str] = []  # <Play> URLs (hold music, recordings)
        self.conference: str | None = None
        self.bridged = False  # a <Dial> leg of this call was answered
        self.history: list[str] = []  # what the call did, for reports
        self.ended = asyncio.Event()
        self._runner: asyncio.Task[None] | None = None

    # -- webhooks ----------------------------------------------------------------------------

    def params(self, **extra: str) -> dict[str, str]:
        """What Twilio posts about this call to a webhook."""
        params = {
            "AccountSid": self.account.account_sid,
            "CallSid": self.sid,
            "From": self.from_,
            "To": self.to,
            "Direction": self.direction,
            "ApiVersion": "2010-04-01",
            "CallStatus": self.status,
        }
        if self.answered_by is not None:
            params["AnsweredBy"] = self.answered_by
        return {**params, **extra}

    # -- running TwiML ---------------------------------------------------------------------

    def run(self, twiml: str) -> None:
        """Run `twiml` from its first verb, replacing whatever the call was running."""
        previous = self._runner
        self._runner = asyncio.create_task(self._run(twiml, previous))

    async def wait_ended(self) -> None:
        await self.ended.wait()

    async def end(self, status: str = "completed") -> None:
        """Hang the call up (the caller, the callee or the API)."""
        if self.status in ENDED:
            return
        self.status = status
        runner, self._runner = self._runner, None
        if runner is not None and runner is not asyncio.current_task():
            runner.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await runner
        await self._close_stream()
        self.history.append(f"ended: {status}")
        self.ended.set()
        await self.account.call_ended(self)

    async def _run(self, twiml: str, previous: asyncio.Task[None] | None) -> None:
        if previous is not None and not previous.done():
            previous.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await previous
        await self._close_stream()
        try:
            root = ET.fromstring(twiml)
        except ET.ParseError as exc:
            self.account.problems.append(f"call {self.sid}: TwiML is not XML ({exc}): {twiml!r}")
            await self.end("failed")
            return
        if root.tag != "Response":
            self.account.problems.append(f"call {self.sid}: TwiML root is <{root.tag}>")
        for verb in list(root):
            if self.status in ENDED:
                return
            follow_up = await self._verb(verb)
            if follow_up is not None:  # <Redirect>, a <Dial action>: their TwiML goes on
                self._runner = asyncio.create_task(self._run(follow_up, None))
                return
        await self.end("completed")

    async def _verb(self, verb: ET.Element) -> str | None:
        tag = verb.tag
        if tag == "Say":
            self.said.append((verb.text or "").strip())
            self.history.append(f"say: {(verb.text or '').strip()}")
        elif tag == "Play":
            digits = verb.get("digits")
            if digits is not None:
                self.digits.append(digits)
                self.history.append(f"digits: {digits}")
            else:
                self.played.append((verb.text or "").strip())
        elif tag == "Pause":
            await self.account.clock.sleep(float(verb.get("length", "1")))
        elif tag == "Hangup":
            await self.end("completed")
        elif tag == "Redirect":
            return await self.account.fetch_twiml(self, (verb.text or "").strip())
        elif tag == "Connect":
            stream = verb.find("Stream")
            if stream is None:
                self.account.problems.append(f"call {self.sid}: <Connect> without <Stream>")
            else:
                await self._stream(stream)
        elif tag == "Dial":
            return await self._dial(verb)
        else:
            self.account.problems.append(f"call {self.sid}: unsupported TwiML verb <{tag}>")
        return None

    async def _stream(self, stream: ET.Element) -> None:
        parameters = {p.get("name", ""): p.get("value", "") for p in stream.findall("Parameter")}
        url = stream.get("url", "")
        if not url.startswith("wss://") or "?" in url:
            self.account.problems.append(f"call {self.sid}: bad <Stream url> {url!r}")
            return
        answer = StreamAnswer(url, parameters, self.sid, stream.get("statusCallback"))
        phone = self.account.phone_line(answer)
        if self.legs:
            phone.carry_over(self.legs[-1].line)
        requested = self.account.clock.now()
        await phone.open()
        self.add_leg(phone, requested_at=requested)
        self.history.append("stream: connected to the server")
        await self.account.stream_opened(self, phone)
        await phone.closed.wait()
        self._leg_closed(phone)
        self.stream = None
        self.history.append("stream: closed")

    def add_leg(self, phone: PhoneLineClient, *, requested_at: float | None = None) -> None:
        """`phone` (open) carries the call from now on (asked for at `requested_at`)."""
        self.legs.append(StreamLeg(phone, self.account.clock.now(), requested_at=requested_at))
        self.stream = phone

    def _leg_closed(self, phone: PhoneLineClient) -> None:
        for leg in self.legs:
            if leg.line is phone and leg.closed_at is None:
                leg.closed_at = self.account.clock.now()

    async def _close_stream(self) -> None:
        phone, self.stream = self.stream, None
        if phone is not None and not phone.closed.is_set():
            why = "the call ended" if self.status in ENDED else "the call was redirected"
            self.history.append(f"stream: stopped ({why})")
            await phone.hang_up()  # Twilio's `stop`, then the socket closes
        if phone is not None:
            self._leg_closed(phone)

    async def _dial(self, dial: ET.Element) -> str | None:
        """`<Dial>`: the account's to run; the TwiML of its `action`, if any, goes on."""
        return await self.account.dial(self, dial)
