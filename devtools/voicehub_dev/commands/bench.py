"""`voicehub bench`: print performance figures (see `voicehub_dev.bench`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from voicehub.cli.subcommands import Subcommands


def add_parser(commands: Subcommands) -> None:
    """Add `bench` to an `add_subparsers()` object."""
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
    bench.add_argument(
        "--rounds",
        type=int,
        default=3,
        help="run each section this many times; figures are medians with min and max (default 3)",
    )


def run(args: argparse.Namespace) -> int:
    """Run the benchmark sections `args` ask for and print them."""
    from voicehub_dev.bench.runner import run_bench

    run_bench(args.only, args.store, args.quick, args.json, args.rounds)
    return 0
