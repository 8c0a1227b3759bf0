"""The options of every command that runs desks on a hub (`serve`, `worker`): which desk
files and which store. One definition, so both commands spell, document and read them alike."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

__all__ = ["add_hub_options", "hub_overrides"]


def add_hub_options(parser: argparse.ArgumentParser) -> None:
    """Add --channels, --db and --store (each overrides its `VOICEHUB_*` variable)."""
    parser.add_argument("--channels", type=Path, help="folder of desk files (default channels)")
    parser.add_argument("--db", type=Path, help="SQLite store (default var/voicehub.db)")
    parser.add_argument(
        "--store",
        help="sqlite (default, at --db) or a Redis URL shared by instances and workers, e.g. "
        "redis://localhost:6379/0 (default: $VOICEHUB_STORE)",
    )


def hub_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """The settings fields the hub options set (None: not given, the environment decides)."""
    return {"channels_dir": args.channels, "db_path": args.db, "store": args.store}
