"""`voicehub channels`: list the desks and check their files."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, TextIO

from voicehub.cli.subcommands import Subcommands
from voicehub.desks.locate import with_lines
from voicehub.errors import VoicehubError


def add_parser(commands: Subcommands) -> None:
    """Add `channels` to an `add_subparsers()` object."""
    channels = commands.add_parser(
        "channels",
        help="list the desks and check their files",
        description="Load and build every desk file; print each desk, or what is wrong.",
    )
    channels.add_argument(
        "--channels",
        type=Path,
        default=Path("channels"),
        help="folder of desk files (default channels), as for serve and worker",
    )
    channels.add_argument(
        "--schema",
        nargs="?",
        const="-",
        metavar="FILE",
        help="write the JSON Schema of a desk file to FILE (or stdout) and stop; desk files "
        "name it in their first line, `#:schema ./desk.schema.json`, for TOML editors",
    )
    # the flag's old name, kept working: one name (--channels) everywhere
    channels.add_argument("--dir", type=Path, dest="old_dir", help=argparse.SUPPRESS)


def run(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """Load and build every desk file in --channels; 1 when any has a problem."""
    from voicehub.desks.desk import build_desk
    from voicehub.desks.loading import load_desk_file
    from voicehub.desks.voice_stack import default_voice_stacks

    out = out or sys.stdout
    if args.schema is not None:
        return _write_schema(args.schema, out)
    folder: Path = args.channels
    if args.old_dir is not None:
        print("voicehub channels: --dir is deprecated; use --channels", file=sys.stderr)
        folder = args.old_dir
    if not folder.is_dir():
        raise VoicehubError(f"{folder}: no such desk folder")
    files = sorted(folder.glob("*.toml"))
    if not files:
        raise VoicehubError(f"{folder}: no desk files (*.toml)")
    problems, names = 0, dict[str, Path]()
    stacks = default_voice_stacks()  # their checks need no I/O: keys set, voices, names
    for path in files:
        try:
            desk = build_desk(load_desk_file(path))
        except VoicehubError as exc:
            problems += 1
            message = with_lines(str(exc))
            print(f"ERROR {path}\n      {message.replace(chr(10), chr(10) + '      ')}", file=out)
            continue
        if desk.name in names:
            problems += 1
            print(f"ERROR {path}: desk name {desk.name!r} is used by {names[desk.name]}", file=out)
            continue
        names[desk.name] = path
        print(f"ok    {desk.name:<12} {desk.title}  ({path})", file=out)
        for line in [*_describe_desk(desk), *_refusals(stacks.check(desk))]:
            print(f"      {line}", file=out)
    print(f"{len(names)} desk(s) ok, {problems} with errors", file=out)
    return 1 if problems else 0


def _write_schema(target: str, out: TextIO) -> int:
    from voicehub.desks.schema import schema_text

    if target == "-":
        out.write(schema_text())
        return 0
    path = Path(target)
    try:
        path.write_text(schema_text())
    except OSError as exc:
        raise VoicehubError(f"{path}: cannot write the schema: {exc}") from None
    print(f"wrote the desk-file schema to {path}", file=out)
    return 0


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
        _voice_line(voice),
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
    if config.manager is not None:
        routes = desk.manager.directory  # what list_agents and list_workflows show
        lines.append(
            f"manager:  {config.manager_agent_id} delegates ({config.manager.mode}) to agents "
            f"{', '.join(routes.agent_names) or 'none'}; workflows "
            f"{', '.join(routes.workflow_names) or 'none'}"
        )
    if config.blackboard is not None:
        board = config.blackboard
        lines.append(
            f"board:    {board.orchestrator} coordinates {', '.join(board.specialists.values())} "
            f"(start_report, at most {board.max_steps} steps)"
        )
    buffer = f", buffer {delivery.buffer:g} s" if delivery.buffer is not None else ""
    lines.append(f"delivery: {delivery.strategy}{buffer}, mode {delivery.mode}")
    return lines


def _voice_line(voice: Any) -> str:
    """The desk's voice stack and what it runs on."""
    if voice.stack is not None:
        return f"voice:    {voice.stack} (a registered voice stack)"
    if voice.engine == "openai-realtime":
        model = voice.realtime_model
        return (
            f"voice:    openai-realtime: {model.model} (voice {model.voice}, "
            f"{model.turn_detection})"
        )
    return f"voice:    {voice.builtin_stack}: vad {voice.vad}, stt {voice.stt}, tts {voice.tts}"


def _refusals(problems: list[str]) -> list[str]:
    """What keeps the desk's calls from starting, as its voice stack checks it."""
    return [f"refused:  {problem}" for problem in problems]
