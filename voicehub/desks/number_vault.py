"""Caller numbers kept at rest only encrypted, under the server's number secret.

A result nobody collects may go to the caller by SMS (`[delivery] fallback = "sms"`), so the
number must outlive the call, in the store. It is sealed with AES-256-GCM under a key
derived (HKDF-SHA256) from the number secret of `voicehub.core.store.number_key` (the one
behind conversation ids: the same on every instance sharing the store), with the record it
belongs to as associated data: a sealed number copied onto another record does not open.
Nothing here logs a number; neither may its callers.
"""

from __future__ import annotations

import base64
import json
import os

from voicehub.core.sealing import NONCE_BYTES, sealing_cipher

__all__ = ["NumberVault"]

_INFO = b"voicehub sealed caller numbers v1"


class NumberVault:
    """Seals and opens `(caller, line)` number pairs for one record id."""

    def __init__(self, number_key: bytes) -> None:
        self._aead = sealing_cipher(number_key, _INFO)

    def seal(self, record_id: str, caller: str, line: str) -> str:
        """An opaque token holding both numbers, bound to `record_id`."""
        nonce = os.urandom(NONCE_BYTES)
        plain = json.dumps({"caller": caller, "line": line}).encode()
        sealed = self._aead.encrypt(nonce, plain, record_id.encode())
        return "v1." + base64.urlsafe_b64encode(nonce + sealed).decode()

    def open(self, record_id: str, token: object) -> tuple[str, str] | None:
        """The `(caller, line)` sealed in `token` for `record_id`; None when it is not a
        token of this key for this record (another server's secret, a copied token)."""
        from cryptography.exceptions import InvalidTag

        if not isinstance(token, str) or not token.startswith("v1."):
            return None
        try:
            raw = base64.urlsafe_b64decode(token[3:].encode())
            plain = self._aead.decrypt(raw[:NONCE_BYTES], raw[NONCE_BYTES:], record_id.encode())
            numbers = json.loads(plain)
        except (InvalidTag, ValueError):
            return None
        return str(numbers["caller"]), str(numbers["line"])
