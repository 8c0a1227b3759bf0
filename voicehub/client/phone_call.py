"""`voicehub call --twilio`: call a desk as Twilio would put a phone call through.

The caller signs the voice webhook with the auth token for the server's public URL (as
Twilio does), reads the TwiML, opens the `<Connect><Stream>` it names (reached on the local
server: `public_url` stands for a tunnel ending at `server`), then speaks each line as 8 kHz
mu-law in 20 ms frames, plays the agent's audio on a virtual speaker and echoes each mark
once it has played; when a stream closes without a hang-up it follows the TwiML's
`<Redirect>` as Twilio does (the call goes on on another instance). It waits for the agent
after each line and, at the end, until the conversation settles: the agent quiet, and the
server's REST view showing no running task and no result left to speak in the room.

Twilio's side of the call is a `TwilioCall` on a `TwilioSide` (the TwiML runner and the
webhooks, in the product). With `twilio_api` the side is the development tools' account
stand-in, which also serves the REST API (on that 127.0.0.1 port, the server started with
`TWILIO_API_URL` pointing there; loaded through the `voicehub.twilio_account` entry point,
see `twilio_account`): the server may then move the call (a transfer: the stream ends, the
caller waits on hold in a conference), call out (the person a warm transfer calls answers
as `callees` say) and text; the report tells what each call did, and a transfer is followed
until the caller is connected or back with the agent.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Any, Protocol

import httpx

from voicehub.client.call import voiced_seconds
from voicehub.client.twilio import PhoneLineClient, TwilioCaller
from voicehub.client.twilio_call import TwilioCall
from voicehub.client.twilio_side import TwilioSide
from voicehub.client.twiml_call import Call
from voicehub.core.clock import Clock, SystemClock
from voicehub.errors import VoicehubError

__all__ = [
    "PhoneCallOptions",
    "PhoneCallRefused",
    "PhoneCallReport",
    "conversation_settled",
    "first_turn",
    "format_phone_report",
    "greeting_wait",
    "place_phone_call",
    "returning_caller",
    "room_record",
    "voice_to_voice",
]

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
    answer_wait: float = 20.0  # seconds of silence after a line that mean "no answer"
    account_sid: str = "AC" + "0" * 32
    twilio_api: int | None = None  # the port to serve the account's REST API on
    callees: tuple[str, ...] = ()  # who answers the calls the server places, in turn


@dataclass
class PhoneCallReport:
    room_id: str
    started: float = field(default_factory=time.monotonic)
    lines: list[tuple[float, str]] = field(default_factory=list)  # (t, what the caller said)
    marks: list[tuple[float, str]] = field(default_factory=list)  # (t, mark echoed)
    clears: int = 0
    agent_audio: bytes = b""  # PCM16 at `sample_rate`, as played
    sample_rate: int = 8000
    problems: list[str] = field(default_factory=list)
    settled: bool = False
    streams: int = 1  # media streams the call ran on (more after a fail-over or hand-over)
    calls: list[str] = field(default_factory=list)  # what the account's calls did
    wall_started: float = field(default_factory=time.time)  # `started` on the epoch clock
    # (t, who, what): what the server heard, said, ran and delivered, from the room's record
    events: list[tuple[float, str, str]] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)  # voice-to-voice, per line
    tasks_started: int = 0
    tasks_finished: list[str] = field(default_factory=list)  # their statuses
    deliveries: list[str] = field(default_factory=list)  # their outcomes


@dataclass(frozen=True)
class RoomRecord:
    """What the server's record says of a call: its timeline entries `(t, who, what)`, and
    the room's tasks and deliveries."""

    entries: list[tuple[float, str, str]]
    tasks_started: int = 0
    tasks_finished: tuple[str, ...] = ()
    deliveries: tuple[str, ...] = ()

    def fill(self, report: PhoneCallReport) -> None:
        """Put this record into `report`."""
        report.events = self.entries
        report.tasks_started = self.tasks_started
        report.tasks_finished = list(self.tasks_finished)
        report.deliveries = list(self.deliveries)


async def place_phone_call(
    options: PhoneCallOptions,
    lines: Sequence[tuple[str, bytes]],
    *,
    settle_timeout: float = 90.0,
) -> PhoneCallReport:
    """Ring the desk, say `lines` ((label, PCM16 at 16 kHz)) one after another, wait for the
    conversation to settle (at most `settle_timeout` seconds), hang up."""
    caller = TwilioCaller(
        options.server, options.public_url, options.auth_token, account_sid=options.account_sid
    )
    port = options.twilio_api
    if port is None:  # no REST API: the call runs its TwiML all the same
        side = TwilioSide(caller, playout_speed=options.playout_speed)
        try:
            report = await _place(options, side, lines, settle_timeout, transfers=False)
        finally:
            await side.end_calls()
        report.problems += side.problems
        return report
    account = twilio_account(caller, playout_speed=options.playout_speed, port=port)
    account.callees.extend(options.callees)
    async with account:
        report = await _place(options, account, lines, settle_timeout, transfers=True)
    report.problems += account.problems
    return report


def twilio_account(caller: TwilioCaller, *, playout_speed: float, port: int) -> Any:
    """The development tools' stand-in for the account's REST API (`--twilio-api`), found
    through the `voicehub.twilio_account` entry point; VoicehubError when they are not
    installed."""
    found = entry_points(group="voicehub.twilio_account")
    if not found:
        raise VoicehubError(
            "--twilio-api serves a stand-in for Twilio's REST API from voicehub's development "
            "tools: install them (`make install` in a checkout, or `pip install -e devtools`)"
        )
    account = next(iter(found)).load()
    return account(caller, playout_speed=playout_speed, port=port)


async def _place(
    options: PhoneCallOptions,
    account: TwilioSide,
    lines: Sequence[tuple[str, bytes]],
    settle_timeout: float,
    *,
    transfers: bool,
) -> PhoneCallReport:
    # Twilio's side of the call: it follows the TwiML's redirect when a stream's instance
    # goes away, so the call goes on on another (`voicehub.client.twilio_call`).
    call = TwilioCall(account.twilio, account=account)
    dialled_at = time.time()
    await call.dial(options.desk, options.caller)
    conversation = call.line.answer.parameters.get("conversation")
    report = PhoneCallReport(room_id=f"{options.desk}:{conversation}")
    returning = await returning_caller(options, report.room_id, dialled_at)
    ends: list[float] = []  # when the caller stopped speaking, on the phone's clock
    try:
        await _first_turn(call, options, returning)  # the greeting, or a refusal
        for label, audio in lines:
            report.lines.append((time.monotonic() - report.started, label))
            frames = call.line.media_frames()
            await call.say(audio)
            ends.append(time.monotonic() - (len(audio) / 32000 - voiced_seconds(audio)))
            await _agent_turn(call.line, options, frames)
        try:
            async with asyncio.timeout(settle_timeout):
                await _settle(options, report.room_id, call)
            if transfers:
                async with asyncio.timeout(settle_timeout):
                    await _transfer_done(account, call.call, options)
            report.settled = True
        except TimeoutError:
            report.settled = False
    finally:
        if transfers:  # as things stand when the caller hangs up
            report.calls = describe_calls(account)
        await call.hang_up()
    phone = call.line
    report.streams = len(call.legs)
    # The phone's clock is the system's monotonic one, as `started` is.
    report.marks = [(at - report.started, name) for name, at in phone.played.marks]
    report.clears, report.problems = phone.clears, list(phone.problems)
    report.agent_audio = bytes(phone.played.pcm16)
    report.latencies = voice_to_voice(ends, phone.played.first_audio_after)
    record = await room_record(
        options.server, options.api_token, report.room_id, report.wall_started
    )
    record.fill(report)
    return report


def voice_to_voice(
    ends: Sequence[float], first_audio_after: Callable[[float], float | None]
) -> list[float]:
    """For each moment the caller stopped speaking, how long until the agent's audio came
    (the WebSocket report's voice-to-voice, on the phone's side of the line)."""
    found = []
    for end in ends:
        heard = first_audio_after(end)
        if heard is not None:
            found.append(heard - end)
    return found


async def room_timeline(
    server: str, api_token: str | None, room_id: str, since: float
) -> list[tuple[float, str, str]]:
    """The room's record since `since` (epoch seconds) as timeline entries `(t, who,
    what)` (see `room_record`)."""
    return (await room_record(server, api_token, room_id, since)).entries


async def room_record(server: str, api_token: str | None, room_id: str, since: float) -> RoomRecord:
    """The room's record since `since` (epoch seconds): the words the server heard, what
    the agents said and tool calls (its events), its tasks started and finished and its
    deliveries' outcomes (the REST view of tasks and deliveries: the room's events do not
    hold them), as the same lines the WebSocket and WebRTC report has."""
    headers = {"Authorization": f"Bearer {api_token}"} if api_token else {}
    async with httpx.AsyncClient(base_url=server, headers=headers, timeout=10) as api:
        response = await api.get(f"/api/rooms/{room_id}/events", params={"limit": 1000})
        if response.status_code == 401:
            raise VoicehubError("the server wants its access token: pass --token or VOICEHUB_TOKEN")
        response.raise_for_status()
        tasks = await _get(api, "/api/tasks", room_id, "tasks")
        deliveries = await _get(api, "/api/deliveries", room_id, "deliveries")
    entries = []
    for event in response.json()["events"]:
        entry = _describe(event)
        at = float(event.get("created_at", 0.0)) - since
        if entry is not None and at >= 0:
            entries.append((at, *entry))
    tasks = [t for t in tasks if float(t.get("created_at") or 0.0) >= since]
    finished = []
    for task in tasks:
        agent = task.get("agent_id", "?")
        where, asked = task.get("child_room_id", "?"), _cut(str(task.get("input", "")))
        entries.append(
            (float(task["created_at"]) - since, "task", f"{agent} started in {where}: {asked}")
        )
        if task.get("finished_at"):
            finished.append(str(task.get("status", "?")))
            done = f"{agent} finished ({task.get('status', '?')})"
            entries.append((float(task["finished_at"]) - since, "task", done))
    outcomes = []
    for delivery in deliveries:
        at = float(delivery.get("updated_at") or 0.0) - since
        if at < 0:
            continue
        strategy = (delivery.get("strategy") or {}).get("kind", "?")
        status = str(delivery.get("status", "?"))
        outcomes.append(status)
        detail = f"{status} ({strategy}, attempt {delivery.get('attempts', 0)})"
        error = delivery.get("error")
        entries.append((at, "delivery", detail + (f": {error}" if error else "")))
    entries.sort(key=lambda entry: entry[0])
    return RoomRecord(entries, len(tasks), tuple(finished), tuple(outcomes))


def _describe(event: dict[str, Any]) -> tuple[str, str] | None:
    kind, text = event.get("kind"), _cut(str(event.get("text", "")))
    metadata = event.get("metadata") or {}
    if kind == "transcript":
        return (
            ("heard", json.dumps(text))
            if event.get("role") == "user"
            else ("agent", json.dumps(text))
        )
    if kind == "tool_call":
        return "tool", f"{metadata.get('tool', '?')} {text}"
    if kind == "task":
        return "task", text
    if kind == "delivery":
        return "delivery", json.dumps(text)
    return None


def _cut(text: str, width: int = 88) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 3] + "..."


async def _transfer_done(account: TwilioSide, call: Call, options: PhoneCallOptions) -> None:
    """When the server moved the call: until the caller is connected with someone (the
    conference started), hung up, or back with the agent (whose words are then heard)."""
    if not call.conference and call.stream is not None and not call.stream.closed.is_set():
        return  # still with the agent: no transfer
    await account.wait_for(lambda: account.transfer_resolved(call), timeout=120.0)
    if call.stream is not None and not call.stream.closed.is_set():
        await _agent_turn(call.stream, options, 0)  # the agent says what happened


def describe_calls(account: TwilioSide) -> list[str]:
    """What each call of the account did, one line per step."""
    return account.describe()


class PhoneCallRefused(VoicehubError):
    """The server did not start the phone call: it closed the stream before the call ran."""


class _Api(Protocol):
    """Where the server's REST view is, and its token."""

    @property
    def server(self) -> str: ...

    @property
    def api_token(self) -> str | None: ...


_RETURNING_WAIT = 3.0  # seconds a returning caller, not greeted, waits before speaking
_CLOCK_MARGIN = 1.0  # seconds the server's clock may be behind the caller's


async def returning_caller(options: _Api, room_id: str, since: float) -> bool:
    """Whether the conversation was there before this call (epoch `since`): a returning
    caller (the number's conversation goes on), whom the server does not greet."""
    headers = {"Authorization": f"Bearer {options.api_token}"} if options.api_token else {}
    async with httpx.AsyncClient(base_url=options.server, headers=headers, timeout=10) as api:
        response = await api.get(f"/api/rooms/{room_id}")
    if response.status_code != 200:
        return False  # not made yet (a refusal shows at the first turn) or not for us to see
    room = response.json().get("room") or {}
    # a margin for a server whose clock is behind ours: this call's room is never "older"
    return float(room.get("created_at", since)) < since - _CLOCK_MARGIN


def greeting_wait(answer_wait: float, returning: bool) -> float:
    """How long the caller waits for the agent's first words before speaking: a returning
    caller is not greeted, so only a moment (for anything the agent says first)."""
    return min(answer_wait, _RETURNING_WAIT) if returning else answer_wait


async def _first_turn(call: TwilioCall, options: PhoneCallOptions, returning: bool) -> None:
    """The agent's first turn (the greeting; a returning caller is not greeted, so waits
    only a moment for anything said first), or PhoneCallRefused if the server closed the
    stream because it could not start the call (a desk missing its keys)."""
    if not await first_turn(
        call.line, options.quiet, greeting_wait(options.answer_wait, returning)
    ):
        await _agent_turn(call.line, options, 0)  # the call moved to another stream


class _Line(Protocol):
    """A caller's end of a media stream (Twilio's or another carrier's)."""

    @property
    def closed(self) -> asyncio.Event: ...

    @property
    def close_code(self) -> int | None: ...

    def refusal(self) -> str | None: ...

    async def wait_quiet(self, quiet: float, *, after: int = 0, timeout: float = 60.0) -> None: ...


async def first_turn(phone: _Line, quiet: float, answer_wait: float) -> bool:
    """Until the agent's first turn is over on `phone` (True), or the stream closes
    (False); raises PhoneCallRefused if the server refused the call
    (`PhoneLineClient.refusal`)."""
    turn = asyncio.ensure_future(_wait_quiet(phone, quiet, 0, answer_wait))
    closed = asyncio.ensure_future(phone.closed.wait())
    try:
        await asyncio.wait({turn, closed}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for job in (turn, closed):
            job.cancel()
        await asyncio.gather(turn, closed, return_exceptions=True)
    refused = phone.refusal()
    if refused is not None:
        raise PhoneCallRefused(f"refused ({phone.close_code}): {refused}")
    return turn.done() and not turn.cancelled()


async def _wait_quiet(phone: _Line, quiet: float, after: int, timeout: float) -> None:
    with contextlib.suppress(TimeoutError):  # no answer to that line: go on
        await phone.wait_quiet(quiet, after=after, timeout=timeout)


async def _agent_turn(phone: PhoneLineClient, options: PhoneCallOptions, after: int) -> None:
    """Until the agent has spoken (beyond `after` frames) and gone quiet, or `answer_wait`
    seconds of silence show it will not speak."""
    with contextlib.suppress(TimeoutError):  # no answer to that line: go on
        await phone.wait_quiet(options.quiet, after=after, timeout=options.answer_wait)


class _Heard(Protocol):
    """The phone end of a line: when agent audio last arrived or played, on its clock."""

    @property
    def clock(self) -> Clock: ...

    @property
    def last_audio_at(self) -> float: ...


async def _settle(options: PhoneCallOptions, room_id: str, call: TwilioCall) -> None:
    # `call.line` is the stream carrying the call now (a fail-over opens another)
    await conversation_settled(
        options.server, options.api_token, room_id, lambda: call.line, options.quiet
    )


async def conversation_settled(
    server: str,
    api_token: str | None,
    room_id: str,
    line: _Heard | Callable[[], _Heard],
    quiet: float,
) -> None:
    """Until the server's REST view shows no running task and no result left to speak in
    `room_id`, and the line heard no agent audio for `quiet` seconds."""
    headers = {"Authorization": f"Bearer {api_token}"} if api_token else {}
    async with httpx.AsyncClient(base_url=server, headers=headers, timeout=10) as api:
        while True:
            tasks = await _get(api, "/api/tasks", room_id, "tasks")
            results = await _get(api, "/api/deliveries", room_id, "deliveries")
            busy = any(t.get("status") == "running" for t in tasks) or any(
                d.get("status") in _UNSETTLED for d in results
            )
            phone = line() if callable(line) else line
            if not busy and phone.clock.now() - phone.last_audio_at >= quiet:
                return
            await SystemClock().sleep(0.25)  # polling the server's REST view


async def _get(api: httpx.AsyncClient, path: str, room_id: str, key: str) -> list[dict[str, Any]]:
    response = await api.get(path, params={"room": room_id})
    if response.status_code == 401:
        raise VoicehubError("the server wants its access token: pass --token or VOICEHUB_TOKEN")
    response.raise_for_status()
    found: list[dict[str, Any]] = response.json()[key]
    return found


def format_phone_report(report: PhoneCallReport) -> str:
    """The call as a short timeline: what the caller said, when each agent speech played."""
    events = [(t, "caller", f"speaking {json.dumps(label)}") for t, label in report.lines]
    events += [(t, "played", f"agent speech (mark {name!r} echoed)") for t, name in report.marks]
    events += report.events
    out = [f"room {report.room_id}", f"{'time':>7}  {'who':<9} what"]
    out += [f"{t:7.2f}  {who:<9} {text}" for t, who, text in sorted(events)]
    seconds = len(report.agent_audio) / 2 / report.sample_rate
    out.append(f"agent audio: {seconds:.1f} s in {len(report.marks)} speeches")
    if report.latencies:
        shown = ", ".join(f"{value:.2f} s" for value in report.latencies)
        out.append(f"voice-to-voice (end of caller speech -> first agent audio): {shown}")
    finished = report.tasks_finished
    out.append(
        f"tasks: {report.tasks_started} started, {len(finished)} finished"
        f"{' (' + ', '.join(finished) + ')' if finished else ''}; "
        f"deliveries: {', '.join(report.deliveries) or 'none'}"
    )
    if report.clears:
        out.append(f"barge-in: the server sent clear {report.clears} time(s)")
    out += [f"PROTOCOL PROBLEM: {problem}" for problem in report.problems]
    out += [f"twilio: {line}" for line in report.calls]
    out.append("settled" if report.settled else "did not settle in time")
    return "\n".join(out)
