"""`replace`: a trusted copy equals pydantic's own copy and leaves the original alone."""

from __future__ import annotations

import pydantic
import pytest

from voicehub.core.events import Event, EventKind
from voicehub.core.store.base import TaskRecord, TaskStatus
from voicehub.core.trusted import replace


def test_replace_matches_model_copy_and_stays_frozen() -> None:
    event = Event(kind=EventKind.TASK, text="hi", metadata={"a": 1})
    copy = replace(event, seq=3, room_id="r")
    assert copy == event.model_copy(update={"seq": 3, "room_id": "r"})
    assert (
        copy.model_dump_json()
        == event.model_copy(update={"seq": 3, "room_id": "r"}).model_dump_json()
    )
    assert (event.seq, event.room_id) == (0, "")
    with pytest.raises(pydantic.ValidationError):
        copy.seq = 4  # type: ignore[misc]


def test_replace_marks_changed_fields_as_set() -> None:
    task = TaskRecord(id="t", parent_room_id="p", child_room_id="t", agent_id="a", input="x")
    done = replace(task, status=TaskStatus.OK, output="y")
    assert done.status is TaskStatus.OK and task.status is TaskStatus.QUEUED
    assert {"status", "output"} <= done.model_fields_set
    assert done.model_dump(exclude_unset=True)["output"] == "y"
