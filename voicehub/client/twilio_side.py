"""Twilio's side of phone calls, for `voicehub call --twilio`: it runs each call's TwiML
(`voicehub.client.twiml_call.Call`), posts the call's webhooks signed as Twilio does (the
answer, redirect and action URLs, status callbacks) and opens the media streams the TwiML
names, playing the agent's audio `playout_speed` times faster than real time.

    side = TwilioSide(TwilioCaller(server, public_url, auth_token))
    ...                           # calls added with add_call, then call.run(twiml)
    await side.end_calls()

What it does not do is serve the account's REST API: a server that moves a call (a
transfer's `<Dial>`, a call-back, an SMS) needs the stand-in of the development tools
(`voicehub_dev.fakes.twilio_account.TwilioAccount`, a subclass of this one), which
`voicehub call --twilio --twilio-api PORT` loads through the `voicehub.twilio_account`
entry point.
"""

from __future__ import annotations

import asyncio
import xml.etree.ElementTree as ET
from collections.abc import Callable
from typing import Any

from voicehub.client.twilio import PhoneLineClient, StreamAnswer, TwilioCaller
from voicehub.client.twiml_call import Call
from voicehub.core.clock import Clock, SystemClock
from voicehub.core.jobs import TaskSet

__all__ = ["TwilioSide"]


class TwilioSide:
    """Twilio's side of the calls of one account (see the module)."""

    def __init__(
        self,
        twilio: TwilioCaller,
        *,
        clock: Clock | None = None,
        playout_speed: float = 16.0,
    ) -> None:
        self.twilio = twilio
        self.account_sid = twilio.account_sid
        self.clock = clock or SystemClock()
        self.playout_speed = playout_speed
        self.problems: list[str] = []  # what the server under test got wrong
        self.answered: asyncio.Queue[PhoneLineClient] = asyncio.Queue()
        self.calls: dict[str, Call] = {}
        self.changed = asyncio.Event()  # set on every change of a call
        self.on_call: Callable[[Call], None] | None = None
        self._tasks = TaskSet("the Twilio side")

    async def end_calls(self) -> None:
        """Hang up every call and stop what runs for them."""
        for call in list(self.calls.values()):
            await call.end()
        await self._tasks.aclose()

    async def redirect(self, call: Call, url: str) -> None:
        """The call update with `Url`: the call runs the TwiML fetched from `url`."""
        twiml = await self.fetch_twiml(call, url)
        if twiml is not None:
            call.run(twiml)

    # -- what calls do, for `Call` ---------------------------------------------------------

    def phone_line(self, answer: StreamAnswer) -> PhoneLineClient:
        return PhoneLineClient(
            self.twilio.local(answer.url, scheme="ws"),
            answer,
            account_sid=self.account_sid,
            clock=self.clock,
            playout_speed=self.playout_speed,
        )

    async def stream_opened(self, call: Call, phone: PhoneLineClient) -> None:
        if call.direction != "inbound":
            await self.answered.put(phone)
        self.touch()

    async def fetch_twiml(self, call: Call, url: str, **extra: str) -> str | None:
        """POST the call's parameters to `url` (an answer, redirect or action URL)."""
        reply = await self.post(url, call.params(**extra), "TwiML")
        if reply is None or reply.status_code != 200:
            return None
        try:
            ET.fromstring(reply.text)
        except ET.ParseError:
            self.problems.append(f"TwiML from {url} is not XML: {reply.text[:200]!r}")
            return None
        return str(reply.text)

    async def call_ended(self, call: Call) -> None:
        self.touch()
        callback = call.form.get("StatusCallback")
        if callback:
            await self.post(callback, call.params(), "status")

    async def dial(self, call: Call, dial: ET.Element) -> str | None:
        """`<Dial>`: a callee or a conference is the REST stand-in's (`--twilio-api`)."""
        self.problems.append(
            f"call {call.sid}: <Dial> needs the account's REST API stand-in "
            "(voicehub call --twilio-api, from the development tools)"
        )
        await call.end("failed")
        return None

    def describe(self) -> list[str]:
        """What each call did, one line per step."""
        lines: list[str] = []
        for call in self.calls.values():
            who = f"call {call.sid[-6:]} {call.direction} {call.from_} -> {call.to}"
            lines += [f"{who}: {step}" for step in call.history]
            lines += [f"{who}: hold audio: {url}" for url in call.played]
        return lines

    def transfer_resolved(self, call: Call) -> bool:
        """Whether a call the server moved is settled: back with the agent, or over."""
        back = call.stream is not None and not call.stream.closed.is_set()
        return back or call.ended.is_set() or call.bridged

    # -- plumbing --------------------------------------------------------------------------

    async def post(self, url: str, params: dict[str, str], what: str) -> Any:
        try:
            reply = await self.twilio.post_to(url, params)
        except Exception as exc:  # the server may be shutting down
            self.problems.append(f"{what} webhook {url} failed: {exc!r}")
            return None
        if reply.status_code >= 300:
            self.problems.append(f"{what} webhook {url} gave {reply.status_code}: {reply.text}")
        return reply

    def add_call(self, call: Call) -> None:
        self.calls[call.sid] = call
        if self.on_call is not None:
            self.on_call(call)
        self.touch()

    def touch(self) -> None:
        self.changed.set()

    def spawn(self, job: Any) -> None:
        """Run `job` in the background until it ends or the side closes."""
        self._tasks.start(job)

    async def wait_for(self, predicate: Callable[[], Any], timeout: float = 20.0) -> Any:
        """Until `predicate()` is truthy (checked on every change); returns its value."""

        async def until() -> Any:
            while not (value := predicate()):
                self.changed.clear()
                await self.changed.wait()
            return value

        async with asyncio.timeout(timeout):
            return await until()
