"""The `voicehub` command: serve, call, console, channels, test, bench, soak, worker, token.

Each command is a module here with `add_parser(commands)` (its argparse wiring) and
`run(args) -> int` (its exit code); `main` assembles them. Errors a user can cause
(`VoicehubError`) print one line naming the command and exit 2, without a traceback.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from types import ModuleType

from voicehub.cli import bench, call, channels, console, serve, soak, test, token, worker
from voicehub.errors import VoicehubError

__all__ = ["main"]

_COMMANDS: dict[str, ModuleType] = {
    "serve": serve,
    "call": call,
    "console": console,
    "channels": channels,
    "bench": bench,
    "soak": soak,
    "test": test,
    "worker": worker,
    "token": token,
}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="voicehub", description=__doc__.split("\n", 1)[0])
    commands = parser.add_subparsers(dest="command", required=True)
    for command in _COMMANDS.values():
        command.add_parser(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run `voicehub` with `argv` (default: the process arguments); the exit code."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        code: int = _COMMANDS[args.command].run(args)
    except VoicehubError as exc:
        print(f"voicehub {args.command}: {exc}", file=sys.stderr)
        return 2
    return code
