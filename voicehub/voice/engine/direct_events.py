"""A provider stream that hands its events to a callback instead of its async iterator.

livekit's `stt.RecognizeStream` and `vad.VADStream` queue every event for an `async for`
reader: a task wake-up per event per call. A stream of ours that produces its events in the
call stack that pushed the audio (a frame decoded inline, a VAD batch decided in one
callback) implements `DirectEvents`: once `deliver_to(sink)` is called, every later event
goes to `sink` at once, in order, and none to the iterator. The engine calls it when the
stream has it and reads the iterator (a task) otherwise, so any livekit plugin still works.

A VAD stream of ours is also a `BoundaryEvents`: the engine takes only its speech
boundaries (START_OF_SPEECH, END_OF_SPEECH) and reads how far it analysed from
`analysed_seconds`, so no INFERENCE_DONE event is built per window per call.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, TypeVar, runtime_checkable

__all__ = ["BoundaryEvents", "DirectEvents"]

E_co = TypeVar("E_co", covariant=True)


@runtime_checkable
class DirectEvents(Protocol[E_co]):
    """A stream whose events can go straight to a callback (see the module docstring)."""

    def deliver_to(self, sink: Callable[[E_co], None]) -> None:
        """From now on, hand every event to `sink` (synchronously, on the event loop)."""
        ...


@runtime_checkable
class BoundaryEvents(Protocol[E_co]):
    """A VAD stream that can leave out its per-window events and still say how far it got
    (see the module docstring)."""

    @property
    def analysed_seconds(self) -> float:
        """Seconds of the audio pushed that are decided."""
        ...

    def deliver_to(self, sink: Callable[[E_co], None], *, inferences: str = "all") -> None:
        """Hand events to `sink`; `inferences="none"`: speech boundaries only."""
        ...
