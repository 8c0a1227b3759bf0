"""The agent channel: an agent attached to a room, answering what people say there."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING

from voicehub.agents.agent import Agent
from voicehub.agents.llm import ChatMessage, ToolCall
from voicehub.agents.memory import MemoryProvider, SlidingWindowMemory
from voicehub.agents.runner import PrepareStep, RunResult, run_agent
from voicehub.agents.tools import Tool, ToolContext, ToolResult
from voicehub.core.channels import Channel
from voicehub.core.events import ChannelType, Event, EventKind

if TYPE_CHECKING:
    from voicehub.core.room import Room

log = logging.getLogger("voicehub.agent")

Responder = Callable[["AgentChannel", Event, "Room"], Awaitable[None]]

_INBOUND = (EventKind.MESSAGE, EventKind.TRANSCRIPT)


class AgentChannel(Channel):
    """Runs `agent` on each inbound user message routed to it and posts its reply.

    Routing: when an event carries `_routed_to`, only that agent (and agents listed in
    `_always_process`) answer. Events from agent channels are never answered, so agents
    do not talk to each other in a room. One message at a time per room.

    `responder` replaces the default "run the tool loop and post the reply" behaviour
    (the Supervisor's auto-delegate mode uses it).
    """

    channel_type = ChannelType.AGENT

    def __init__(
        self,
        agent: Agent,
        *,
        memory: MemoryProvider | None = None,
        extra_tools: Sequence[Tool] = (),
        responder: Responder | None = None,
        prepare_step: PrepareStep | None = None,
    ) -> None:
        super().__init__(agent.id)
        self.agent = agent
        self.memory: MemoryProvider = memory or SlidingWindowMemory()
        self.extra_tools = list(extra_tools)
        self.responder = responder
        self.prepare_step = prepare_step
        self._locks: dict[str, asyncio.Lock] = {}

    def wants(self, event: Event) -> bool:
        """Whether this agent should answer `event`."""
        if event.kind not in _INBOUND or event.role != "user" or event.from_agent:
            return False
        if event.metadata.get("partial"):
            return False
        routed = event.metadata.get("_routed_to")
        if routed is None:
            return True
        return routed == self.channel_id or self.channel_id in event.metadata.get(
            "_always_process", ()
        )

    async def on_event(self, event: Event, room: Room) -> None:
        if not self.wants(event):
            return
        lock = self._locks.setdefault(room.id, asyncio.Lock())
        async with lock:
            if self.responder is not None:
                await self.responder(self, event, room)
            else:
                await self.reply(room)

    async def on_detach(self, room: Room) -> None:
        self._locks.pop(room.id, None)

    async def reply(self, room: Room, *, instruction: str | None = None) -> RunResult:
        """Run the agent on the room's conversation (plus an optional framework instruction)
        and post its answer."""
        messages = await self.memory.messages(room.hub, room.id, self.agent.id)
        if instruction is not None:
            messages.append(ChatMessage(role="system", content=instruction))
        result = await self.run(room, messages, announce=True)
        if result.text:
            await self.say(room, result.text)
        return result

    async def run(
        self,
        room: Room,
        messages: list[ChatMessage],
        *,
        stop_tools: Sequence[str] = (),
        announce: bool = False,
    ) -> RunResult:
        """Run the tool loop in `room`, recording tool calls and results as events.
        With `announce`, text the agent says alongside tool calls is posted at once."""
        context = ToolContext(hub=room.hub, room_id=room.id, agent_id=self.agent.id)

        async def record(call: ToolCall, result: ToolResult) -> None:
            await room.post(
                self._event(EventKind.TOOL_CALL, call.arguments, tool=call.name, call_id=call.id)
            )
            await room.post(
                self._event(
                    EventKind.TOOL_RESULT,
                    result.content,
                    tool=call.name,
                    call_id=call.id,
                    is_error=result.is_error,
                )
            )

        return await run_agent(
            self.agent,
            messages,
            context=context,
            extra_tools=self.extra_tools,
            prepare_step=self.prepare_step,
            on_tool_result=record,
            on_interim_text=(lambda text: self._announce(room, text)) if announce else None,
            stop_tools=stop_tools,
        )

    async def _announce(self, room: Room, text: str) -> None:
        await self.say(room, text)

    async def say(self, room: Room, text: str, **metadata: object) -> Event | None:
        """Post `text` as this agent's message."""
        return await room.post(self._event(EventKind.MESSAGE, text, **metadata))

    def _event(self, kind: EventKind, text: str, **metadata: object) -> Event:
        return Event(
            kind=kind,
            text=text,
            source=self.channel_id,
            role="assistant",
            source_type=ChannelType.AGENT,
            metadata=dict(metadata),
        )
