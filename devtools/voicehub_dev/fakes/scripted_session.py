"""A scripted fake voice session for delivery tests, on a `VirtualClock`.

`FakeSession` owns a `VoiceActivity` and implements the `Injector` protocol. Tests script the
caller and the agent (`user_talks`, `agent_talks`, or a timeline with `play`) and advance
the virtual clock; the session records every injection with its start and end times, and
whether the caller was speaking when it started (that must never happen).

An injection speaks for `speech_seconds`, then the transport confirms playout after
`playout_delay`. If the caller starts speaking during an injection (a barge-in) the speech
is cut and `inject` returns INTERRUPTED.
"""

from __future__ import annotations

import asyncio
import itertools
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from voicehub.core.clock import VirtualClock
from voicehub.core.jobs import TaskSet
from voicehub.delivery.injector import InjectOutcome
from voicehub.voice.activity import VoiceActivity


@dataclass
class Injection:
    """One call to `inject`, as the session saw it."""

    text: str
    started: float
    allow_interrupt: bool
    metadata: dict[str, Any]
    user_was_speaking: bool
    agent_was_speaking: bool
    cut_agent: bool = False
    ended: float | None = None
    outcome: InjectOutcome | None = None

    @property
    def delivery_ids(self) -> list[str]:
        return list(self.metadata.get("delivery_ids", []))


@dataclass
class _Speech:
    speech_id: str
    cut: asyncio.Future[None] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )


class FakeSession:
    """Scripted caller and agent turns on a virtual clock; an `Injector` for delivery."""

    def __init__(
        self,
        clock: VirtualClock,
        *,
        speech_seconds: float = 2.0,
        playout_delay: float = 0.0,
        barge_in: bool = True,
        live: bool = True,
    ) -> None:
        self.clock = clock
        self.activity = VoiceActivity(clock, session_live=live)
        self.speech_seconds = speech_seconds
        self.playout_delay = playout_delay
        self.barge_in = barge_in
        self.injections: list[Injection] = []
        self._ids = itertools.count(1)
        self._injecting: _Speech | None = None
        self._agent_speech: _Speech | None = None
        self._tasks = TaskSet("fake session")

    # -- the Injector protocol ---------------------------------------------------------

    async def inject(
        self, text: str, *, allow_interrupt: bool, metadata: dict[str, Any]
    ) -> InjectOutcome:
        record = Injection(
            text=text,
            started=self.clock.now(),
            allow_interrupt=allow_interrupt,
            metadata=dict(metadata),
            user_was_speaking=self.activity.snapshot().user_speaking,
            agent_was_speaking=self._agent_speech is not None,
        )
        self.injections.append(record)
        if self._agent_speech is not None:
            record.cut_agent = True
            self._cut(self._agent_speech)
        speech = self._injecting = _Speech(f"inject-{next(self._ids)}")
        self.activity.agent_speech_started(speech.speech_id)
        try:
            outcome = await self._speak(speech)
        except asyncio.CancelledError:  # the call ended mid-speech
            self.activity.agent_speech_finished(speech.speech_id, interrupted=True)
            record.ended = self.clock.now()
            raise
        finally:
            self._injecting = None
        record.ended = self.clock.now()
        record.outcome = outcome
        return outcome

    # -- scripting the caller and the agent ----------------------------------------------

    def user_starts(self) -> None:
        """The caller starts speaking; cuts an injection in progress (a barge-in)."""
        self.activity.user_speech_started()
        if self.barge_in and self._injecting is not None:
            self._cut(self._injecting)

    def user_stops(self) -> None:
        self.activity.user_speech_stopped()

    async def user_talks(self, seconds: float) -> None:
        self.user_starts()
        await self.clock.sleep(seconds)
        self.user_stops()

    async def agent_talks(self, seconds: float) -> None:
        """The agent speaks a reply of its own (cut short by an Immediate injection)."""
        speech = self._agent_speech = _Speech(f"agent-{next(self._ids)}")
        self.activity.agent_speech_started(speech.speech_id)
        await self._speak(speech, seconds)
        self._agent_speech = None

    def play(self, timeline: Iterable[tuple[float, Callable[[], object]]]) -> None:
        """Run `(at, action)` steps at absolute virtual times, in the background.

        An action may return an awaitable (e.g. `lambda: session.agent_talks(3)`); it is
        started as its own task so the timeline keeps its times.
        """
        steps = sorted(timeline, key=lambda step: step[0])

        async def run() -> None:
            for at, action in steps:
                await self.clock.sleep(at - self.clock.now())
                result = action()
                if isinstance(result, Awaitable):
                    self._tasks.start(_awaited(result), name="timeline step")

        self._tasks.start(run(), name="timeline")

    # -- reading -----------------------------------------------------------------------

    @property
    def texts(self) -> list[str]:
        return [injection.text for injection in self.injections]

    def injections_per_id(self) -> Counter[str]:
        return Counter(i for injection in self.injections for i in injection.delivery_ids)

    @property
    def talked_over_caller(self) -> list[Injection]:
        """Injections that started while the caller was speaking (must stay empty)."""
        return [injection for injection in self.injections if injection.user_was_speaking]

    @property
    def cut_agent_unasked(self) -> list[Injection]:
        """Injections that cut the agent without `allow_interrupt` (must stay empty)."""
        return [i for i in self.injections if i.agent_was_speaking and not i.allow_interrupt]

    # -- internals ---------------------------------------------------------------------

    async def _speak(self, speech: _Speech, seconds: float | None = None) -> InjectOutcome:
        talking = asyncio.ensure_future(self.clock.sleep(seconds or self.speech_seconds))
        try:
            await asyncio.wait({talking, speech.cut}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            talking.cancel()
        if speech.cut.done():
            self.activity.agent_speech_finished(speech.speech_id, interrupted=True)
            return InjectOutcome.INTERRUPTED
        self.activity.agent_speech_finished(speech.speech_id, interrupted=False)
        if self.playout_delay:
            await self.clock.sleep(self.playout_delay)
        self.activity.playout_confirmed(speech.speech_id)
        return InjectOutcome.FINISHED

    @staticmethod
    def _cut(speech: _Speech) -> None:
        if not speech.cut.done():
            speech.cut.set_result(None)


async def _awaited(step: Awaitable[Any]) -> None:
    await step
