"""The `voicehub` command: serve, call, console, channels, test, worker, token,
conversations, access.

Each command is a module here with `add_parser(commands)` (its argparse wiring) and
`run(args) -> int` (its exit code); `main` assembles them. Errors a user can cause
(`VoicehubError`) print one line naming the command and exit 2, without a traceback.

Other distributions add commands through the `voicehub.commands` entry-point group (a
module of the same shape): the development tools add `bench` and `soak` that way, so the
installed product carries no benchmark, fake or emulator.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from importlib.metadata import entry_points
from types import ModuleType

from voicehub.cli import (
    access,
    call,
    channels,
    console,
    conversations,
    serve,
    test,
    token,
    worker,
)
from voicehub.errors import VoicehubError

__all__ = ["main"]

_COMMANDS: dict[str, ModuleType] = {
    "serve": serve,
    "call": call,
    "console": console,
    "channels": channels,
    "test": test,
    "worker": worker,
    "token": token,
    "conversations": conversations,
    "access": access,
}


# Commands of the development install, named so that calling one without it says what to add.
_DEVELOPMENT_COMMANDS = ("bench", "soak")


def _commands() -> dict[str, ModuleType]:
    """The built-in commands and those other installed distributions add."""
    commands = dict(_COMMANDS)
    for entry in entry_points(group="voicehub.commands"):
        if entry.name in commands:
            continue
        try:
            commands[entry.name] = entry.load()
        except Exception as exc:  # a broken add-on must not take the built-in commands down
            origin = f" of {entry.dist.name}" if entry.dist is not None else ""
            print(f"voicehub: skipped the command {entry.name!r}{origin}: {exc}", file=sys.stderr)
    return commands


def _parser(commands: dict[str, ModuleType] | None = None) -> argparse.ArgumentParser:
    commands = _commands() if commands is None else commands
    parser = argparse.ArgumentParser(prog="voicehub", description=__doc__.split("\n", 1)[0])
    subcommands = parser.add_subparsers(dest="command", required=True)
    for command in commands.values():
        command.add_parser(subcommands)
    return parser


def _missing_development_command(argv: list[str], commands: dict[str, ModuleType]) -> str | None:
    """The development command `argv` asks for when its distribution is not installed."""
    asked = next((arg for arg in argv if not arg.startswith("-")), None)
    if asked in _DEVELOPMENT_COMMANDS and asked not in commands:
        return asked
    return None


def main(argv: list[str] | None = None) -> int:
    """Run `voicehub` with `argv` (default: the process arguments); the exit code."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    commands = _commands()
    missing = _missing_development_command(sys.argv[1:] if argv is None else argv, commands)
    if missing is not None:
        print(
            f"voicehub {missing}: a development command; it comes with the development tools "
            "in devtools/ (`make install` in a clone, or `pip install -e devtools`)",
            file=sys.stderr,
        )
        return 2
    args = _parser(commands).parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        code: int = commands[args.command].run(args)
    except VoicehubError as exc:
        print(f"voicehub {args.command}: {exc}", file=sys.stderr)
        return 2
    return code
