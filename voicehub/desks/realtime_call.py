"""The `openai-realtime` voice stack: a desk's calls through a speech-to-speech model.

`start_realtime_call` is the realtime counterpart of
`voicehub.desks.pipeline_call.start_pipeline_call`: it opens (or reopens) the call's room
(`DeskOnCall`), starts a `RealtimeVoiceSession` with the agent that has the conversation and
its tools (delegation, `handoff_conversation`), and follows accepted handoffs with
`update_agent` (a `session.update` on the same connection). The model answers after the
handoff tool's output, as the new agent.

`[ask_user]` agents get a spoken `ask_user` (`RealtimeAsker`): the question is said through
the model from inside the tool, and while it waits for the answer the model does not answer
the caller's turns by itself (`create_response` off); the answering turn's input
transcription, posted to the room as the caller's transcript, answers it, and the model
goes on from the tool's output.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from voicehub.core.jobs import TaskSet
from voicehub.desks.call import DeskOnCall
from voicehub.desks.voice_asker import SpeakingSession, VoiceAsker
from voicehub.errors import ConfigError, VoicehubError
from voicehub.voice.engine.call_parts import CallAgent
from voicehub.voice.realtime.config import RealtimeSettings
from voicehub.voice.realtime.connection import realtime_client
from voicehub.voice.realtime_session import RealtimeCallOptions, RealtimeVoiceSession

if TYPE_CHECKING:
    from voicehub.desks.desk import Desk
    from voicehub.desks.voice_stack import CallSpec
    from voicehub.hub import Hub

__all__ = ["RealtimeAsker", "RealtimeStack", "realtime_settings", "start_realtime_call"]


class RealtimeAsker(VoiceAsker):
    """`ask_user` on a realtime call: the question is spoken verbatim through the model,
    and the caller's next turn answers it, not the model (its auto-reply is off meanwhile)."""

    def __init__(
        self, hub: Hub, *, timeout: float | None = 60.0, remind_after: float = 0.0
    ) -> None:
        super().__init__(hub, timeout=timeout, remind_after=remind_after)
        self.realtime: RealtimeVoiceSession | None = None

    def attach(self, session: SpeakingSession) -> None:
        """Ask through `session`, the call's realtime session."""
        if not isinstance(session, RealtimeVoiceSession):
            raise TypeError(f"a realtime asker speaks through a realtime session, not {session!r}")
        super().attach(session)
        self.realtime = session

    async def ask(self, room_id: str, text: str, *, again: str = "") -> str | None:
        """Speak `text` and wait for the caller's answer (None on timeout or a closed call)."""
        session = self.realtime
        if session is None or not session.running:
            return None
        await session.set_auto_reply(False)
        try:
            return await super().ask(room_id, text, again=again)
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


class RealtimeStack:
    """The `openai-realtime` voice stack (see the module): nothing to load; the key and
    the model are the desk's `[voice.realtime]`."""

    def __init__(self) -> None:
        self._watchers = TaskSet("realtime calls")

    def check(self, desk: Desk) -> list[str]:
        """The API key variable, and the input transcription `[ask_user]` hears through."""
        table = desk.config.voice.realtime_model
        where = str(desk.config.source or f"desk {desk.name!r}")
        problems = []
        if desk.config.ask_user is not None and not table.transcription_model:
            problems.append(
                f"{where}: [ask_user] on a realtime desk hears the caller's answers through "
                "the model's input transcription; set [voice.realtime] transcription_model"
            )
        if not os.environ.get(table.api_key_env):
            problems.append(
                f"{where}: the realtime voice engine needs an OpenAI API key in the "
                f"environment variable {table.api_key_env} (it is not set)"
            )
        return problems

    async def prepare(self, desks: Sequence[Desk]) -> None:
        return None  # the model runs remotely; its key is checked at call start

    async def start(self, call: CallSpec) -> RealtimeVoiceSession:
        problems = self.check(call.desk)
        if problems:
            raise ConfigError("; ".join(problems))
        return await start_realtime_call(call, self._watchers)

    async def aclose(self) -> None:
        await self._watchers.aclose()


async def start_realtime_call(
    call: CallSpec, watchers: TaskSet, *, client: Any = None
) -> RealtimeVoiceSession:
    """Run `call.desk` on the call through its realtime model and return the started
    session. Without `client`, one is built from `[voice.realtime]` (a ConfigError names
    the API key variable when it is not set, before the room is touched). `watchers`
    holds the task that ends the call's handoff subscription with the call."""
    desk = call.desk
    table = desk.config.voice.realtime_model
    if client is None:
        client = realtime_client(
            api_key_env=table.api_key_env, base_url=table.base_url, where=call.where
        )
    glue = await DeskOnCall.open(call, asker=RealtimeAsker, greets_after_handoff=False)
    session = RealtimeVoiceSession(
        call.hub,
        call.room_id,
        CallAgent(glue.agent, extra_tools=glue.tools_for(glue.agent.id), greeting=call.greeting),
        call.transport,
        client=client,
        settings=realtime_settings(desk),
        options=RealtimeCallOptions(delivery_mode=desk.delivery_mode),
        turn_observer=call.turn_observer,
    )
    glue.attach(session)
    if glue.handler is not None:
        watchers.start(_detach_at_close(session, glue), name="handoff watcher")
    try:
        await session.start()
    except BaseException:
        await session.aclose()
        raise
    return session


async def _detach_at_close(session: RealtimeVoiceSession, glue: DeskOnCall) -> None:
    await session.closed.wait()
    glue.detach()
