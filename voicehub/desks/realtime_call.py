"""A desk on a call through a speech-to-speech model: `start_realtime_call`.

The realtime counterpart of `voicehub.desks.call.start_desk_call`: it opens (or reopens) the
call's room with the desk's call orchestration, starts a `RealtimeVoiceSession` with the
agent that has the conversation and its tools (delegation, `handoff_conversation`), and
follows accepted handoffs with `update_agent` (a `session.update` on the same connection).
The model answers after the handoff tool's output, as the new agent.

`[ask_user]` agents get a spoken `ask_user` (`RealtimeAsker`): the question is said through
the model from inside the tool, and while it waits for the answer the model does not answer
the caller's turns by itself (`create_response` off); the answering turn's input
transcription, posted to the room as the caller's transcript, answers it, and the model
goes on from the tool's output.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING, Any

from voicehub.desks.call import _ready_for_voice
from voicehub.desks.voice_asker import VoiceAsker
from voicehub.errors import ConfigError, VoicehubError
from voicehub.orchestration.ask_user import ask_user_tool
from voicehub.orchestration.handoff import handoff_tool
from voicehub.voice.realtime.config import RealtimeSettings
from voicehub.voice.realtime.connection import realtime_client
from voicehub.voice.realtime_session import RealtimeVoiceSession

if TYPE_CHECKING:
    from voicehub.agents.tools import Tool
    from voicehub.desks.desk import Desk
    from voicehub.hub import Hub
    from voicehub.orchestration.state import ConversationState
    from voicehub.voice.transport import CallTransport

__all__ = ["RealtimeAsker", "realtime_settings", "start_realtime_call"]

log = logging.getLogger("voicehub.voice")
_watchers: set[asyncio.Task[None]] = set()


class RealtimeAsker(VoiceAsker):
    """`ask_user` on a realtime call: the question is spoken verbatim through the model,
    and the caller's next turn answers it, not the model (its auto-reply is off meanwhile)."""

    def __init__(self, hub: Hub, *, timeout: float | None = 60.0) -> None:
        super().__init__(hub, timeout=timeout)
        self.realtime: RealtimeVoiceSession | None = None

    async def ask(self, room_id: str, text: str) -> str | None:
        """Speak `text` and wait for the caller's answer (None on timeout or a closed call)."""
        session = self.realtime
        if session is None or not session.running:
            return None
        await session.set_auto_reply(False)
        try:
            return await super().ask(room_id, text)
        finally:
            with contextlib.suppress(VoicehubError):  # the call ended under the question
                if not self.waiting(room_id):
                    await session.set_auto_reply(True)


def realtime_settings(desk: Desk) -> RealtimeSettings:
    """The session settings of the desk's `[voice.realtime]` table."""
    table = desk.config.voice.realtime_model
    return RealtimeSettings(
        model=table.model,
        voice=table.voice,
        turn_detection=table.turn_detection,
        silence_ms=table.silence_ms,
        eagerness=table.eagerness,
        injection_role=table.injection_role,
        transcription_model=table.transcription_model,
    )


async def start_realtime_call(
    hub: Hub,
    desk: Desk,
    room_id: str,
    transport: CallTransport,
    *,
    client: Any = None,
    **session_options: Any,
) -> RealtimeVoiceSession:
    """Run `desk` on a call in room `room_id` through its realtime model and return the
    started session. Without `client`, one is built from `[voice.realtime]`: a ConfigError
    names the API key variable when it is not set (before the room is touched)."""
    table = desk.config.voice.realtime_model
    where = str(desk.config.source or f"desk {desk.name!r}")
    if desk.config.ask_user is not None and not table.transcription_model:
        raise ConfigError(
            f"{where}: [ask_user] on a realtime desk hears the caller's answers through the "
            "model's input transcription; set [voice.realtime] transcription_model"
        )
    if client is None:
        client = realtime_client(
            api_key_env=table.api_key_env, base_url=table.base_url, where=where
        )
    resumed = room_id in hub.rooms or await hub.store.get_room(room_id) is not None
    room = await hub.create_room(room_id, orchestration=desk.call_orchestration())
    await _ready_for_voice(room, desk)
    agent = desk.active_agent(room)
    handler = desk.handoff.handler_for(hub) if desk.handoff is not None else None
    asking = desk.config.ask_user
    asker = RealtimeAsker(hub, timeout=asking.timeout) if asking is not None else None
    spoken_ask = (
        ask_user_tool(asker, max_reasks=asking.max_reasks)
        if asker is not None and asking is not None
        else None
    )

    def tools_for(agent_id: str) -> list[Tool]:
        tools = [t for t in desk.tools_for(agent_id) if t is not desk.ask_user_tool]
        if spoken_ask is not None and asking is not None and agent_id in asking.agents:
            tools.append(spoken_ask)
        targets = desk.handoff_targets(agent_id)
        if handler is not None and targets:
            tools.append(handoff_tool(handler, targets))
        return tools

    options: dict[str, Any] = {"delivery_mode": desk.delivery_mode, **session_options}
    session = RealtimeVoiceSession(
        hub,
        room_id,
        agent,
        transport,
        client=client,
        settings=realtime_settings(desk),
        greeting=None if resumed else desk.greeting,
        extra_tools=tools_for(agent.id),
        **options,
    )
    if asker is not None:
        asker.session = asker.realtime = session

    async def follow(room: str, state: ConversationState, target: str | None) -> None:
        if target is None or target not in desk.agents:
            log.warning("room %s: the call cannot follow a handoff to %r", room, target)
            return
        await session.update_agent(desk.agents[target], extra_tools=tools_for(target))

    if handler is not None:
        unsubscribe = handler.on_accepted(follow, room_id=room_id)

        async def unsubscribe_at_close() -> None:
            await session.closed.wait()
            unsubscribe()

        task = asyncio.create_task(unsubscribe_at_close())
        _watchers.add(task)  # a reference for the call's life
        task.add_done_callback(_watchers.discard)
    try:
        await session.start()
    except BaseException:
        await session.aclose()
        raise
    return session
