"""`voicehub call`: call a desk with synthesized speech and print the timeline."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import math
import os
import shlex
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from voicehub.cli.command_name import command_name
from voicehub.cli.subcommands import Subcommands
from voicehub.errors import VoicehubError

if TYPE_CHECKING:
    from voicehub.client.endings import CallEnding
    from voicehub.client.phone_call import PhoneCallReport


class _Line(argparse.Action):
    """--say, --wav and --pause append to one ordered list of caller lines."""

    def __call__(
        self, parser: Any, namespace: argparse.Namespace, value: Any, option: Any = None
    ) -> None:
        lines = list(getattr(namespace, "lines", None) or [])
        lines.append((self.dest, value))
        namespace.lines = lines


def _positive_seconds(value: str) -> float:
    """--reconnect-for: a number of seconds above 0."""
    try:
        seconds = float(value)
    except ValueError:
        seconds = math.nan
    if not seconds > 0 or math.isinf(seconds):
        raise argparse.ArgumentTypeError(f"{value!r} is not a number of seconds above 0")
    return seconds


def caller_lines(
    entries: list[tuple[str, Any]],
    *,
    say: Callable[[str], bytes],
    wav: Callable[[str], bytes],
) -> list[tuple[str, bytes]]:
    """The caller's lines as `(label, pcm16)`: each --say or --wav one line, except that a
    --pause joins the lines on either side into one utterance with that much silence inside
    (a caller hesitating; "a ... b" in --say is spoken without a pause)."""
    from voicehub.voice.events import SAMPLE_RATE

    lines: list[tuple[str, bytes]] = []
    joining: float | None = None
    for kind, value in entries:
        if kind == "pause":
            if not lines or joining is not None:
                raise VoicehubError(
                    "--pause goes between two lines: --say 'a' --pause 0.8 --say 'b'"
                )
            joining = float(value)
            continue
        line = (value, say(value)) if kind == "say" else (f"[{value}]", wav(value))
        if joining is None:
            lines.append(line)
            continue
        label, pcm = lines.pop()
        silence = bytes(2 * int(joining * SAMPLE_RATE))
        lines.append((f"{label} ({joining:g} s pause) {line[0]}", pcm + silence + line[1]))
        joining = None
    if joining is not None:
        raise VoicehubError("--pause goes between two lines: --say 'a' --pause 0.8 --say 'b'")
    return lines


def default_server() -> str:
    """The server a call goes to without --server."""
    return os.environ.get("VOICEHUB_URL") or "http://127.0.0.1:8080"


def call_back_command(args: argparse.Namespace, conversation: str) -> str:
    """The command that calls the same conversation again, as this one was placed (its
    server, its transport); the caller's words are left to add."""
    again = f"{command_name()} call {shlex.quote(args.desk)}"
    if args.server.rstrip("/") != default_server().rstrip("/"):
        again += f" --server {shlex.quote(args.server)}"
    if args.webrtc:
        again += " --webrtc"
    return f"{again} --conversation {shlex.quote(conversation)}"


def add_parser(commands: Subcommands) -> None:
    """Add `call` to an `add_subparsers()` object."""
    call = commands.add_parser(
        "call",
        help="call a desk with synthesized speech and print the timeline",
        description=(
            "Call DESK over the WebSocket (or WebRTC) as a browser would: speak each --say "
            "(synthesized with Piper) or --wav in order, each after the agent answered the "
            "previous one, "
            "wait until the conversation settles (results delivered), print a timeline and "
            "write the agent's audio to a WAV file."
        ),
    )
    call.add_argument("desk", help="desk name, as listed by `voicehub channels`")
    call.add_argument("--say", action=_Line, metavar="TEXT", help="words to say (repeatable)")
    call.add_argument(
        "--pause",
        action=_Line,
        type=float,
        metavar="SECONDS",
        help="a hesitation: joins the --say/--wav lines before and after it into one "
        "utterance with this much silence inside (--say 'research' --pause 0.8 --say "
        "'heat pumps')",
    )
    call.add_argument("--wav", action=_Line, metavar="FILE", help="a recording to play")
    call.add_argument(
        "--server",
        default=default_server(),
        help="server URL (default $VOICEHUB_URL or http://127.0.0.1:8080)",
    )
    call.add_argument("--conversation", help="conversation id (reuse one to reconnect)")
    call.add_argument("--token", help="access token (default $VOICEHUB_TOKEN)")
    call.add_argument(
        "--fast",
        action="store_true",
        help="send speech faster than real time and ack playout at once",
    )
    call.add_argument(
        "--webrtc",
        action="store_true",
        help="call over WebRTC (Opus, aiortc; needs the webrtc extra) instead of the WebSocket",
    )
    call.add_argument(
        "--no-reconnect",
        action="store_true",
        help="end when the line drops, instead of coming back to the conversation (through "
        "the same address, with backoff) as a browser does when its server dies or drains",
    )
    call.add_argument(
        "--reconnect-for",
        type=_positive_seconds,
        metavar="SECONDS",
        help="how long to keep trying to come back when the line drops, or the server "
        "refuses the call for now (draining, busy), before the call ends (default 30)",
    )
    call.add_argument("--out", type=Path, help="WAV file for the agent's audio")
    phone = call.add_argument_group(
        "phone (--twilio)",
        "call as Twilio would put a phone call through: the signed voice webhook, then the "
        "media stream (8 kHz mu-law, marks); needs the server's --public-url and the auth "
        "token it checks ($TWILIO_AUTH_TOKEN); no Twilio account involved",
    )
    phone.add_argument("--twilio", action="store_true", help="speak the Twilio protocol")
    phone.add_argument(
        "--carrier",
        choices=["twilio", "telnyx", "plivo", "vonage"],
        help="call as this carrier puts a phone call through (twilio is --twilio); the "
        "server's --public-url and the secret it checks webhooks with: TWILIO_AUTH_TOKEN, "
        "TELNYX_SIGNING_KEY (the seed of the key whose public half is the server's "
        "TELNYX_PUBLIC_KEY), PLIVO_AUTH_TOKEN or VONAGE_SIGNATURE_SECRET",
    )
    phone.add_argument(
        "--public-url",
        default=os.environ.get("VOICEHUB_PUBLIC_URL"),
        help="the server's public URL (default $VOICEHUB_PUBLIC_URL)",
    )
    phone.add_argument(
        "--from",
        dest="caller",
        default="+15550100000",
        help="the caller's number (the conversation; default +15550100000)",
    )
    phone.add_argument(
        "--twilio-api",
        type=int,
        metavar="PORT",
        help="also stand in for the account's REST API on 127.0.0.1:PORT (start the server "
        "with TWILIO_API_URL=http://127.0.0.1:PORT and TWILIO_ACCOUNT_SID): transfers, "
        "call-backs and texts then play out here",
    )
    phone.add_argument(
        "--callee",
        action="append",
        choices=["human", "machine", "no-answer", "busy", "failed"],
        help="who answers each call the server places, in turn (repeatable; default no-answer)",
    )
    call.add_argument(
        "--timeout",
        type=float,
        default=90.0,
        help="seconds to wait for the conversation to settle after the last line, and at "
        "most for each answer (default 90; exit code 1 when it passes)",
    )
    call.set_defaults(lines=None)


def run(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """Place the call; its exit code says how it ended (`voicehub.client.endings`)."""
    from voicehub.client.call import CallOptions, caller_audio, place_call
    from voicehub.client.endings import CallRefused, ending_of, interrupted, refusal
    from voicehub.client.reconnect import Backoff
    from voicehub.client.report import format_summary, format_timeline
    from voicehub.voice.audio import write_wav
    from voicehub.voice.events import SAMPLE_RATE

    out = out or sys.stdout
    if not args.lines:
        raise VoicehubError("say something: add --say 'your words' or --wav recording.wav")
    lines = caller_lines(
        args.lines,
        say=lambda text: caller_audio(text=text),
        wav=lambda path: caller_audio(wav=path),
    )
    if args.twilio or args.carrier == "twilio":
        return _run_twilio(args, lines, out)
    if args.carrier is not None:
        return _run_carrier(args, lines, out)
    backoff = Backoff()
    if args.reconnect_for is not None:
        backoff = dataclasses.replace(backoff, give_up_after=args.reconnect_for)
    options = CallOptions(
        desk=args.desk,
        server=args.server,
        conversation=args.conversation,
        token=args.token or os.environ.get("VOICEHUB_TOKEN") or None,
        # a WebRTC track plays the caller's speech in real time, --fast or not: paced so,
        # the caller stops speaking when the line has been heard
        realtime=not args.fast or args.webrtc,
        playout_speed=math.inf if args.fast else 1.0,
        webrtc=args.webrtc,
        reconnect=None if args.no_reconnect else backoff,
    )
    # a polite caller waits for the agent's turn, but never longer than the whole call may take
    options.turn_timeout = min(options.turn_timeout, args.timeout)
    options.conversation = options.conversation or f"cli-{uuid.uuid4().hex[:10]}"
    try:
        report = asyncio.run(place_call(options, lines, settle_timeout=args.timeout))
    except KeyboardInterrupt:  # asyncio.run cancelled the call, which hung up on its way out
        return _ended(interrupted(options.conversation))
    except CallRefused as exc:
        return _ended(refusal(exc))
    except TimeoutError:  # a subclass of OSError, but the server is there: it was slow
        raise VoicehubError(f"{args.server} did not answer in time") from None
    except OSError as exc:
        message = f"cannot reach {args.server}: {exc}; is `voicehub serve` running?"
        raise VoicehubError(message) from None
    ending = ending_of(report, timeout=args.timeout)
    if ending.refused:  # no call ran: the refusal is the whole story
        return _ended(ending)
    target = args.out or Path(f"call-{report.conversation}.wav")
    write_wav(target, bytes(report.agent_audio), SAMPLE_RATE)
    print(format_timeline(report), file=out)
    print(file=out)
    print(format_summary(report), file=out)
    print(f"agent audio: {target}", file=out)
    print(f"call back: {call_back_command(args, report.conversation)} --say ...", file=out)
    return _ended(ending)


def _ended(ending: CallEnding) -> int:
    """Say how the call ended (stderr, one line) and return its exit code."""
    print(f"voicehub call: {ending.message}", file=sys.stderr, flush=True)
    return ending.exit_code


def _run_twilio(args: argparse.Namespace, lines: list[tuple[str, bytes]], out: TextIO) -> int:
    import httpx

    from voicehub.client.phone_call import (
        PhoneCallOptions,
        PhoneCallRefused,
        format_phone_report,
        place_phone_call,
    )
    from voicehub.voice.audio import write_wav

    auth_token = os.environ.get("TWILIO_AUTH_TOKEN")
    if not args.public_url or not auth_token:
        raise VoicehubError(
            "--twilio needs the server's public URL (--public-url or VOICEHUB_PUBLIC_URL) and "
            "the auth token it checks (TWILIO_AUTH_TOKEN), the same as `voicehub serve` got"
        )
    options = PhoneCallOptions(
        desk=args.desk,
        server=args.server,
        public_url=args.public_url,
        auth_token=auth_token,
        caller=args.caller,
        api_token=args.token or os.environ.get("VOICEHUB_TOKEN") or None,
        playout_speed=16.0 if args.fast else 1.0,
        account_sid=os.environ.get("TWILIO_ACCOUNT_SID") or "AC" + "0" * 32,
        twilio_api=args.twilio_api,
        callees=tuple(args.callee or ()),
        answer_wait=max(20.0, min(60.0, args.timeout / 2)),  # a busy server answers late
    )
    try:
        report = asyncio.run(place_phone_call(options, lines, settle_timeout=args.timeout))
    except PhoneCallRefused as exc:  # no call ran: the refusal is the whole story
        from voicehub.client.endings import CallEnding, Ending

        return _ended(CallEnding(Ending.REFUSED, str(exc), refused=True))
    except (OSError, httpx.TransportError) as exc:
        message = f"cannot reach {args.server}: {exc}; is `voicehub serve` running?"
        raise VoicehubError(message) from None
    except httpx.HTTPStatusError as exc:
        body = exc.response.text.strip()
        raise VoicehubError(f"the server answered {exc.response.status_code}: {body}") from None
    target = args.out or Path(f"phone-{args.caller.lstrip('+')}.wav")
    write_wav(target, report.agent_audio, 8000)
    print(format_phone_report(report), file=out)
    print(f"agent audio written to {target} (8 kHz, as played on the phone)", file=out)
    return _phone_ended(report, args.timeout)


def _run_carrier(args: argparse.Namespace, lines: list[tuple[str, bytes]], out: TextIO) -> int:
    import httpx

    from voicehub.client.carrier_call import (
        CARRIER_SECRETS,
        CarrierCallOptions,
        place_carrier_call,
    )
    from voicehub.client.endings import CallEnding, Ending
    from voicehub.client.phone_call import PhoneCallRefused, format_phone_report
    from voicehub.voice.audio import write_wav

    variable = CARRIER_SECRETS[args.carrier]
    secret = os.environ.get(variable)
    if not args.public_url or not secret:
        raise VoicehubError(
            f"--carrier {args.carrier} needs the server's public URL (--public-url or "
            f"VOICEHUB_PUBLIC_URL) and {variable}, matching what `voicehub serve` got"
        )
    options = CarrierCallOptions(
        carrier=args.carrier,
        desk=args.desk,
        server=args.server,
        public_url=args.public_url,
        secret=secret,
        caller=args.caller,
        api_token=args.token or os.environ.get("VOICEHUB_TOKEN") or None,
        playout_speed=16.0 if args.fast else 1.0,
        answer_wait=max(20.0, min(60.0, args.timeout / 2)),
    )
    try:
        report = asyncio.run(place_carrier_call(options, lines, settle_timeout=args.timeout))
    except PhoneCallRefused as exc:  # no call ran: the refusal is the whole story
        return _ended(CallEnding(Ending.REFUSED, str(exc), refused=True))
    except (OSError, httpx.TransportError) as exc:
        message = f"cannot reach {args.server}: {exc}; is `voicehub serve` running?"
        raise VoicehubError(message) from None
    except httpx.HTTPStatusError as exc:
        body = exc.response.text.strip()
        raise VoicehubError(f"the server answered {exc.response.status_code}: {body}") from None
    target = args.out or Path(f"{args.carrier}-{args.caller.lstrip('+')}.wav")
    write_wav(target, report.agent_audio, report.sample_rate)
    print(format_phone_report(report), file=out)
    rate = report.sample_rate // 1000
    print(f"agent audio written to {target} ({rate} kHz, as played on the phone)", file=out)
    return _phone_ended(report, args.timeout)


def _phone_ended(report: PhoneCallReport, timeout: float) -> int:
    """Say how a phone call ended (stderr, one line, as every call does); its exit code."""
    if report.problems:
        message, code = f"protocol problems: {'; '.join(report.problems)}; hung up", 1
    elif report.settled:
        message, code = "the conversation settled; hung up", 0
    else:
        message = f"timed out: the conversation did not settle within {timeout:g} s; hung up"
        code = 1
    print(f"voicehub call: {message}", file=sys.stderr, flush=True)
    return code
