"""The `voicehub` command: serve, call, channels, bench."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

from voicehub.cli.commands import add_commands, run_command


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="voicehub", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    bench = commands.add_parser("bench", help="print performance figures")
    bench.add_argument("--json", type=Path, help="also write the figures as nested JSON")
    bench.add_argument("--only", action="append", help="run only this section (repeatable)")
    bench.add_argument(
        "--store",
        choices=["sqlite", "memory", "redis"],
        default="sqlite",
        help="store the figures are measured on (default: sqlite, as served; redis: the "
        "server at $VOICEHUB_STORE, default redis://127.0.0.1:6379/0)",
    )
    bench.add_argument("--quick", action="store_true", help="fewer iterations (smoke run)")
    add_commands(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    if args.command == "bench":
        from voicehub.bench.runner import run_bench

        run_bench(args.only, args.store, args.quick, args.json)
        return 0
    if (code := run_command(args)) is not None:
        return code
    return 2


if __name__ == "__main__":
    sys.exit(main())
