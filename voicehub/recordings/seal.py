"""Recordings kept at rest only encrypted, under the server's number secret.

A call's recording is its caller's voice and words, as personal as their number, so it is
sealed the way numbers are (`voicehub.desks.number_vault`): AES-256-GCM under a key
derived (HKDF-SHA256) from the number secret of `voicehub.core.store.number_key` (the same
on every instance sharing the store, so any of them serves a recording another wrote),
with its own HKDF label, so a recording key never opens a number and the other way round.
The associated data is the conversation and the file's name: a sealed file copied into
another conversation's folder, or renamed, does not open.

A sealed file is `MAGIC`, a 12-byte random nonce, and the ciphertext with its tag.
"""

from __future__ import annotations

import os

from voicehub.core.sealing import NONCE_BYTES, sealing_cipher
from voicehub.errors import VoicehubError

__all__ = ["MAGIC", "RecordingKeyError", "RecordingSeal"]

MAGIC = b"VHREC1\x00\x00"
_INFO = b"voicehub sealed call recordings v1"
_MIN_SECRET = 16  # as `StoreChoice.number_key` asks
_SECRET_SOURCES = (
    "VOICEHUB_NUMBER_KEY, or the store's number secret: <db>.number-key, Redis <prefix>:number-key"
)


class RecordingKeyError(VoicehubError):
    """A sealed recording that cannot be opened: no key, the wrong key, or a damaged file."""


class RecordingSeal:
    """Seals and opens the files of one recordings folder."""

    def __init__(self, number_key: bytes) -> None:
        if len(number_key) < _MIN_SECRET:
            raise RecordingKeyError(
                f"the number secret given to the recordings folder is {len(number_key)} bytes; "
                f"at least {_MIN_SECRET} are needed ({_SECRET_SOURCES})"
            )
        self._aead = sealing_cipher(number_key, _INFO)

    def seal(self, room_id: str, name: str, plain: bytes | memoryview) -> bytes:
        """The sealed bytes of file `name` of conversation `room_id`."""
        return b"".join(self.sealed_parts(room_id, name, plain))

    def sealed_parts(
        self, room_id: str, name: str, plain: bytes | memoryview
    ) -> tuple[bytes, bytes]:
        """`seal` as its header and its body, to be written one after the other (a long
        call's audio is not copied once more to join them)."""
        nonce = os.urandom(NONCE_BYTES)
        return MAGIC + nonce, self._aead.encrypt(nonce, plain, _bound(room_id, name))

    def open(self, room_id: str, name: str, sealed: bytes) -> bytes:
        """The plain bytes of a sealed file; `RecordingKeyError` naming the file when it does
        not open under this key."""
        from cryptography.exceptions import InvalidTag

        if not sealed.startswith(MAGIC) or len(sealed) < len(MAGIC) + NONCE_BYTES + 16:
            raise RecordingKeyError(
                f"recording {name!r} of room {room_id!r} is damaged: not a sealed recording "
                f"({len(sealed)} bytes)"
            )
        body = memoryview(sealed)[len(MAGIC) :]  # slices of a long call's audio, not copies
        try:
            return self._aead.decrypt(
                bytes(body[:NONCE_BYTES]), body[NONCE_BYTES:], _bound(room_id, name)
            )
        except InvalidTag:
            raise RecordingKeyError(
                f"recording {name!r} of room {room_id!r} does not open under this server's "
                f"number secret: it was sealed under another one ({_SECRET_SOURCES}: restore "
                "the one it was recorded with), or the file was changed or moved"
            ) from None


def missing_key(room_id: str, name: str) -> RecordingKeyError:
    """The error of reading a sealed file through a folder opened without a key."""
    return RecordingKeyError(
        f"recording {name!r} of room {room_id!r} is sealed, and the recordings folder was "
        f"opened without the number secret to open it ({_SECRET_SOURCES})"
    )


def _bound(room_id: str, name: str) -> bytes:
    return f"{room_id}\x00{name}".encode()
