"""`voicehub token`: a LiveKit access token that calls a desk (for any LiveKit client)."""

from __future__ import annotations

import argparse
import os

from voicehub.cli.subcommands import Subcommands


def add_parser(commands: Subcommands) -> None:
    """Add `token` to an `add_subparsers()` object."""
    token = commands.add_parser(
        "token",
        help="print a LiveKit access token for calling a desk",
        description=(
            "Print a LiveKit access token: IDENTITY may join the room, and the room "
            "dispatches the desk's agent. Signed with $LIVEKIT_API_KEY/$LIVEKIT_API_SECRET."
        ),
    )
    token.add_argument("--desk", required=True, help="the desk to call")
    token.add_argument("--identity", required=True, help="who joins (the conversation's key)")
    token.add_argument("--room", help="room name (default: the desk's name and a random tail)")
    token.add_argument(
        "--agent-name",
        help="the worker's agent name (default $VOICEHUB_AGENT_NAME, else the desk's name)",
    )
    token.add_argument("--name", help="display name (default: the identity)")
    token.add_argument("--ttl", type=float, default=6.0, help="hours the token is valid (6)")
    token.add_argument("--api-key", help="default $LIVEKIT_API_KEY")
    token.add_argument("--api-secret", help="default $LIVEKIT_API_SECRET")


def run(args: argparse.Namespace) -> int:
    """Print the token (and, on stderr, the room it is for)."""
    import sys
    from datetime import timedelta

    from voicehub.workers.tokens import desk_token, room_for

    room = args.room or room_for(args.desk)
    agent_name = args.agent_name or os.environ.get("VOICEHUB_AGENT_NAME") or args.desk
    jwt = desk_token(
        desk=args.desk,
        identity=args.identity,
        api_key=args.api_key or os.environ.get("LIVEKIT_API_KEY"),
        api_secret=args.api_secret or os.environ.get("LIVEKIT_API_SECRET"),
        agent_name=agent_name,
        room=room,
        name=args.name,
        ttl=timedelta(hours=args.ttl),
    )
    print(f"room {room}, agent {agent_name!r}", file=sys.stderr)
    print(jwt)
    return 0
