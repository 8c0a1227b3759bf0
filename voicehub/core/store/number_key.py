"""Caller numbers as conversation ids, and the secret behind them.

A phone call's conversation is keyed to the caller's number (Twilio calls to `serve`,
LiveKit SIP callers to `worker`: the same id, so a caller continues whichever way they
phone in), stored only as a hash. A plain hash of a phone number is reversed by trying
every number (about 10^10 per country), so the id is an HMAC-SHA256 under a per-store
secret: without the secret, an id says nothing about the number.

The secret must survive restarts and be the same for every process sharing a store, or a
caller who calls back would start a new conversation. In order:

1. `VOICEHUB_NUMBER_KEY` (`StoreChoice.number_key`), when set: the operator's own.
2. On Redis, the key `<prefix>:number-key`, set once by whichever process starts first
   (`SET NX`) and read by every other.
3. On SQLite, the file `<db>.number-key` next to the database (mode 0600), created once;
   a second process starting on the same file reads the first one's. Keep it with the
   database: a backup without it leaves callers' old conversations unreachable by number
   (their results stay readable through the API).

Conversations begun under the unkeyed ids of earlier versions are not migrated (the
numbers behind them are unknown): `number_conversation` lets a caller continue theirs.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import logging
import os
import re
import secrets
import tempfile
from pathlib import Path

from voicehub.core.store.base import Store
from voicehub.core.store.choice import StoreChoice
from voicehub.core.store.redis import RedisStore
from voicehub.errors import ConfigError

__all__ = [
    "caller_conversation",
    "legacy_caller_conversation",
    "load_number_key",
    "number_conversation",
    "number_key_path",
]

log = logging.getLogger("voicehub.store")

_KEY_BYTES = 32
_NUMBER = re.compile(r"\+?[0-9]{3,16}")
_WITHHELD = ("266696687", "7378742833")  # Twilio's "anonymous" / "restricted" stand-ins


def _normalized(number: str) -> str | None:
    digits = number.strip().replace(" ", "")
    if not _NUMBER.fullmatch(digits) or digits.lstrip("+") in _WITHHELD:
        return None
    return "+" + digits.lstrip("+")


def caller_conversation(number: str, key: bytes) -> str | None:
    """The conversation id of a caller's number under `key`, or None for a withheld or odd
    number. The same number and key always give the same id; the id cannot be reversed
    without the key."""
    normalized = _normalized(number)
    if normalized is None:
        return None
    digest = hmac.new(key, f"voicehub caller {normalized}".encode(), hashlib.sha256)
    return "tel-" + digest.hexdigest()[:24]


def legacy_caller_conversation(number: str) -> str | None:
    """The unkeyed id earlier versions gave `number` (a plain SHA-256)."""
    normalized = _normalized(number)
    if normalized is None:
        return None
    return "tel-" + hashlib.sha256(f"voicehub caller {normalized}".encode()).hexdigest()[:24]


async def number_conversation(store: Store, desk: str, number: str, key: bytes) -> str | None:
    """The conversation of a caller's number at `desk` (None: withheld or odd number).

    Normally the keyed id. A conversation begun under the unkeyed id of earlier versions,
    and never under the keyed one, stays the caller's: results held for them before an
    upgrade are still heard when they call back.
    """
    keyed = caller_conversation(number, key)
    legacy = legacy_caller_conversation(number)
    if keyed is None or legacy is None:
        return keyed
    if (
        await store.get_room(f"{desk}:{keyed}") is None
        and await store.get_room(f"{desk}:{legacy}") is not None
    ):
        return legacy
    return keyed


def number_key_path(db_path: Path) -> Path:
    """Where a SQLite store's generated secret is kept."""
    return db_path.with_name(db_path.name + ".number-key")


async def load_number_key(choice: StoreChoice, store: Store) -> bytes:
    """The store's number secret: from the settings, the shared Redis, or the file next to
    the SQLite database (generated on first start)."""
    if choice.number_key is not None:
        return choice.number_key.encode()
    if isinstance(store, RedisStore):
        name = f"{store.prefix}:number-key"
        await store.redis.set(name, secrets.token_hex(_KEY_BYTES), nx=True)
        stored = await store.redis.get(name)
        if stored is None:
            raise ConfigError(f"Redis lost {name} right after setting it")
        return stored if isinstance(stored, bytes) else str(stored).encode()
    return _file_key(number_key_path(choice.db_path))


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
    # exists, so two processes starting together agree on the first one's secret and
    # nobody ever reads a half-written file.
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
