"""What a pipeline call records: room events and the client's events, in order.

Everything goes through the call's `EventOutbox` (one task runs the sends in order, so a
room post and the client event after it keep their order, and a slow store never holds up
audio). The room gets the caller's committed turns, what the agent said (with `interrupted`
when the caller cut it), tool calls and results, and provider faults; the client gets
transcripts (the caller's interim and final, the agent's), states and tool calls.
"""

from __future__ import annotations

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

if TYPE_CHECKING:
    from voicehub.agents.llm import ToolCall as ModelToolCall
    from voicehub.agents.tools import ToolResult
    from voicehub.voice.session import CallRuntime
    from voicehub.voice.transport import CallTransport

__all__ = ["CallRecords"]


class CallRecords:
    """The room's record and the client's events of one call."""

    def __init__(self, hub: CallRuntime, room_id: str, transport: CallTransport) -> None:
        self.hub, self.room_id, self.transport = hub, room_id, transport
        self.outbox = EventOutbox(room_id)
        self._user_state = "listening"
        self._agent_state = "listening"

    def start(self) -> None:
        self.outbox.start()

    async def aclose(self) -> None:
        await self.outbox.aclose()

    # -- the caller ---------------------------------------------------------------------

    def caller_heard(self, text: str, *, final: bool) -> None:
        """The recognizer's transcript, for the client only (the room gets whole turns)."""
        self.send(Transcript(role="user", text=text, final=final))

    def caller_turn(self, text: str, *, spoken: bool = True) -> None:
        metadata: dict[str, Any] = {} if spoken else {"typed": True}
        self.post(EventKind.TRANSCRIPT, text, role="user", source="caller", **metadata)

    def user_state(self, state: str) -> None:
        if state != self._user_state:
            self._user_state = state
            self.send(UserState(state=state))

    # -- the agent ----------------------------------------------------------------------

    def agent_said(self, agent_id: str, text: str, *, interrupted: bool, **metadata: Any) -> None:
        self.post(EventKind.TRANSCRIPT, text, source=agent_id, interrupted=interrupted, **metadata)
        self.send(Transcript(role="assistant", text=text, final=True))

    def agent_state(self, state: str) -> None:
        if state != self._agent_state:
            self._agent_state = state
            self.send(AgentState(state=state))

    def tool_ran(self, agent_id: str, call: ModelToolCall, result: ToolResult) -> None:
        meta = {"tool": call.name, "call_id": call.id}
        self.post(EventKind.TOOL_CALL, call.arguments, source=agent_id, **meta)
        self.post(
            EventKind.TOOL_RESULT, result.content, source=agent_id, is_error=result.is_error, **meta
        )
        self.send(ToolCall(name=call.name, arguments=call.arguments, call_id=call.id))

    def provider_error(self, kind: str, detail: str, *, recoverable: bool) -> None:
        """A provider fault (the recognizer failed, a synthesis raised) for the record."""
        self.post(
            EventKind.SYSTEM,
            detail,
            role="system",
            source="voice",
            provider_error=kind,
            recoverable=recoverable,
        )
        self.send(ProviderError(source=kind, message=detail, recoverable=recoverable))

    # -- sending ------------------------------------------------------------------------

    def post(self, kind: EventKind, text: str, *, role: str = "assistant", **metadata: Any) -> None:
        source = str(metadata.pop("source", "voice"))
        event = voice_event(kind, text, role=role, source=source, metadata=metadata)
        self.outbox.put(lambda: self.hub.post(self.room_id, event))

    def send(self, event: ServerEvent) -> None:
        self.outbox.put(lambda: self.transport.send_event(event))
