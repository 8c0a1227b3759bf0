"""What ties a desk to one live call, on either engine: `DeskOnCall`.

`DeskOnCall.open(call)` opens (or reopens) the call's room with the desk's call orchestration
(no agent channels: the voice session's model answers the caller) and gives the session
what it starts with: the agent that has the conversation and the tools each agent gets on
the call. Once the session exists, `attach(session)` keeps the two in step:

- a `[supervisor]`/`[loop]` desk: the front agent with its delegation tools;
- a `[pipeline]`/`[swarm]` desk: the active agent of the conversation state (a caller who
  calls again gets the agent they left), with `handoff_conversation` to the agents it can
  reach. An accepted handoff switches the session's agent (instructions, tools, voice) on
  the same call; on the pipeline engine, with the desk's `handoff_instruction`, the new
  agent speaks first (a realtime model answers the tool's output by itself);
- `[ask_user]` agents: an `ask_user` that speaks the question and hears the answer
  (`VoiceAsker`, or the realtime engine's `RealtimeAsker`).

`detach` (when the session closes) drops the handoff subscription.
"""

from __future__ import annotations

import contextlib
import logging
from typing import TYPE_CHECKING, Protocol

from voicehub.agents.channel import AgentChannel
from voicehub.core.jobs import TaskSet
from voicehub.desks.voice_asker import VoiceAsker
from voicehub.errors import VoicehubError
from voicehub.orchestration.ask_user import ask_user_tool
from voicehub.orchestration.handoff import HandoffHandler, handoff_tool
from voicehub.orchestration.state import STATE_KEY, ConversationState, set_conversation_state

if TYPE_CHECKING:
    from collections.abc import Callable

    from voicehub.agents.agent import Agent
    from voicehub.agents.tools import Tool
    from voicehub.core.room import Room
    from voicehub.delivery.injector import InjectOutcome
    from voicehub.desks.desk import Desk
    from voicehub.desks.voice_stack import CallSpec
    from voicehub.voice.activity import VoiceActivity

__all__ = ["AttachedSession", "DeskOnCall"]

log = logging.getLogger("voicehub.voice")


class AttachedSession(Protocol):
    """What `DeskOnCall` needs of the voice session (pipeline or realtime) it is attached
    to."""

    @property
    def agent(self) -> Agent: ...

    @property
    def activity(self) -> VoiceActivity: ...

    async def say(self, text: str, *, allow_interrupt: bool = True) -> InjectOutcome: ...

    async def generate_reply(self, instructions: str) -> InjectOutcome: ...

    async def update_agent(
        self, agent: Agent, *, extra_tools: list[Tool] | None = None
    ) -> None: ...


class DeskOnCall:
    """One call's ties to its desk (see the module). Build it with `open`."""

    def __init__(
        self,
        call: CallSpec,
        room: Room,
        *,
        asker: VoiceAsker | None = None,
        greets_after_handoff: bool = True,
    ) -> None:
        desk = call.desk
        self.desk, self.room_id = desk, call.room_id
        self.agent: Agent = desk.active_agent(room)
        self.asker = asker
        self.greets_after_handoff = greets_after_handoff
        self.handler: HandoffHandler | None = (
            desk.handoff.handler_for(call.hub) if desk.handoff is not None else None
        )
        asking = desk.config.ask_user
        self._spoken_ask = (
            ask_user_tool(asker, max_reasks=asking.max_reasks)
            if asker is not None and asking is not None
            else None
        )
        self.session: AttachedSession | None = None
        self._unsubscribe: list[Callable[[], None]] = []
        self._greetings = TaskSet(f"room {call.room_id}: handoff greetings")

    @classmethod
    async def open(
        cls,
        call: CallSpec,
        *,
        asker: type[VoiceAsker] = VoiceAsker,
        greets_after_handoff: bool = True,
    ) -> DeskOnCall:
        """Open the call's room, ready for voice, and its ties; `asker` is the kind of
        spoken `ask_user` the engine has (for `[ask_user]` desks)."""
        desk, hub = call.desk, call.hub
        room = await hub.create_room(call.room_id, orchestration=desk.call_orchestration())
        await _ready_for_voice(room, desk)
        asking = desk.config.ask_user
        return cls(
            call,
            room,
            asker=(
                asker(hub, timeout=asking.timeout, remind_after=desk.config.voice.idle_prompt_after)
                if asking is not None
                else None
            ),
            greets_after_handoff=greets_after_handoff,
        )

    def tools_for(self, agent_id: str) -> list[Tool]:
        """`agent_id`'s tools on top of its own on this call: the desk's (delegation), the
        spoken `ask_user` where configured, and `handoff_conversation` to its targets."""
        tools = [t for t in self.desk.tools_for(agent_id) if t is not self.desk.ask_user_tool]
        asking = self.desk.config.ask_user
        if self._spoken_ask is not None and asking is not None and agent_id in asking.agents:
            tools.append(self._spoken_ask)
        targets = self.desk.handoff_targets(agent_id)
        if self.handler is not None and targets:
            tools.append(handoff_tool(self.handler, targets))
        return tools

    def attach(self, session: AttachedSession) -> None:
        """Ask and follow handoffs through `session`, until `detach`."""
        self.session = session
        if self.asker is not None:
            self.asker.attach(session)
        if self.handler is not None:
            self._unsubscribe.append(self.handler.on_accepted(self._follow, room_id=self.room_id))

    def detach(self) -> None:
        """Stop following handoffs (idempotent); a greeting still pending is cancelled."""
        while self._unsubscribe:
            self._unsubscribe.pop()()
        self._greetings.cancel()

    async def _follow(self, room_id: str, state: ConversationState, target: str | None) -> None:
        session = self.session
        if session is None or target is None or target not in self.desk.agents:
            log.warning("room %s: the call cannot follow a handoff to %r", room_id, target)
            return
        # The reply running the handoff tool ends with the old agent; the next is the new
        # one's, and the conversation comes along.
        await session.update_agent(self.desk.agents[target], extra_tools=self.tools_for(target))
        instruction = self.desk.handoff_instruction
        if instruction and self.greets_after_handoff:
            self._greetings.start(self._greet(session, instruction), name="handoff greeting")

    async def _greet(self, session: AttachedSession, text: str) -> None:
        """The new agent answers `text` (the desk's handoff instruction), after the reply
        that handed the call over."""
        with contextlib.suppress(VoicehubError):  # the call ended first
            await session.generate_reply(text)


async def _ready_for_voice(room: Room, desk: Desk) -> None:
    """The room as a call needs it, even when it was opened as a text room before: no agent
    channel of the desk answering transcripts, and a pipeline or swarm state to follow."""
    for agent_id in {desk.front_agent.id, *desk.config.conversation_agent_ids}:
        if isinstance(room.channels.get(agent_id), AgentChannel):
            await room.detach(agent_id)
    if desk.handoff is not None and STATE_KEY not in room.metadata:
        await set_conversation_state(room, desk.handoff.initial_state())
