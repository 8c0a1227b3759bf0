"""`voicehub access`: scoped access tokens to the server, kept in its store.

    voicehub access create --scope desk:research [--scope read] [--name kiosk] [--days 90]
    voicehub access list
    voicehub access rotate ID [--grace-hours 24]
    voicehub access revoke ID

Scopes: admin (everything), read (the REST view), desk:<name> (calls to that desk). The
secret is printed once (`create`, `rotate`) and only its digest is stored. Every server on
the store accepts a change within 5 s. Once any token exists, a server without a shared
`VOICEHUB_TOKEN` refuses requests that carry none.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import TYPE_CHECKING

from voicehub.cli.hub_options import add_hub_options, hub_overrides
from voicehub.cli.subcommands import Subcommands

if TYPE_CHECKING:
    from voicehub.server.access import AccessTokens

__all__ = ["add_parser", "run"]


def add_parser(commands: Subcommands) -> None:
    """Add `access` to an `add_subparsers()` object."""
    parser = commands.add_parser(
        "access",
        help="create, list, rotate and revoke scoped access tokens",
        description=__doc__.split("\n\n", 1)[0] if __doc__ else None,
    )
    actions = parser.add_subparsers(dest="action", required=True)
    create = actions.add_parser("create", help="mint a token and print its secret once")
    create.add_argument(
        "--scope",
        action="append",
        required=True,
        help="admin, read or desk:<name>; repeat for several",
    )
    create.add_argument("--name", default="", help="what the token is for")
    create.add_argument("--days", type=float, help="days until it expires (default: never)")
    listing = actions.add_parser("list", help="the tokens (never their secrets)")
    rotate = actions.add_parser("rotate", help="a new secret; the old one works a while more")
    rotate.add_argument("token_id", metavar="ID")
    rotate.add_argument(
        "--grace-hours", type=float, default=24.0, help="hours the old secret still works (24)"
    )
    revoke = actions.add_parser("revoke", help="delete a token")
    revoke.add_argument("token_id", metavar="ID")
    for action in (create, listing, rotate, revoke):
        add_hub_options(action)


def run(args: argparse.Namespace) -> int:
    """Run the action on the store the hub options choose."""
    from voicehub.server.settings import ServerSettings

    settings = ServerSettings.from_env(**hub_overrides(args))
    return asyncio.run(_run(args, settings))


async def _run(args: argparse.Namespace, settings: object) -> int:
    from voicehub.core.clock import SystemClock
    from voicehub.core.store.choice import StoreChoice, open_store
    from voicehub.server.access import AccessTokens

    assert isinstance(settings, StoreChoice)
    store = await open_store(settings)
    try:
        return await _act(args, AccessTokens(store, SystemClock(), wall=time.time))
    finally:
        await store.close()


async def _act(args: argparse.Namespace, tokens: AccessTokens) -> int:
    if args.action == "create":
        expires = time.time() + args.days * 86400 if args.days else None
        secret, record = await tokens.create(args.scope, name=args.name, expires_at=expires)
        print(f"token {record.id} ({', '.join(record.scopes)}); its secret, shown once:")
        print(secret)
    elif args.action == "list":
        listed = await tokens.store.list_tokens()
        for token in listed:
            expires = (
                time.strftime("%Y-%m-%d", time.gmtime(token.expires_at))
                if token.expires_at
                else "never"
            )
            print(f"{token.id}  {','.join(token.scopes):30}  expires {expires}  {token.name}")
        if not listed:
            print("no access tokens (the shared VOICEHUB_TOKEN, if set, is the only one)")
    elif args.action == "rotate":
        secret, record = await tokens.rotate(args.token_id, grace=args.grace_hours * 3600)
        print(f"token {record.id} rotated; the old secret works {args.grace_hours:g} h more:")
        print(secret)
    elif not await tokens.revoke(args.token_id):
        print(f"no access token {args.token_id!r}")
        return 1
    else:
        print(f"token {args.token_id} revoked (every server drops it within 5 s)")
    return 0
