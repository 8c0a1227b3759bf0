"""The tokens table: scoped access tokens (their digests), committed at once (every instance
checks requests against it)."""

from __future__ import annotations

from voicehub.core.store.base import AccessTokenRecord
from voicehub.core.store.sqlite.database import Database

_UPSERT = """
INSERT INTO tokens (id, data) VALUES (?, ?)
ON CONFLICT (id) DO UPDATE SET data = excluded.data
"""


class TokenTable:
    def __init__(self, database: Database) -> None:
        self.database = database

    def put(self, token: AccessTokenRecord) -> None:
        self.database.write(_UPSERT, (token.id, token.model_dump_json()), durable=True)

    def find(self) -> list[AccessTokenRecord]:
        rows = self.database.fetch_all("SELECT data FROM tokens ORDER BY id")
        return [AccessTokenRecord.model_validate_json(data) for (data,) in rows]

    def remove(self, token_id: str) -> bool:
        return (
            self.database.write("DELETE FROM tokens WHERE id = ?", (token_id,), durable=True) == 1
        )
