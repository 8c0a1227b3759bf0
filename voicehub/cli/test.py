"""`voicehub test`: run scenario files against their desks (docs/scenarios.md)."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path
from typing import Any, TextIO

from voicehub.cli.subcommands import Subcommands
from voicehub.errors import VoicehubError


def add_parser(commands: Subcommands) -> None:
    """Add `test` to an `add_subparsers()` object."""
    parser = commands.add_parser(
        "test",
        help="run scenario files against their desks",
        description=(
            "Run scenarios (TOML files in a scenarios/ folder beside the desk files) against "
            "the desks, served in this process or by a running server (--url). Exit code 1 "
            "when a scenario fails, 2 when a file is broken."
        ),
    )
    parser.add_argument(
        "paths",
        nargs="*",
        type=Path,
        default=[Path("channels")],
        help="desk folders (their scenarios/), scenario folders or files (default: channels)",
    )
    parser.add_argument("--url", help="a running server (http://host:port); default: in process")
    parser.add_argument(
        "--token", default=os.environ.get("VOICEHUB_TOKEN"), help="its access token"
    )
    parser.add_argument("-k", "--only", help="run the scenarios whose name matches this glob")
    parser.add_argument(
        "--desks", type=Path, help="the desk folder (default: the one beside each scenarios/)"
    )
    parser.add_argument(
        "-j", "--jobs", type=int, default=1, help="scenarios run at once (default 1)"
    )
    parser.add_argument("--junit", type=Path, help="also write the results as JUnit XML here")


def run(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """Run the scenarios; 0 when all passed, 1 when one failed."""
    from voicehub.scenarios.judge import judge_from_env
    from voicehub.scenarios.report import format_result, format_summary, junit_xml
    from voicehub.scenarios.suite import load_suite, run_suite

    out = out or sys.stdout
    load_suite(args.paths, args.desks)  # every file checked before the first call
    judging = judge_from_env()

    def show(result: Any) -> None:
        print(format_result(result), file=out, flush=True)

    results = asyncio.run(
        run_suite(
            args.paths,
            url=args.url,
            token=args.token,
            only=args.only,
            judge_settings=judging,
            progress=show,
            jobs=args.jobs,
            desk_folder=args.desks,
        )
    )
    if not results:
        raise VoicehubError(f"no scenario matches {args.only!r}" if args.only else "no scenarios")
    print(format_summary(results), file=out)
    if args.junit is not None:
        args.junit.write_text(junit_xml(results), encoding="utf-8")
        print(f"wrote {args.junit}", file=out)
    return 0 if all(result.passed for result in results) else 1
