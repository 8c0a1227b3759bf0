"""The `serve`, `call` and `channels` commands of `voicehub` (argparse wiring and runners).

`voicehub.cli` hooks them up with::

    add_commands(commands)            # in the parser, after the other subcommands
    code = run_command(args)          # in main: None when the command is not one of these

Or run them alone: `main(["channels"])`.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import sys
from pathlib import Path
from typing import Any, TextIO

from voicehub.errors import VoicehubError

__all__ = ["add_commands", "main", "run_command"]

_RUN = "_voicehub_run"
_TRY = "voicehub call research --say 'could you research heat pumps for me please'"


def add_commands(commands: Any) -> None:
    """Add `serve`, `call` and `channels` to an `add_subparsers()` object."""
    _add_serve(commands)
    _add_call(commands)
    _add_channels(commands)


def run_command(args: argparse.Namespace) -> int | None:
    """Run the command `args` were parsed for, if it is one of ours; its exit code."""
    runner = getattr(args, _RUN, None)
    if runner is None:
        return None
    try:
        code: int = runner(args)
    except VoicehubError as exc:  # errors a user can cause: a clear message, no traceback
        print(f"voicehub {args.command}: {exc}", file=sys.stderr)
        return 2
    return code


def main(argv: list[str] | None = None) -> int:
    """`voicehub` with only these commands (for tests and `python -m`)."""
    parser = argparse.ArgumentParser(prog="voicehub")
    add_commands(parser.add_subparsers(dest="command", required=True))
    code = run_command(parser.parse_args(argv))
    return 2 if code is None else code


# -- serve ------------------------------------------------------------------------------


def _add_serve(commands: Any) -> None:
    serve = commands.add_parser(
        "serve",
        help="serve the desks over WebSocket, with a console page and a REST view",
        description="Serve the desks in --channels. Listens on 127.0.0.1 unless a token is set.",
    )
    serve.add_argument("--host", help="address to listen on (default 127.0.0.1)")
    serve.add_argument("--port", type=int, help="port (default 8080; 0 picks a free one)")
    serve.add_argument("--channels", type=Path, help="folder of desk files (default channels)")
    serve.add_argument("--db", type=Path, help="SQLite store (default var/voicehub.db)")
    serve.add_argument(
        "--token", help="access token callers must send (default: $VOICEHUB_TOKEN, or none)"
    )
    serve.add_argument("--no-prewarm", action="store_true", help="load models on first call")
    serve.add_argument("--log-level", default="info", help="uvicorn log level (default info)")
    serve.set_defaults(**{_RUN: _serve})


def _serve(args: argparse.Namespace) -> int:
    from voicehub.server.app import serve
    from voicehub.server.settings import ServerSettings

    settings = ServerSettings.from_env(
        host=args.host,
        port=args.port,
        channels_dir=args.channels,
        db_path=args.db,
        token=args.token,
        prewarm=False if args.no_prewarm else None,
        log_level=args.log_level,
    )

    def ready(url: str) -> None:
        print(f"voicehub: serving at {url} (Ctrl-C to stop)", flush=True)
        print(f"voicehub: open it in a browser, or try: {_TRY}", flush=True)

    try:
        serve(settings, ready=ready)
    except KeyboardInterrupt:  # uvicorn re-raises Ctrl-C after its graceful shutdown
        print("voicehub: stopped; undelivered results stay in the store", flush=True)
    return 0


# -- call -------------------------------------------------------------------------------


class _Line(argparse.Action):
    """--say and --wav append to one ordered list of caller lines."""

    def __call__(
        self, parser: Any, namespace: argparse.Namespace, value: Any, option: Any = None
    ) -> None:
        lines = list(getattr(namespace, "lines", None) or [])
        lines.append((self.dest, value))
        namespace.lines = lines


def _add_call(commands: Any) -> None:
    call = commands.add_parser(
        "call",
        help="call a desk with synthesized speech and print the timeline",
        description=(
            "Call DESK over the WebSocket as a browser would: speak each --say (synthesized "
            "with Piper) or --wav in order, each after the agent answered the previous one, "
            "wait until the conversation settles (results delivered), print a timeline and "
            "write the agent's audio to a WAV file."
        ),
    )
    call.add_argument("desk", help="desk name, as listed by `voicehub channels`")
    call.add_argument("--say", action=_Line, metavar="TEXT", help="words to say (repeatable)")
    call.add_argument("--wav", action=_Line, metavar="FILE", help="a recording to play")
    call.add_argument(
        "--server",
        default=os.environ.get("VOICEHUB_URL", "http://127.0.0.1:8080"),
        help="server URL (default $VOICEHUB_URL or http://127.0.0.1:8080)",
    )
    call.add_argument("--conversation", help="conversation id (reuse one to reconnect)")
    call.add_argument("--token", help="access token (default $VOICEHUB_TOKEN)")
    call.add_argument(
        "--fast",
        action="store_true",
        help="send speech faster than real time and ack playout at once",
    )
    call.add_argument("--out", type=Path, help="WAV file for the agent's audio")
    call.add_argument("--timeout", type=float, default=90.0, help="seconds to wait to settle")
    call.set_defaults(**{_RUN: _call}, lines=None)


def _call(args: argparse.Namespace, out: TextIO | None = None) -> int:
    from voicehub.client.call import CallOptions, caller_audio, place_call
    from voicehub.client.report import RATE, format_summary, format_timeline
    from voicehub.voice.audio import write_wav

    out = out or sys.stdout
    if not args.lines:
        raise VoicehubError("say something: add --say 'your words' or --wav recording.wav")
    lines = [
        (value, caller_audio(text=value))
        if kind == "say"
        else (f"[{value}]", caller_audio(wav=value))
        for kind, value in args.lines
    ]
    options = CallOptions(
        desk=args.desk,
        server=args.server,
        conversation=args.conversation,
        token=args.token or os.environ.get("VOICEHUB_TOKEN") or None,
        realtime=not args.fast,
        playout_speed=math.inf if args.fast else 1.0,
    )
    try:
        report = asyncio.run(place_call(options, lines, settle_timeout=args.timeout))
    except OSError as exc:
        message = f"cannot reach {args.server}: {exc}; is `voicehub serve` running?"
        raise VoicehubError(message) from None
    target = args.out or Path(f"call-{report.conversation}.wav")
    write_wav(target, bytes(report.agent_audio), RATE)
    print(format_timeline(report), file=out)
    print(file=out)
    print(format_summary(report), file=out)
    print(f"agent audio: {target}", file=out)
    print(
        f"call back: voicehub call {args.desk} --conversation {report.conversation} ...", file=out
    )
    return 0 if report.settled else 1


# -- channels ---------------------------------------------------------------------------


def _add_channels(commands: Any) -> None:
    channels = commands.add_parser(
        "channels",
        help="list the desks and check their files",
        description="Load and build every desk file; print each desk, or what is wrong.",
    )
    channels.add_argument("--dir", type=Path, default=Path("channels"), help="desk folder")
    channels.set_defaults(**{_RUN: _channels})


def _channels(args: argparse.Namespace, out: TextIO | None = None) -> int:
    from voicehub.desks.desk import build_desk
    from voicehub.desks.loading import load_desk_file

    out = out or sys.stdout
    folder: Path = args.dir
    if not folder.is_dir():
        raise VoicehubError(f"{folder}: no such desk folder")
    files = sorted(folder.glob("*.toml"))
    if not files:
        raise VoicehubError(f"{folder}: no desk files (*.toml)")
    problems, names = 0, dict[str, Path]()
    for path in files:
        try:
            desk = build_desk(load_desk_file(path))
        except VoicehubError as exc:
            problems += 1
            print(f"ERROR {path}\n      {str(exc).replace(chr(10), chr(10) + '      ')}", file=out)
            continue
        if desk.name in names:
            problems += 1
            print(f"ERROR {path}: desk name {desk.name!r} is used by {names[desk.name]}", file=out)
            continue
        names[desk.name] = path
        print(f"ok    {desk.name:<12} {desk.title}  ({path})", file=out)
        for line in _describe_desk(desk):
            print(f"      {line}", file=out)
    print(f"{len(names)} desk(s) ok, {problems} with errors", file=out)
    return 1 if problems else 0


def _describe_desk(desk: Any) -> list[str]:
    config = desk.config
    voice, delivery = config.voice, config.delivery
    front = desk.entry_agent.id
    own = [t.name for t in desk.agents[front].tools]
    names = own + [t.name for t in desk.tools_for(front) if t.name not in own]
    if desk.handoff is not None:
        names.append(f"handoff_conversation to {', '.join(desk.handoff_targets(front))}")
    tools = ", ".join(names) or "none"
    lines = [
        f"call:     /desks/{desk.name}/call?conversation=<id>",
        (
            f"voice:    {voice.realtime_model.model} (openai-realtime, voice "
            f"{voice.realtime_model.voice}, {voice.realtime_model.turn_detection})"
            if voice.engine == "openai-realtime"
            else f"voice:    vad {voice.vad}, stt {voice.stt}, tts {voice.tts}"
        ),
        f"agents:   {', '.join(agent.id for agent in config.agents)} "
        f"(first to answer: {front}; its tools: {tools})",
    ]
    if config.pipeline is not None:
        stages = " -> ".join(f"{st.agent} ({st.phase})" for st in config.pipeline.stages)
        lines.append(f"pipeline: {stages}")
    if config.swarm is not None:
        lines.append(f"swarm:    {', '.join(config.swarm.agents)} hand off to each other")
    if config.supervisor is not None:
        workers = ", ".join(config.supervisor.workers)
        lines.append(f"workers:  {workers} ({config.supervisor.strategy}, delegate_workers)")
    if config.loop is not None:
        loop = config.loop
        lines.append(
            f"loop:     {loop.producer} reviewed by {', '.join(loop.reviewers)} "
            f"(at most {loop.max_iterations} rounds, delegate_loop)"
        )
    buffer = f", buffer {delivery.buffer:g} s" if delivery.buffer is not None else ""
    lines.append(f"delivery: {delivery.strategy}{buffer}, mode {delivery.mode}")
    return lines


if __name__ == "__main__":
    sys.exit(main())
