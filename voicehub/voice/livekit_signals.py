"""What livekit's signals mean for a call: `VoiceActivity`, the room's record, client events.

The mixin of `LiveKitVoiceSession` that handles livekit's `AgentSession` events:

- ``user_state_changed`` (VAD start/end of speech) -> user speaking.
- ``agent_state_changed`` "thinking" (LLM or tools running) -> agent thinking.
- audio segments (see `livekit_io`) -> agent speaking, playout pending; a confirmation
  while livekit still says "speaking" -> thinking until livekit's next state.
- ``speech_created`` -> reply queued, until its first audio or its end.
- end of user speech -> awaiting answer, until a reply is created or starts thinking, the
  turn proves empty, or `answer_timeout` passes (livekit may drop a turn silently).
- committed turns, tool calls and provider errors -> room events (in order, through the
  call's `EventOutbox`) and client events.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from typing import TYPE_CHECKING, Any

from voicehub.core.events import EventKind
from voicehub.voice.event_outbox import EventOutbox, voice_event
from voicehub.voice.events import (
    AgentState,
    ProviderError,
    ServerEvent,
    ToolCall,
    Transcript,
    UserState,
)
from voicehub.voice.providers import vendor_import

with vendor_import("livekit-agents"):
    from livekit.agents import AgentSession, llm
    from livekit.agents.voice import events

if TYPE_CHECKING:
    from voicehub.agents.agent import Agent
    from voicehub.voice.activity import VoiceActivity
    from voicehub.voice.llm_adapter import LiveKitAgent
    from voicehub.voice.session import CallRuntime
    from voicehub.voice.transport import CallTransport

__all__ = ["LiveKitSignals"]

log = logging.getLogger("voicehub.voice")


class LiveKitSignals:
    """livekit session events -> activity, room record and client events (a mixin: the
    session sets these attributes)."""

    hub: CallRuntime
    room_id: str
    transport: CallTransport
    activity: VoiceActivity
    agent: Agent
    answer_timeout: float
    _session: AgentSession[None]
    _desk_agent: LiveKitAgent
    _leaving_agent_id: str | None
    _events: EventOutbox
    _closed: bool
    _close_task: asyncio.Task[None] | None

    def _init_signals(self) -> None:
        self._segment_ids = itertools.count(1)
        self._queued: set[str] = set()  # speeches created, no audio yet
        self._turn_heard = False
        self._answer_timer: asyncio.TimerHandle | None = None

    def _subscribe(self, session: AgentSession[None]) -> None:
        for name, handler in (
            ("user_state_changed", self._on_user_state),
            ("agent_state_changed", self._on_agent_state),
            ("user_input_transcribed", self._on_transcribed),
            ("conversation_item_added", self._on_item_added),
            ("function_tools_executed", self._on_tools_executed),
            ("speech_created", self._on_speech_created),
            ("error", self._on_error),
            ("close", self._on_close),
        ):
            session.on(name, handler)  # type: ignore[arg-type]

    async def aclose(self) -> None:
        raise NotImplementedError

    # Order matters below: set the new busy flag before clearing the old one, so the
    # activity is never idle for an instant in the middle of a turn.

    def _on_user_state(self, ev: events.UserStateChangedEvent) -> None:
        if ev.new_state == "speaking":
            self.activity.user_speech_started()
        else:
            self._await_answer()  # until a reply starts, or the turn proves empty
            self.activity.user_speech_stopped()
        self._send_event(UserState(state=ev.new_state))

    def _on_agent_state(self, ev: events.AgentStateChangedEvent) -> None:
        if ev.new_state == "thinking":
            self.activity.agent_thinking_started()
            self._answered()
        else:
            self.activity.agent_thinking_finished()
        self._send_event(AgentState(state=ev.new_state))

    def _on_transcribed(self, ev: events.UserInputTranscribedEvent) -> None:
        if not ev.transcript.strip():
            if ev.is_final and not self._turn_heard:
                self._answered()  # noise: livekit will not answer a turn without words
            return
        self._turn_heard = True
        if ev.is_final:
            self._await_answer()
        self._send_event(Transcript(role="user", text=ev.transcript, final=ev.is_final))

    def _on_speech_created(self, ev: events.SpeechCreatedEvent) -> None:
        handle = ev.speech_handle
        if not handle.done() and handle.id not in self._queued:
            self._queued.add(handle.id)
            self.activity.reply_queued()
            handle.add_done_callback(lambda done: self._dequeue(done.id))
        self._answered()  # the reply exists: "queued" took over from "awaiting"

    def _on_item_added(self, ev: events.ConversationItemAddedEvent) -> None:
        item = ev.item
        if not isinstance(item, llm.ChatMessage) or not (text := item.text_content):
            return
        if item.role == "user":
            # the client has seen the STT finals already; the room gets the committed turn
            self._post(EventKind.TRANSCRIPT, text, role="user", source="caller", item_id=item.id)
        elif item.role == "assistant":
            self._post(EventKind.TRANSCRIPT, text, item_id=item.id, interrupted=item.interrupted)
            self._send_event(Transcript(role="assistant", text=text, final=True))

    def _on_tools_executed(self, ev: events.FunctionToolsExecutedEvent) -> None:
        for call, out in ev.zipped():
            meta = {"tool": call.name, "call_id": call.call_id}
            self._post(EventKind.TOOL_CALL, call.arguments, **meta)
            self._post(EventKind.TOOL_RESULT, out.output, is_error=out.is_error, **meta)
            self._send_event(
                ToolCall(name=call.name, arguments=call.arguments, call_id=call.call_id)
            )

    def _on_error(self, ev: events.ErrorEvent) -> None:
        # Provider faults (a Deepgram retry, a fallback) belong in the call's record.
        error = ev.error
        kind = str(getattr(error, "type", "error"))  # "stt_error", "tts_error", "llm_error"
        detail = str(getattr(error, "error", error))
        recoverable = bool(getattr(error, "recoverable", False))
        self._post(
            EventKind.SYSTEM,
            detail,
            role="system",
            source="voice",
            provider_error=kind,
            recoverable=recoverable,
        )
        self._send_event(ProviderError(source=kind, message=detail, recoverable=recoverable))

    def _on_close(self, ev: events.CloseEvent) -> None:
        if ev.error is not None and not self._closed:
            log.error("room %s: voice session closed by an error: %s", self.room_id, ev.error)
            self._close_task = asyncio.get_running_loop().create_task(self.aclose())

    # -- turn state and records ------------------------------------------------------------

    def _segment_started(self) -> str:
        """A new audio segment of the current speech: its mark id, which is also the
        speech id `VoiceActivity` tracks (one livekit speech may have several)."""
        speech = self._session.current_speech
        segment_id = f"{speech.id if speech else 'speech'}/{next(self._segment_ids)}"
        self.activity.agent_speech_started(segment_id)  # first: never idle in between
        if speech is not None:
            self._dequeue(speech.id)
        return segment_id

    def _dequeue(self, speech_id: str) -> None:
        if speech_id in self._queued:
            self._queued.discard(speech_id)
            self.activity.reply_dequeued()

    def _await_answer(self) -> None:
        if self._answer_timer is not None:
            self._answer_timer.cancel()
        self.activity.user_turn_awaiting_answer(True)
        self._answer_timer = asyncio.get_running_loop().call_later(
            self.answer_timeout, self._answered
        )

    def _answered(self) -> None:
        self._turn_heard = False
        if self._answer_timer is not None:
            self._answer_timer.cancel()
            self._answer_timer = None
        self.activity.user_turn_awaiting_answer(False)

    def _post(
        self, kind: EventKind, text: str, *, role: str = "assistant", **metadata: Any
    ) -> None:
        source = metadata.pop("source", None) or self._speaking_agent_id()
        event = voice_event(kind, text, role=role, source=source, metadata=metadata)
        self._events.put(lambda: self.hub.post(self.room_id, event))

    def _speaking_agent_id(self) -> str:
        # After a handoff livekit lets the old agent finish its turn: its last words and tool
        # calls belong to it, not to `self.agent` (already the new one), until the new enters.
        leaving = self._leaving_agent_id
        if leaving is not None and not self._desk_agent.entered.is_set():
            return leaving
        return self.agent.id

    def _send_event(self, event: ServerEvent) -> None:
        self._events.put(lambda: self.transport.send_event(event))
