"""Deleting a conversation from the SQLite file: every row keyed to it, in one transaction.

The rooms come first (the conversation's, then those under it by `parent_id` and by the
tasks' `child_room_id`, level by level), then one DELETE per table over that set, committed
at once: a crash mid-way leaves the conversation whole, never half of it.
"""

from __future__ import annotations

from voicehub.core.store.base import Erasure
from voicehub.core.store.sqlite.database import Database

__all__ = ["erase_conversation"]


def _placeholders(values: list[str]) -> str:
    return ", ".join("?" * len(values))


def conversation_rooms(database: Database, room_id: str) -> list[str]:
    """`room_id` and every room under it."""
    found, frontier = [room_id], [room_id]
    while frontier:
        marks = _placeholders(frontier)
        rows = database.fetch_all(
            f"SELECT id FROM rooms WHERE parent_id IN ({marks}) "
            f"UNION SELECT json_extract(data, '$.child_room_id') FROM tasks "
            f"WHERE parent_room_id IN ({marks})",
            (*frontier, *frontier),
        )
        known = set(found)
        frontier = sorted({row[0] for row in rows if row[0] is not None} - known)
        found += frontier
    return found


def erase_conversation(database: Database, room_id: str) -> Erasure:
    """Delete the conversation `room_id` and everything under it; committed before it returns."""
    rooms = conversation_rooms(database, room_id)
    marks = _placeholders(rooms)
    stored = database.fetch_all(f"SELECT id FROM rooms WHERE id IN ({marks})", rooms)
    present = {row[0] for row in stored}
    erasure = Erasure(room_ids=[room for room in rooms if room in present])
    erasure.events = database.write(f"DELETE FROM events WHERE room_id IN ({marks})", rooms)
    erasure.tasks = database.write(f"DELETE FROM tasks WHERE parent_room_id IN ({marks})", rooms)
    erasure.deliveries = database.write(f"DELETE FROM deliveries WHERE room_id IN ({marks})", rooms)
    erasure.calls = database.write(f"DELETE FROM calls WHERE id IN ({marks})", rooms)
    database.write(f"DELETE FROM rooms WHERE id IN ({marks})", rooms, durable=True)
    return erasure
