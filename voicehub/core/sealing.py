"""The one cipher behind everything voicehub keeps sealed at rest (numbers, recordings).

AES-256-GCM under a key derived (HKDF-SHA256) from the server's number secret
(`voicehub.core.store.number_key`) and a label of the use: each use has its own label, so
one's key never opens another's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from voicehub.errors import MissingExtraError

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

__all__ = ["NONCE_BYTES", "sealing_cipher"]

NONCE_BYTES = 12  # AES-GCM's standard nonce


def sealing_cipher(number_key: bytes, label: bytes) -> AESGCM:
    """The AES-256-GCM cipher of `label`'s use of the number secret `number_key`."""
    try:
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM
        from cryptography.hazmat.primitives.kdf.hkdf import HKDF
    except ImportError:
        raise MissingExtraError("cryptography", "server") from None
    key = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=label).derive(number_key)
    return AESGCM(key)
