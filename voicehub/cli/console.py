"""`voicehub console`: talk to a desk live with the computer's microphone and speakers."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from typing import Any, TextIO

from voicehub.cli.subcommands import Subcommands
from voicehub.errors import VoicehubError


def add_parser(commands: Subcommands) -> None:
    """Add `console` to an `add_subparsers()` object."""
    console = commands.add_parser(
        "console",
        help="talk to a desk live with your microphone and speakers",
        description=(
            "Call DESK on a running `voicehub serve` and talk: the microphone goes to the "
            "desk, the agent plays on the speakers, and the transcript and the call's events "
            "are printed as they happen. Ctrl-C hangs up. Needs PortAudio "
            "(Debian: libportaudio2)."
        ),
    )
    console.add_argument("desk", nargs="?", help="desk name, as listed by `voicehub channels`")
    console.add_argument(
        "--server",
        default=os.environ.get("VOICEHUB_URL", "http://127.0.0.1:8080"),
        help="server URL (default $VOICEHUB_URL or http://127.0.0.1:8080)",
    )
    console.add_argument("--conversation", help="conversation id (reuse one to call back)")
    console.add_argument("--token", help="access token (default $VOICEHUB_TOKEN)")
    console.add_argument("--input", type=_device, help="input device: number or name")
    console.add_argument("--output", type=_device, help="output device: number or name")
    console.add_argument(
        "--list-devices", action="store_true", help="list the sound devices and stop"
    )


def run(args: argparse.Namespace, out: TextIO | None = None, sound: Any = None) -> int:
    """Talk until Ctrl-C (exit 0) or until the server ends the call (its ending's code)."""
    from voicehub.client.console import ConsoleCall, ConsoleOptions, load_sounddevice
    from voicehub.client.endings import CallRefused, ending_of, refusal

    out = out or sys.stdout
    sound = sound if sound is not None else load_sounddevice()
    if args.list_devices:
        print(sound.query_devices(), file=out)
        return 0
    if not args.desk:
        raise VoicehubError("name the desk to call: voicehub console DESK")
    options = ConsoleOptions(
        desk=args.desk,
        server=args.server,
        conversation=args.conversation,
        token=args.token or os.environ.get("VOICEHUB_TOKEN") or None,
        input_device=args.input,
        output_device=args.output,
    )
    console = ConsoleCall(options, sound=sound, out=out)
    print(f"calling {args.desk} at {args.server}: speak when you hear the agent; Ctrl-C hangs up")
    try:
        report = asyncio.run(console.run())
    except KeyboardInterrupt:
        print(
            f"voicehub console: hung up; call back with --conversation {options.conversation}",
            file=sys.stderr,
        )
        return 0
    except CallRefused as exc:
        ending = refusal(exc)
    except TimeoutError:
        raise VoicehubError(f"{args.server} did not answer in time") from None
    except OSError as exc:
        message = f"cannot reach {args.server}: {exc}; is `voicehub serve` running?"
        raise VoicehubError(message) from None
    else:
        ending = ending_of(report, timeout=0)
    print(f"voicehub console: {ending.message}", file=sys.stderr)
    return ending.exit_code


def _device(value: str) -> int | str:
    return int(value) if value.isdigit() else value
