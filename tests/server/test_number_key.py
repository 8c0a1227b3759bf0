"""The caller-number secret: conversation ids are HMACs under a per-server key that
persists with the store, so restarts agree, other servers' ids differ, and an id cannot
be reversed by trying numbers."""

from __future__ import annotations

import hashlib
import stat
from pathlib import Path

import pytest

from tests.e2e_helpers import running_server
from voicehub.core.store.base import RoomRecord
from voicehub.core.store.number_key import load_number_key, number_key_path
from voicehub.core.store.redis import RedisStore
from voicehub.core.store.sqlite import SQLiteStore
from voicehub.desks.desk import load_desks
from voicehub.errors import ConfigError
from voicehub.server.settings import ServerSettings
from voicehub.telephony.twilio.webhooks import caller_conversation, legacy_caller_conversation
from voicehub_dev.fakes.redis_server import RedisServer, redis_server, unique_prefix
from voicehub_dev.fakes.server_session import ScriptedStack
from voicehub_dev.fakes.twilio import FakeTwilio

__all__ = ["redis_server"]

CHANNELS = Path(__file__).resolve().parents[2] / "channels"
PUBLIC = "https://voicehub.test"
AUTH_TOKEN = "n" * 32
CALLER = "+15550100777"


def settings_for(db: Path, number_key: str | None = None) -> ServerSettings:
    return ServerSettings(
        channels_dir=CHANNELS,
        db_path=db,
        public_url=PUBLIC,
        twilio_auth_token=AUTH_TOKEN,
        number_key=number_key,
    )


async def conversation_on(settings: ServerSettings, caller: str = CALLER) -> str:
    """Start the server, place one signed call from `caller`, stop the server."""
    desks = {"research": load_desks(CHANNELS)["research"]}
    async with running_server(settings, voice=ScriptedStack(), desks=desks) as server:
        twilio = FakeTwilio(server.url, public_url=PUBLIC, auth_token=AUTH_TOKEN)
        answer = await twilio.incoming_call("research", caller, "CA" + "7" * 32)
    return answer.parameters["conversation"]


async def test_the_same_number_keeps_its_conversation_across_a_restart(tmp_path: Path) -> None:
    db = tmp_path / "voicehub.db"
    first = await conversation_on(settings_for(db))
    key_file = number_key_path(db)
    assert key_file.is_file() and stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert await conversation_on(settings_for(db)) == first  # restarted on the same file
    assert await conversation_on(settings_for(db), "+15550100778") != first
    # Keyed: not the plain hash anyone could compute by trying numbers.
    assert first != legacy_caller_conversation(CALLER)
    assert CALLER.lstrip("+") not in first


async def test_servers_with_different_keys_give_different_ids(tmp_path: Path) -> None:
    generated_a = await conversation_on(settings_for(tmp_path / "a.db"))
    generated_b = await conversation_on(settings_for(tmp_path / "b.db"))
    assert generated_a != generated_b
    set_a = await conversation_on(settings_for(tmp_path / "c.db", "x" * 32))
    set_b = await conversation_on(settings_for(tmp_path / "d.db", "y" * 32))
    assert set_a != set_b
    assert set_a == caller_conversation(CALLER, b"x" * 32)  # VOICEHUB_NUMBER_KEY wins
    assert not number_key_path(tmp_path / "c.db").exists()


async def test_a_conversation_begun_before_keyed_ids_stays_the_callers(tmp_path: Path) -> None:
    db = tmp_path / "voicehub.db"
    legacy = legacy_caller_conversation(CALLER)
    assert legacy == (
        "tel-" + hashlib.sha256(f"voicehub caller {CALLER}".encode()).hexdigest()[:24]
    )
    store = SQLiteStore(db)
    await store.create_room(RoomRecord(id=f"research:{legacy}", metadata={}))
    await store.close()
    assert await conversation_on(settings_for(db)) == legacy  # held results still reach them
    assert await conversation_on(settings_for(db), "+15550100778") != legacy_caller_conversation(
        "+15550100778"
    )  # new callers get keyed ids


async def test_a_damaged_key_file_is_refused_naming_it(tmp_path: Path) -> None:
    db = tmp_path / "voicehub.db"
    number_key_path(db).write_text("short\n")
    store = SQLiteStore(db)
    try:
        with pytest.raises(ConfigError, match=r"voicehub\.db\.number-key: the number secret"):
            await load_number_key(settings_for(db), store)
    finally:
        await store.close()


def test_a_short_number_key_setting_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VOICEHUB_NUMBER_KEY", "short")
    with pytest.raises(ConfigError, match="VOICEHUB_NUMBER_KEY"):
        ServerSettings.from_env()


async def test_instances_on_one_redis_agree_on_the_key(redis_server: RedisServer) -> None:
    prefix = unique_prefix()
    settings = ServerSettings(store=redis_server.url)
    first, second = (
        RedisStore(redis_server.url, prefix=prefix),
        RedisStore(redis_server.url, prefix=prefix),
    )
    other = RedisStore(redis_server.url, prefix=unique_prefix())
    try:
        key = await load_number_key(settings, first)
        assert await load_number_key(settings, second) == key
        assert await load_number_key(settings, other) != key
        assert len(key) == 64
    finally:
        for store in (first, second, other):
            await store.close()


async def test_a_worker_on_the_same_sqlite_file_uses_the_same_key(tmp_path: Path) -> None:
    from voicehub.workers.settings import WorkerSettings

    db = tmp_path / "voicehub.db"
    store = SQLiteStore(db)
    try:
        served = await load_number_key(settings_for(db), store)
        worked = await load_number_key(WorkerSettings(channels_dir=CHANNELS, db_path=db), store)
    finally:
        await store.close()
    assert served == worked  # a SIP caller and a Twilio caller of one number: one conversation
