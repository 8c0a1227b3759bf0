"""`voicehub soak`: many concurrent synthetic calls for minutes; results lost, spoken twice."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any, TextIO

from voicehub.cli.subcommands import Subcommands
from voicehub.errors import VoicehubError


def add_parser(commands: Subcommands) -> None:
    """Add `soak` to an `add_subparsers()` object."""
    soak = commands.add_parser(
        "soak",
        help="run many concurrent synthetic calls for minutes and account for every result",
        description=(
            "Start `voicehub serve` on a free port (or use --url) and run N callers at once "
            "for M minutes over the WebSocket, with synthesized speech (Piper, made once), "
            "random barge-ins, early hang-ups and call-backs (seeded). A caller speaks 0.5-2 s "
            "after the agent falls quiet: a research request, then 0-2 follow-ups (a status "
            "question, thanks) while the analysts work, and calls again 0.5-3 s after hanging "
            "up; callers start over --ramp seconds. Reports calls, calls never answered, "
            "turns, the caller's and agent's share of talk time, "
            "deliveries, talk-over ms (result audio over a caller already speaking), yield ms "
            "(result audio after a caller barged in), results lost and spoken twice (the "
            "server's stored deliveries against what the callers heard), and the server's "
            "RSS, event-loop lag and CPU (cores, when it started the server) over time. "
            "Exit code 1 if a result was lost or spoken twice."
        ),
    )
    soak.add_argument("--calls", type=int, default=4, help="callers at once (default 4)")
    soak.add_argument("--minutes", type=float, default=1.0, help="how long (default 1)")
    soak.add_argument("--desk", default="research", help="desk to call (default research)")
    soak.add_argument(
        "--stack",
        choices=("offline", "cloud"),
        default="offline",
        help="offline: the desk as its file says; cloud: the desk on Deepgram against the "
        "fake Deepgram in its own process (its CPU is reported)",
    )
    soak.add_argument("--seed", type=int, default=1, help="seed of the callers' coins")
    soak.add_argument("--url", help="a running server instead of starting one")
    soak.add_argument(
        "--max-calls",
        type=int,
        help="the started server's call limit (serve --max-calls): soak it at twice that to "
        "see every admitted call answered and the rest refused busy",
    )
    soak.add_argument("--token", help="access token (default $VOICEHUB_TOKEN)")
    soak.add_argument("--channels", type=Path, help="desk files of the started server")
    soak.add_argument(
        "--keep", type=Path, help="folder to keep the started server's store and log in"
    )
    soak.add_argument("--barge-in", type=float, default=0.3, help="chance per call (0.3)")
    soak.add_argument("--hang-up", type=float, default=0.3, help="chance per call (0.3)")
    soak.add_argument(
        "--follow-ups",
        type=int,
        nargs=2,
        default=(0, 2),
        metavar=("MIN", "MAX"),
        help="turns per call after the research request (default 0 2)",
    )
    soak.add_argument(
        "--ramp",
        type=float,
        help="seconds over which callers start (default 0.3 per caller, <= 30)",
    )
    soak.add_argument(
        "--settle-timeout",
        type=float,
        default=60.0,
        help="seconds a call waits for its results before hanging up (default 60)",
    )
    soak.add_argument(
        "--turn-timeout",
        type=float,
        default=60.0,
        help="seconds a caller waits for the agent's answer before speaking anyway (default 60)",
    )
    soak.add_argument("--sample-every", type=float, default=5.0, help="seconds (default 5)")
    soak.add_argument("--json", type=Path, help="also write the figures as JSON")


def run(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """Run the soak; 0 when nothing was lost or spoken twice."""
    from voicehub_dev.soak import SoakOptions, format_soak, run_soak, soak_json

    out = out or sys.stdout
    try:
        options = SoakOptions(
            calls=args.calls,
            minutes=args.minutes,
            desk=args.desk,
            seed=args.seed,
            url=args.url,
            token=args.token or os.environ.get("VOICEHUB_TOKEN") or None,
            barge_in=args.barge_in,
            hang_up=args.hang_up,
            follow_ups=tuple(args.follow_ups),
            ramp=args.ramp,
            settle_timeout=args.settle_timeout,
            turn_timeout=args.turn_timeout,
            sample_every=args.sample_every,
            max_calls=args.max_calls,
            stack=args.stack,
        )
    except ValueError as exc:
        raise VoicehubError(str(exc)) from None
    try:
        if args.keep is not None:
            args.keep.mkdir(parents=True, exist_ok=True)
        if options.stack == "cloud":
            result = asyncio.run(_cloud_soak(options, args.keep, args.channels))
        else:
            result = asyncio.run(run_soak(options, folder=args.keep, channels=args.channels))
    except OSError as exc:
        raise VoicehubError(f"cannot reach the server: {exc}") from None
    print(format_soak(result), file=out)
    if args.json is not None:
        args.json.write_text(json.dumps(soak_json(result), indent=2) + "\n")
        print(f"wrote {args.json}", file=out)
    return 1 if result.tally.results_lost or result.tally.results_spoken_twice else 0


async def _cloud_soak(options: Any, keep: Path | None, channels: Path | None) -> Any:
    """The soak on the desk moved to Deepgram, against the fake Deepgram's own process."""
    import tempfile

    from voicehub.server.settings import ServerSettings
    from voicehub_dev.bench.soak_cloud import CloudStack
    from voicehub_dev.soak import run_soak
    from voicehub_dev.soak.caller import CallerLines

    lines = await asyncio.to_thread(CallerLines.synthesize)
    with tempfile.TemporaryDirectory(prefix="soak-cloud-") as scratch:
        stack = CloudStack(keep or Path(scratch))
        try:
            source = channels or ServerSettings().channels_dir
            desks = await stack.start(lines.all(), source, options.desk)
            result = await run_soak(
                options,
                folder=keep,
                channels=desks,
                lines=lines,
                server_environment=stack.environment,
            )
            result.provider_cpu_seconds = stack.cpu_seconds()
            return result
        finally:
            await stack.stop()
