"""Which store a server runs on (`voicehub.core.store.choice`, shared with `voicehub worker`)
and, on a shared Redis, following the results other instances finish."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from voicehub.core.store.choice import describe_store, open_store
from voicehub.core.store.redis import RedisStore
from voicehub.delivery.announcements import follow_announcements

if TYPE_CHECKING:
    from voicehub.hub import Hub

__all__ = ["describe_store", "follow_store", "open_store"]


def follow_store(hub: Hub) -> asyncio.Task[None] | None:
    """On a shared store, follow the deliveries other instances add (None on SQLite)."""
    if not isinstance(hub.store, RedisStore):
        return None
    return asyncio.create_task(follow_announcements(hub.delivery, hub.store, hub.clock))
