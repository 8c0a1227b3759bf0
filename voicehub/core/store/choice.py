"""Which store a process runs on: the SQLite file (default, one instance) or a shared Redis
(several `serve` instances and `worker`s), chosen by `--store` / `VOICEHUB_STORE`.

`StoreChoice` holds the two settings every command that opens a hub has; `ServerSettings`
and `WorkerSettings` extend it, so both read and check the choice the same way.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, field_validator

from voicehub.core.store.base import Store
from voicehub.core.store.redis import RedisStore
from voicehub.core.store.sqlite import SQLiteStore

__all__ = ["StoreChoice", "describe_store", "open_store"]


class StoreChoice(BaseModel):
    """`store`: None for the SQLite file at `db_path`, or a `redis://` / `rediss://` /
    `unix://` URL to share one Redis among processes ("sqlite" and "" mean None)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    db_path: Path = Path("var/voicehub.db")
    store: str | None = None

    @field_validator("store")
    @classmethod
    def _store_url(cls, value: str | None) -> str | None:
        if value in (None, "", "sqlite"):
            return None
        assert value is not None
        if not value.startswith(("redis://", "rediss://", "unix://")):
            raise ValueError(
                f"{value!r} is not a store: use sqlite (the default, at --db) or a Redis URL "
                "such as redis://localhost:6379/0"
            )
        return value


async def open_store(choice: StoreChoice) -> Store:
    """Open the chosen store. Redis is pinged and its persistence checked now: a process
    that cannot reach its store should fail at start, and one that may lose results says so."""
    if choice.store is None:
        choice.db_path.parent.mkdir(parents=True, exist_ok=True)
        return SQLiteStore(choice.db_path)
    store = RedisStore(choice.store)
    try:
        await store.check_durability()  # logs its warnings; raises StoreError if unreachable
    except BaseException:
        await store.close()
        raise
    return store


def describe_store(choice: StoreChoice) -> str:
    """Where the data lives, for logs (a Redis URL without its password)."""
    if choice.store is None:
        return str(choice.db_path)
    scheme, _, rest = choice.store.partition("://")
    return f"{scheme}://{rest.rpartition('@')[2]}"
