"""Copies of records with trusted changes, for the hot path inside the process.

Pydantic validates data where it enters (config, wire events, tool arguments, store reads).
Inside, a record copied with a few known-good changes (an event's `seq`, a task's status)
needs neither validation nor `model_copy`'s generic machinery, which costs about twice as
much. Callers pass values of the fields' own types; nothing checks them here.
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel

_Model = TypeVar("_Model", bound=BaseModel)

_new = object.__new__
_set = object.__setattr__


def replace(model: _Model, **changes: Any) -> _Model:
    """A shallow copy of `model` with `changes` (frozen models too); no validation."""
    copy = _new(type(model))
    fields = model.__dict__.copy()
    fields.update(changes)
    _set(copy, "__dict__", fields)
    _set(copy, "__pydantic_fields_set__", model.__pydantic_fields_set__.union(changes))
    _set(copy, "__pydantic_extra__", model.__pydantic_extra__)
    _set(copy, "__pydantic_private__", model.__pydantic_private__)
    return copy
