"""A desk on a live call: the composition the server runs for every call.

`start_desk_call` opens (or reopens) the call's room with the desk's call orchestration (no
agent channels: the voice session's model answers the caller), starts a
`PipelineVoiceSession` (voicehub's engine) with the agent that has the conversation and its
tools, and keeps the two in step:

- a `[supervisor]`/`[loop]` desk: the front agent with its delegation tools;
- a `[pipeline]`/`[swarm]` desk: the active agent of the conversation state (a reconnecting
  caller gets the agent they left), with `handoff_conversation` to the agents it can reach.
  An accepted handoff switches the session's agent (instructions, tools, voice) on the same
  call; with the desk's `handoff_instruction`, the new agent speaks first;
- `[ask_user]` agents: an `ask_user` that speaks the question and hears the answer
  (`VoiceAsker`), while the agent itself does not reply to the answering turn.

Closing the session (`aclose`) also drops the handoff subscription.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final

from voicehub.agents.channel import AgentChannel
from voicehub.desks.turns import desk_turn_setup, desk_words_open
from voicehub.desks.voice_asker import VoiceAsker
from voicehub.errors import ConfigError, VoicehubError
from voicehub.orchestration.ask_user import ask_user_tool
from voicehub.orchestration.handoff import HandoffHandler, handoff_tool
from voicehub.orchestration.state import STATE_KEY, ConversationState, set_conversation_state
from voicehub.voice.engine.session import EngineOptions, PipelineVoiceSession
from voicehub.voice.engine.turn_engine import TurnSettings

if TYPE_CHECKING:
    from livekit.agents import stt as lk_stt
    from livekit.agents import tts as lk_tts
    from livekit.agents import vad as lk_vad

    from voicehub.agents.tools import Tool
    from voicehub.core.room import Room
    from voicehub.desks.desk import Desk
    from voicehub.hub import Hub
    from voicehub.voice.transport import CallTransport

__all__ = ["DESK_GREETING", "DeskCall", "start_desk_call"]

log = logging.getLogger("voicehub.voice")


class _DeskGreeting:
    def __repr__(self) -> str:
        return "DESK_GREETING"


DESK_GREETING: Final[Any] = _DeskGreeting()
"""`greeting` default: the desk's greeting for a new conversation, none when it resumes."""


async def start_desk_call(
    hub: Hub,
    desk: Desk,
    room_id: str,
    transport: CallTransport,
    *,
    stt: lk_stt.STT[Any],
    tts: lk_tts.TTS[Any],
    vad: lk_vad.VAD,
    voices: Mapping[str, lk_tts.TTS[Any]] | None = None,
    greeting: str | None = DESK_GREETING,
    **session_options: Any,
) -> PipelineVoiceSession:
    """Run `desk` on a call in room `room_id` and return the started session.

    `stt`, `tts` and `vad` are the shared livekit plugins; `voices` maps each agent `voice`
    the desk uses ("piper", "espeak") to a TTS. `greeting` defaults to the desk's greeting
    on a new conversation and none on a resumed one. `session_options` go to
    `PipelineVoiceSession` (`options`, `turn_observer`, `prerender_budget`, ...; `options`
    defaults to the desk's delivery mode). Raises ConfigError when
    an agent's voice is missing from `voices`; the session is closed again if it fails to
    start.
    """
    call = DeskCall(hub, desk, room_id, voices or {})  # checks the voices first
    resumed = room_id in hub.rooms or await hub.store.get_room(room_id) is not None
    room = await hub.create_room(room_id, orchestration=desk.call_orchestration())
    await _ready_for_voice(room, desk)
    agent = desk.active_agent(room)
    turns = desk_turn_setup(desk)
    options: dict[str, Any] = {
        "options": EngineOptions(
            delivery_mode=desk.delivery_mode,
            turn=TurnSettings(policy=turns.settings),
            idle_prompt_after=desk.config.voice.idle_prompt_after,
            idle_hang_up_after=desk.config.voice.idle_hang_up_after,
        ),
        "end_of_turn": turns.model,
        "words_open": desk_words_open(desk),
        **session_options,
    }
    if call.asker is not None:
        options["reply_gate"] = call.asker.reply_gate(room_id)
    session = PipelineVoiceSession(
        hub,
        room_id,
        agent,
        transport,
        stt=stt,
        tts=tts,
        vad=vad,
        greeting=(None if resumed else desk.greeting) if greeting is DESK_GREETING else greeting,
        extra_tools=call.tools_for(agent.id),
        voices=voices,
        **options,
    )
    call.attach(session)
    try:
        await session.start()
    except BaseException:
        call.detach()
        await session.aclose()
        raise
    return session


class DeskCall:
    """What ties a desk to one call's session: the tools each agent gets on the call, the
    voice asker, and the handoff subscription that switches the session's agent."""

    def __init__(
        self, hub: Hub, desk: Desk, room_id: str, voices: Mapping[str, lk_tts.TTS[Any]]
    ) -> None:
        self.hub, self.desk, self.room_id = hub, desk, room_id
        self.handler: HandoffHandler | None = (
            desk.handoff.handler_for(hub) if desk.handoff is not None else None
        )
        asking = desk.config.ask_user
        self.asker = VoiceAsker(hub, timeout=asking.timeout) if asking is not None else None
        self._spoken_ask = (
            ask_user_tool(self.asker, max_reasks=asking.max_reasks)
            if self.asker is not None and asking is not None
            else None
        )
        self.session: PipelineVoiceSession | None = None
        self._unsubscribe: list[Callable[[], None]] = []
        self._tasks: set[asyncio.Task[None]] = set()
        _check_voices(desk, voices)

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

    def attach(self, session: PipelineVoiceSession) -> None:
        """Follow handoffs in the room with `session`, until the session closes."""
        self.session = session
        if self.asker is not None:
            self.asker.session = session
        if self.handler is not None:
            self._unsubscribe.append(self.handler.on_accepted(self._follow, room_id=self.room_id))
        session.on_close(self.detach)

    def detach(self) -> None:
        """Stop following handoffs (idempotent); a greeting still pending is cancelled."""
        while self._unsubscribe:
            self._unsubscribe.pop()()
        for task in list(self._tasks):
            task.cancel()

    async def _follow(self, room_id: str, state: ConversationState, target: str | None) -> None:
        session = self.session
        if session is None or target is None or target not in self.desk.agents:
            log.warning("room %s: the call cannot follow a handoff to %r", room_id, target)
            return
        # The reply running the handoff tool ends with the old agent; the next is the new
        # one's, and the conversation comes along.
        await session.update_agent(self.desk.agents[target], extra_tools=self.tools_for(target))
        instruction = self.desk.handoff_instruction
        if instruction:
            task = asyncio.create_task(self._greet(session, instruction))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _greet(self, session: PipelineVoiceSession, text: str) -> None:
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


def _check_voices(desk: Desk, voices: Mapping[str, object]) -> None:
    for agent_id in {desk.front_agent.id, *desk.config.conversation_agent_ids}:
        voice = desk.agents[agent_id].voice
        if voice is not None and voice not in voices:
            where = desk.config.source or f"desk {desk.name!r}"
            known = ", ".join(sorted(voices)) or "none"
            raise ConfigError(
                f"{where}: agent {agent_id!r} speaks with voice {voice!r}, which this call "
                f"does not have (voices: {known}); pass a TTS for it in `voices`"
            )
