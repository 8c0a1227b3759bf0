"""`--store` / `VOICEHUB_STORE`: SQLite by default, a Redis URL to share one store."""

from __future__ import annotations

from pathlib import Path

import pytest

from voicehub.core.store.choice import describe_store, open_store
from voicehub.core.store.redis import RedisStore
from voicehub.core.store.sqlite import SQLiteStore
from voicehub.errors import ConfigError, StoreError
from voicehub.server.settings import ServerSettings
from voicehub_dev.fakes.redis_server import RedisServer, redis_server

__all__ = ["redis_server"]


def test_the_store_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VOICEHUB_STORE", "redis://cache:6379/2")
    assert ServerSettings.from_env().store == "redis://cache:6379/2"
    assert ServerSettings.from_env(store="redis://other/0").store == "redis://other/0"
    monkeypatch.setenv("VOICEHUB_STORE", "sqlite")
    assert ServerSettings.from_env().store is None


def test_a_store_that_is_not_a_url_is_refused_with_the_choices() -> None:
    with pytest.raises(ConfigError, match=r"store: .*use sqlite .* redis://localhost:6379/0"):
        ServerSettings.create(store="postgres://db")


def test_the_log_line_hides_the_redis_password() -> None:
    settings = ServerSettings(store="redis://:s3cret-password@cache:6379/0")
    assert describe_store(settings) == "redis://cache:6379/0"
    assert describe_store(ServerSettings(db_path=Path("x.db"))) == "x.db"


async def test_sqlite_is_the_default(tmp_path: Path) -> None:
    store = await open_store(ServerSettings(db_path=tmp_path / "var" / "hub.db"))
    assert isinstance(store, SQLiteStore) and (tmp_path / "var" / "hub.db").exists()
    await store.close()


async def test_a_redis_url_opens_the_redis_store(redis_server: RedisServer) -> None:
    store = await open_store(ServerSettings(store=redis_server.url))
    assert isinstance(store, RedisStore) and await store.ping()
    await store.close()


async def test_an_unreachable_redis_fails_the_start() -> None:
    with pytest.raises(StoreError, match=r"127\.0\.0\.1:9"):
        await open_store(ServerSettings(store="redis://127.0.0.1:9/0"))
