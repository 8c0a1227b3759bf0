"""Which store a process runs on: the SQLite file (default, one instance) or a shared Redis
(several `serve` instances and `worker`s), chosen by `--store` / `VOICEHUB_STORE`.

`StoreChoice` holds the two settings every command that opens a hub has; `ServerSettings`
and `WorkerSettings` extend it, so both read and check the choice the same way.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, field_validator

from voicehub.core.store.base import Store
from voicehub.core.store.redis import RedisStore
from voicehub.core.store.redis_url import is_sentinel_url, parse_sentinel_url, shown_url
from voicehub.core.store.sqlite import SQLiteStore

__all__ = ["StoreChoice", "describe_store", "open_store"]


class StoreChoice(BaseModel):
    """`store`: None for the SQLite file at `db_path`, or a `redis://` / `rediss://` /
    `unix://` URL to share one Redis among processes, or a `redis+sentinel://` URL for the
    primary a set of Sentinels names (`redis_url`) ("sqlite" and "" mean None).
    `number_key`: the secret of caller-number conversation ids (`VOICEHUB_NUMBER_KEY`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    db_path: Path = Path("var/voicehub.db")
    store: str | None = None
    # The secret of caller-number conversation ids (`voicehub.core.store.number_key`);
    # unset: generated once and kept with the store.
    number_key: str | None = Field(default=None, min_length=16, repr=False)

    @field_validator("store")
    @classmethod
    def _store_url(cls, value: str | None) -> str | None:
        if value in (None, "", "sqlite"):
            return None
        assert value is not None
        if is_sentinel_url(value):
            parse_sentinel_url(value)  # its ValueError names what is wrong
            return value
        if not value.startswith(("redis://", "rediss://", "unix://")):
            raise ValueError(
                f"{shown_url(value)!r} is not a store: use sqlite (the default, at --db), a "
                "Redis URL such as redis://localhost:6379/0 or a Sentinel-managed primary's "
                "such as redis+sentinel://localhost:26379/mymaster/0"
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
    scheme, _, rest = shown_url(choice.store).partition("://")
    return f"{scheme}://{rest.rpartition('@')[2]}"
