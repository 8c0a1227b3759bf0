"""LiveKit access tokens for trying a desk from any LiveKit client (`voicehub token`).

The token lets `identity` join `room` and, through its room configuration, has LiveKit
dispatch the desk's agent when the room is created: agent name and `{"desk": ...}` metadata,
which `voicehub.workers.dispatch` reads.
"""

from __future__ import annotations

import json
import secrets
from datetime import timedelta

from voicehub.errors import ConfigError
from voicehub.voice.providers import vendor_import

with vendor_import("livekit-api", extra="livekit"):
    from livekit import api

__all__ = ["desk_token", "room_for"]


def room_for(desk: str) -> str:
    """A fresh room name for a call to `desk` (it starts with the desk's name)."""
    return f"{desk}-{secrets.token_hex(4)}"


def desk_token(
    *,
    desk: str,
    identity: str,
    api_key: str | None,
    api_secret: str | None,
    agent_name: str,
    room: str,
    name: str | None = None,
    ttl: timedelta = timedelta(hours=6),
) -> str:
    """A signed JWT (HS256): `identity` may join `room`, and the room dispatches
    `agent_name` for `desk`."""
    if not api_key or not api_secret:
        raise ConfigError(
            "a token is signed with the LiveKit server's key: set LIVEKIT_API_KEY and "
            "LIVEKIT_API_SECRET (or --api-key/--api-secret)"
        )
    if not identity:
        raise ConfigError("--identity must not be empty")
    dispatch = api.RoomAgentDispatch(agent_name=agent_name, metadata=json.dumps({"desk": desk}))
    token = (
        api.AccessToken(api_key, api_secret)
        .with_identity(identity)
        .with_name(name or identity)
        .with_ttl(ttl)
        .with_grants(api.VideoGrants(room_join=True, room=room))
        .with_room_config(api.RoomConfiguration(agents=[dispatch]))
    )
    return token.to_jwt()
