"""The whole delegation path on the real clock: tool call to injection.

A scripted voice session (the bench's twin of the fake session the delivery tests use)
receives a `delegate_workers` tool call as a live session does: the tool runs through
`Tool.invoke` (arguments validated at the boundary) and the call and its result are posted
to the room. The supervisor answers at once; two workers run in child rooms; the combined
result goes to the outbox and is delivered with `WaitForIdle(buffer=0)`; the figure ends
when the delivery service calls `inject` on the session. Each result settles before the
next tool call, as in a call where results come seconds apart.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

from voicehub.agents.agent import Agent
from voicehub.agents.scripted import ScriptedLLM
from voicehub.agents.tools import Tool, ToolContext
from voicehub.core.clock import SystemClock
from voicehub.core.events import ChannelType, Event, EventKind
from voicehub.core.hooks import HookContext, HookTrigger
from voicehub.delivery.injector import InjectOutcome
from voicehub.delivery.policy import WaitForIdle
from voicehub.hub import Hub
from voicehub.orchestration.supervisor import Supervisor
from voicehub.voice.activity import VoiceActivity
from voicehub_dev.bench.delegation import _store, _worker
from voicehub_dev.bench.stats import summary_ms


class ScriptedVoiceSession:
    """An `Injector` with its `VoiceActivity` on the real clock. An injection is spoken in
    no time and its playout is confirmed at once; each one resolves the waiter in line."""

    def __init__(self, clock: SystemClock) -> None:
        self.clock = clock
        self.activity = VoiceActivity(clock, session_live=True)
        self.injected: asyncio.Future[float] | None = None
        self._ids = itertools.count(1)

    def expect_injection(self) -> asyncio.Future[float]:
        """A future set to `perf_counter()` when the next injection starts."""
        self.injected = asyncio.get_running_loop().create_future()
        return self.injected

    async def inject(
        self, text: str, *, allow_interrupt: bool, metadata: dict[str, Any]
    ) -> InjectOutcome:
        started = time.perf_counter()
        if self.injected is not None and not self.injected.done():
            self.injected.set_result(started)
        speech_id = f"inject-{next(self._ids)}"
        self.activity.agent_speech_started(speech_id)
        self.activity.agent_speech_finished(speech_id, interrupted=False)
        self.activity.playout_confirmed(speech_id)
        return InjectOutcome.FINISHED


def _supervisor() -> Supervisor:
    boss = Agent(id="boss", llm=ScriptedLLM([{"match": ["*"], "say": "On it."}]))
    return Supervisor(
        boss,
        [_worker("analyst-a"), _worker("analyst-b")],
        strategy="parallel",
        async_delivery=True,
        delivery_strategy=WaitForIdle(buffer=0),
    )


def _delegate_tool(supervisor: Supervisor) -> Tool:
    return next(tool for tool in supervisor.tools() if tool.name == "delegate_workers")


async def _tool_call(hub: Hub, tool: Tool, room_id: str, call_id: str) -> None:
    """What a live session does with a model's tool call: run it, post call and result."""
    arguments = '{"task": "solar panels"}'
    context = ToolContext(hub=hub, room_id=room_id, agent_id="boss", call_id=call_id)
    result = await tool.invoke(arguments, context)
    assert not result.is_error, result.content
    for kind, text in ((EventKind.TOOL_CALL, arguments), (EventKind.TOOL_RESULT, result.content)):
        await hub.post(
            room_id,
            Event(
                kind=kind,
                text=text,
                source="voice",
                role="assistant",
                source_type=ChannelType.VOICE,
                metadata={"tool": tool.name, "call_id": call_id},
            ),
        )


Delegate = Callable[[str], Awaitable[float]]
"""One tool call in the call's room: seconds from the call to the start of the injection,
returned once the result has settled."""


@contextlib.asynccontextmanager
async def scripted_call(kind: str, folder: Path) -> AsyncIterator[tuple[Hub, Delegate]]:
    """A hub on store `kind` with one call's room and its scripted voice session attached."""
    clock = SystemClock()
    supervisor = _supervisor()
    tool = _delegate_tool(supervisor)
    async with Hub(
        store=_store(kind, folder, "full_path"), clock=clock, orchestration=supervisor
    ) as hub:
        room = await hub.create_room("call")
        settled = asyncio.Event()

        # after the injection: the hook costs nothing inside the timed path
        @hub.hook(HookTrigger.AFTER_DELIVER, room_id=room.id)
        async def outcome_written(event: Event, context: HookContext) -> None:
            settled.set()

        session = ScriptedVoiceSession(clock)
        await hub.delivery.attach(room.id, session, session.activity)

        async def delegate(call_id: str) -> float:
            settled.clear()
            injected = session.expect_injection()
            started = time.perf_counter()
            await _tool_call(hub, tool, room.id, call_id)
            duration = await injected - started
            await hub.wait_idle()  # the background job ends after the handoff to delivery
            # In a call, results come seconds apart: the last one settles (its outcome is
            # written) before the next tool call, not inside the next call's timed path.
            await settled.wait()
            return duration

        yield hub, delegate


async def full_path(kind: str, folder: Path, count: int = 1000) -> dict[str, Any]:
    """`count` sequential tool calls in one call's room; milliseconds from the tool call
    to the start of the injection."""
    async with scripted_call(kind, folder) as (_, delegate):
        durations = [await delegate(f"call-{n}") for n in range(count + 50)]
    return summary_ms(durations[50:])  # the first 50 warm up
