"""The secret behind caller-number conversation ids.

A phone call's conversation is keyed to the caller's number, stored only as a hash. A plain
hash of a phone number is reversed by trying every number (there are about 10^10 per
country), so the id is an HMAC-SHA256 under a per-server secret: without the secret, an id
says nothing about the number.

The secret must survive restarts and be the same on every instance sharing a store, or a
caller who calls back would start a new conversation. In order:

1. `VOICEHUB_NUMBER_KEY` (`ServerSettings.number_key`), when set: the operator's own.
2. On Redis, the key `<prefix>:number-key`, set once by whichever instance starts first
   (`SET NX`) and read by every other.
3. On SQLite, the file `<db>.number-key` next to the database (mode 0600), created once;
   a second process starting on the same file reads the first one's. Keep it with the
   database: a backup without it leaves callers' old conversations unreachable by number
   (their results stay readable through the API).
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import logging
import os
import secrets
import tempfile
from pathlib import Path

from voicehub.core.store.base import Store
from voicehub.core.store.redis import RedisStore
from voicehub.errors import ConfigError
from voicehub.server.settings import ServerSettings

__all__ = ["load_number_key", "number_hash", "number_key_path"]

log = logging.getLogger("voicehub.twilio")

_KEY_BYTES = 32


def number_hash(key: bytes, number: str) -> str:
    """The keyed hash of a normalized number (hex, 24 characters: 96 bits)."""
    return hmac.new(key, f"voicehub caller {number}".encode(), hashlib.sha256).hexdigest()[:24]


def number_key_path(db_path: Path) -> Path:
    """Where a SQLite server keeps its generated secret."""
    return db_path.with_name(db_path.name + ".number-key")


async def load_number_key(settings: ServerSettings, store: Store) -> bytes:
    """The server's number secret: from the settings, the shared store, or the file next
    to the SQLite database (generated on first start)."""
    if settings.number_key is not None:
        return settings.number_key.encode()
    if isinstance(store, RedisStore):
        name = f"{store.prefix}:number-key"
        await store.redis.set(name, secrets.token_hex(_KEY_BYTES), nx=True)
        stored = await store.redis.get(name)
        if stored is None:
            raise ConfigError(f"Redis lost {name} right after setting it")
        return stored if isinstance(stored, bytes) else str(stored).encode()
    return _file_key(number_key_path(settings.db_path))


def _file_key(path: Path) -> bytes:
    if not path.exists():
        _create_key_file(path)
    key = path.read_text().strip()
    if len(key) < 2 * _KEY_BYTES:
        raise ConfigError(
            f"{path}: the number secret is damaged ({len(key)} characters); restore it from "
            "the backup of the database, or set VOICEHUB_NUMBER_KEY"
        )
    return key.encode()


def _create_key_file(path: Path) -> None:
    # Written whole to a temporary file, then linked into place: link fails if the file
    # exists, so two servers starting together agree on the first one's secret and nobody
    # ever reads a half-written file.
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=".number-key-")
    try:
        with os.fdopen(descriptor, "w") as file:
            file.write(secrets.token_hex(_KEY_BYTES) + "\n")
        os.chmod(temporary, 0o600)
        with contextlib.suppress(FileExistsError):
            os.link(temporary, path)
            log.info("created the caller-number secret %s: keep it with the database", path)
    finally:
        os.unlink(temporary)
