"""`voicehub conversations`: delete conversations from the store with their recordings, by
hand or past their desks' `[privacy] keep_days`.

    voicehub conversations delete research:cli-67b3f2e8e4 [--db var/voicehub.db | --store URL]
    voicehub conversations sweep [--channels channels]    # one retention pass, as serve runs

Works on the store directly, with or without a server running on it: a conversation with a
call in progress (on any instance sharing the store) is refused; end the call first. Exit
codes of `delete`: 0 every one deleted, 1 some had nothing stored, 2 a refusal or a bad
option.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from voicehub.cli.hub_options import add_hub_options, hub_overrides
from voicehub.cli.subcommands import Subcommands

if TYPE_CHECKING:
    from voicehub.server.settings import ServerSettings

__all__ = ["add_parser", "run"]


def add_parser(commands: Subcommands) -> None:
    """Add `conversations` to an `add_subparsers()` object."""
    parser = commands.add_parser(
        "conversations",
        help="delete conversations (everything stored of them, and their recordings)",
        description=(
            "Delete conversations by room id (desk:conversation, as /api/rooms lists them): "
            "their rooms and the rooms under them, events, tasks, deliveries with held "
            "results and sealed numbers, call records, and recordings."
        ),
    )
    actions = parser.add_subparsers(dest="action", required=True)
    delete = actions.add_parser("delete", help="delete conversations by room id")
    delete.add_argument("room_ids", nargs="+", metavar="ROOM_ID", help="e.g. research:alice")
    add_hub_options(delete)
    sweep = actions.add_parser(
        "sweep", help="delete the conversations past their desk's [privacy] keep_days"
    )
    for action in (delete, sweep):
        action.add_argument(
            "--recordings", type=Path, help="recordings folder (default: $VOICEHUB_RECORDINGS)"
        )
    add_hub_options(sweep)


def run(args: argparse.Namespace) -> int:
    """Delete each conversation, printing what went with it."""
    from voicehub.server.settings import ServerSettings

    settings = ServerSettings.from_env(recordings_dir=args.recordings, **hub_overrides(args))
    if args.action == "sweep":
        return asyncio.run(_sweep(settings))
    return asyncio.run(_delete(settings, list(args.room_ids)))


async def _sweep(settings: ServerSettings) -> int:
    from voicehub.core.clock import SystemClock
    from voicehub.core.store.choice import open_store
    from voicehub.desks.desk import load_desks
    from voicehub.recordings.folder import RecordingFolder
    from voicehub.server.erasure import ConversationEraser
    from voicehub.server.retention import RetentionSweeper

    desks = load_desks(settings.channels_dir)
    keep = {name: desk.config.privacy.keep_days for name, desk in desks.items()}
    store = await open_store(settings)
    try:
        eraser = ConversationEraser(
            store, RecordingFolder(settings.recordings_folder), wall=time.time
        )
        sweeper = RetentionSweeper(eraser, lambda: keep, lambda room_id: False, SystemClock())
        deleted = await sweeper.sweep()
    finally:
        await store.close()
    kept = ", ".join(f"{name} {days:g} days" for name, days in sorted(keep.items()) if days)
    print(f"deleted {len(deleted)} conversations (keep_days: {kept or 'every desk keeps'})")
    for room_id in deleted:
        print(f"  {room_id}")
    return 0


async def _delete(settings: ServerSettings, room_ids: list[str]) -> int:
    from voicehub.core.store.choice import describe_store, open_store
    from voicehub.recordings.folder import RecordingFolder
    from voicehub.server.erasure import ConversationEraser, ConversationLive

    store = await open_store(settings)
    missing = refused = 0
    try:
        eraser = ConversationEraser(
            store, RecordingFolder(settings.recordings_folder), wall=time.time
        )
        for room_id in room_ids:
            try:
                report = await eraser.delete(room_id)
            except ConversationLive as exc:
                print(f"voicehub conversations: {exc}", file=sys.stderr)
                refused += 1
                continue
            if not report.found:
                print(f"{room_id}: nothing stored in {describe_store(settings)}")
                missing += 1
                continue
            counts = report.summary()
            print(
                f"{room_id}: deleted {counts['rooms']} rooms, {counts['events']} events, "
                f"{counts['tasks']} tasks, {counts['deliveries']} deliveries, "
                f"{counts['calls']} call records, {counts['recording_files']} recording files"
            )
    finally:
        await store.close()
    return 2 if refused else 1 if missing else 0
