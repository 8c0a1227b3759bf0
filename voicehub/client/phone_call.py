"""`voicehub call --twilio`: call a desk as Twilio would put a phone call through.

The caller signs the voice webhook with the auth token for the server's public URL (as
Twilio does), reads the TwiML, opens the `<Connect><Stream>` it names (reached on the local
server: `public_url` stands for a tunnel ending at `server`), then speaks each line as 8 kHz
mu-law in 20 ms frames, plays the agent's audio on a virtual speaker and echoes each mark
once it has played; when a stream closes without a hang-up it follows the TwiML's
`<Redirect>` as Twilio does (the call goes on on another instance). It waits for the agent
after each line and, at the end, until the conversation settles: the agent quiet, and the
server's REST view showing no running task and no result left to speak in the room.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import httpx

from voicehub.client.twilio import PhoneLineClient, TwilioCaller
from voicehub.client.twilio_call import TwilioCall
from voicehub.core.clock import SystemClock
from voicehub.errors import VoicehubError

__all__ = ["PhoneCallOptions", "PhoneCallReport", "format_phone_report", "place_phone_call"]

_UNSETTLED = ("pending", "delivering", "interrupted")


@dataclass(frozen=True)
class PhoneCallOptions:
    desk: str
    server: str  # where the tunnel ends: the local server's http URL
    public_url: str  # the https URL the server was given (`--public-url`)
    auth_token: str  # the Twilio auth token the server checks signatures with
    caller: str = "+15550100000"
    api_token: str | None = None  # the server's access token, for its REST view
    playout_speed: float = 1.0
    quiet: float = 1.5  # seconds without agent audio that end the agent's turn


@dataclass
class PhoneCallReport:
    room_id: str
    started: float = field(default_factory=time.monotonic)
    lines: list[tuple[float, str]] = field(default_factory=list)  # (t, what the caller said)
    marks: list[tuple[float, str]] = field(default_factory=list)  # (t, mark echoed)
    clears: int = 0
    agent_audio: bytes = b""  # PCM16, 8 kHz, as played
    problems: list[str] = field(default_factory=list)
    settled: bool = False
    streams: int = 1  # media streams the call ran on (more after a fail-over or hand-over)


async def place_phone_call(
    options: PhoneCallOptions,
    lines: Sequence[tuple[str, bytes]],
    *,
    settle_timeout: float = 90.0,
) -> PhoneCallReport:
    """Ring the desk, say `lines` ((label, PCM16 at 16 kHz)) one after another, wait for the
    conversation to settle (at most `settle_timeout` seconds), hang up."""
    caller = TwilioCaller(options.server, options.public_url, options.auth_token)
    # Twilio's side of the call: it follows the TwiML's redirect when a stream's instance
    # goes away, so the call goes on on another (`voicehub.client.twilio_call`).
    call = TwilioCall(caller, playout_speed=options.playout_speed)
    await call.dial(options.desk, options.caller)
    conversation = call.line.answer.parameters.get("conversation")
    report = PhoneCallReport(room_id=f"{options.desk}:{conversation}")
    try:
        await _agent_turn(call.line, options.quiet, 0)  # the greeting (none when resuming)
        for label, audio in lines:
            report.lines.append((time.monotonic() - report.started, label))
            frames = call.line.media_frames()
            await call.say(audio)
            await _agent_turn(call.line, options.quiet, frames)
        try:
            await asyncio.wait_for(_settle(options, report.room_id, call), settle_timeout)
            report.settled = True
        except TimeoutError:
            report.settled = False
    finally:
        await call.hang_up()
    phone = call.line
    report.streams = len(call.legs)
    # The phone's clock is the system's monotonic one, as `started` is.
    report.marks = [(at - report.started, name) for name, at in phone.played.marks]
    report.clears, report.problems = phone.clears, list(phone.problems)
    report.agent_audio = bytes(phone.played.pcm16)
    return report


async def _agent_turn(phone: PhoneLineClient, quiet: float, after: int) -> None:
    """Until the agent has spoken (beyond `after` frames) and gone quiet, or 20 s of
    silence show it will not speak."""
    with contextlib.suppress(TimeoutError):  # no answer to that line: go on
        await phone.wait_quiet(quiet, after=after, timeout=20.0)


async def _settle(options: PhoneCallOptions, room_id: str, call: TwilioCall) -> None:
    headers = {"Authorization": f"Bearer {options.api_token}"} if options.api_token else {}
    async with httpx.AsyncClient(base_url=options.server, headers=headers, timeout=10) as api:
        while True:
            tasks = await _get(api, "/api/tasks", room_id, "tasks")
            results = await _get(api, "/api/deliveries", room_id, "deliveries")
            busy = any(t.get("status") == "running" for t in tasks) or any(
                d.get("status") in _UNSETTLED for d in results
            )
            phone = call.line  # the stream carrying the call now
            if not busy and phone.clock.now() - phone.last_audio_at >= options.quiet:
                return
            await SystemClock().sleep(0.25)  # polling the server's REST view


async def _get(api: httpx.AsyncClient, path: str, room_id: str, key: str) -> list[dict[str, str]]:
    response = await api.get(path, params={"room": room_id})
    if response.status_code == 401:
        raise VoicehubError("the server wants its access token: pass --token or VOICEHUB_TOKEN")
    response.raise_for_status()
    found: list[dict[str, str]] = response.json()[key]
    return found


def format_phone_report(report: PhoneCallReport) -> str:
    """The call as a short timeline: what the caller said, when each agent speech played."""
    events = [(t, f"caller: {label}") for t, label in report.lines]
    events += [(t, f"agent speech played (mark {name!r} echoed)") for t, name in report.marks]
    out = [f"room {report.room_id}"]
    out += [f"{t:7.2f}s  {text}" for t, text in sorted(events)]
    seconds = len(report.agent_audio) / 2 / 8000
    out.append(f"agent audio: {seconds:.1f} s in {len(report.marks)} speeches")
    if report.clears:
        out.append(f"barge-in: the server sent clear {report.clears} time(s)")
    out += [f"PROTOCOL PROBLEM: {problem}" for problem in report.problems]
    out.append("settled" if report.settled else "did not settle in time")
    return "\n".join(out)
