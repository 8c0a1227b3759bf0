"""A recognizer wrapped so a test can hand the session a transcript "from the recognizer"
at a moment of its choosing (a late final, words the VAD missed), through the same sink
the engine reads the real recognizer's events from."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

from voicehub.voice.engine.direct_events import DirectEvents
from voicehub.voice.providers import vendor_import
from voicehub.voice.providers.streams import recognizer_abilities

with vendor_import("livekit-agents"):
    from livekit.agents import stt
    from livekit.agents.language import LanguageCode


def final(text: str) -> stt.SpeechEvent:
    """A final transcript as a recognizer sends it."""
    return stt.SpeechEvent(
        type=stt.SpeechEventType.FINAL_TRANSCRIPT,
        alternatives=[stt.SpeechData(language=LanguageCode("en"), text=text)],
    )


class InjectableSTT:
    """`inner` (a livekit STT) for the session, plus `inject(event)` for the test."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.sinks: list[Callable[[Any], None]] = []

    @property
    def capabilities(self) -> Any:
        return self.inner.capabilities

    def on(self, event: str, handler: Callable[..., Any]) -> None:
        self.inner.on(event, handler)

    def off(self, event: str, handler: Callable[..., Any]) -> None:
        self.inner.off(event, handler)

    def stream(self, **options: Any) -> _Stream:
        return _Stream(self, self.inner.stream(**options))

    def inject(self, event: stt.SpeechEvent) -> None:
        for sink in self.sinks:
            sink(event)


class _Stream:
    def __init__(self, owner: InjectableSTT, inner: Any) -> None:
        self.owner, self.inner = owner, inner
        self._reader: asyncio.Task[None] | None = None

    @property
    def finals_owed(self) -> int:
        """What the wrapped stream says it owes (the engine waits for those finals)."""
        return recognizer_abilities(self.inner).finals_owed

    def speech_started(self) -> None:
        recognizer_abilities(self.inner).speech_started()

    def flush_ended(self, behind: float) -> None:
        recognizer_abilities(self.inner).flush_ended(behind)

    def push_frame(self, frame: Any) -> None:
        self.inner.push_frame(frame)

    def flush(self) -> None:
        self.inner.flush()

    def end_input(self) -> None:
        self.inner.end_input()

    def deliver_to(self, sink: Callable[[Any], None]) -> None:
        self.owner.sinks.append(sink)
        if isinstance(self.inner, DirectEvents):
            self.inner.deliver_to(sink)
            return

        async def read() -> None:
            async for event in self.inner:
                sink(event)

        self._reader = asyncio.get_running_loop().create_task(read())

    async def aclose(self) -> None:
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader
        await self.inner.aclose()
