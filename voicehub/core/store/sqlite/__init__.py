"""A durable store on one SQLite file (stdlib `sqlite3`, WAL mode).

`schema` opens the file and keeps its schema up to date, `database` runs statements and
decides when they commit, and one module per table (`rooms`, `events`, `tasks`,
`deliveries`, `instances`) maps records to rows; `store.SQLiteStore` puts them together.
"""

from voicehub.core.store.sqlite.database import CHECKPOINT_PAGES, GROUP_COMMIT_SECONDS
from voicehub.core.store.sqlite.schema import BUSY_TIMEOUT_SECONDS, PAGE_SIZE, SCHEMA_VERSION
from voicehub.core.store.sqlite.store import SQLiteStore

__all__ = [
    "BUSY_TIMEOUT_SECONDS",
    "CHECKPOINT_PAGES",
    "GROUP_COMMIT_SECONDS",
    "PAGE_SIZE",
    "SCHEMA_VERSION",
    "SQLiteStore",
]
