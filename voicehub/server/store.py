"""Which store a server runs on: the SQLite file (default, one instance) or a shared Redis
(several instances behind one balancer), chosen by `--store` / `VOICEHUB_STORE`."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from voicehub.core.store.base import Store
from voicehub.core.store.redis import RedisStore
from voicehub.core.store.sqlite import SQLiteStore
from voicehub.delivery.announcements import follow_announcements
from voicehub.server.settings import ServerSettings

if TYPE_CHECKING:
    from voicehub.hub import Hub

__all__ = ["describe_store", "follow_store", "open_store"]


async def open_store(settings: ServerSettings) -> Store:
    """Open the configured store. Redis is pinged and its persistence checked now: a server
    that cannot reach its store should fail at start, and one that may lose results says so."""
    if settings.store is None:
        settings.db_path.parent.mkdir(parents=True, exist_ok=True)
        return SQLiteStore(settings.db_path)
    store = RedisStore(settings.store)
    try:
        await store.check_durability()  # logs its warnings; raises StoreError if unreachable
    except BaseException:
        await store.close()
        raise
    return store


def describe_store(settings: ServerSettings) -> str:
    """Where the data lives, for logs (a Redis URL without its password)."""
    if settings.store is None:
        return str(settings.db_path)
    scheme, _, rest = settings.store.partition("://")
    return f"{scheme}://{rest.rpartition('@')[2]}"


def follow_store(hub: Hub, store: Store) -> asyncio.Task[None] | None:
    """On a shared store, follow the deliveries other instances add (None on SQLite).
    `store` is the hub's store as opened (the hub may hold it wrapped, for metrics)."""
    if not isinstance(store, RedisStore):
        return None
    return asyncio.create_task(follow_announcements(hub.delivery, store, hub.clock))
