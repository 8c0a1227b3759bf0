"""Call events: what a call says to its client (transcripts, states, tasks, deliveries).

The voice session and the server build the models below; each is one JSON text frame of
the call protocol, told apart by its `type` field (`WireModel.to_wire`). What the client
says back, and the parsing of both directions, is the wire protocol's:
`voicehub.transports.call_events`. The browser console page (`voicehub/server/web/app.js`)
reads the same field names, so a field renamed here must be renamed there too.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    SerializerFunctionWrapHandler,
    model_serializer,
)

from voicehub.voice.audio import FRAME_MS, frame_bytes

__all__ = [
    "FRAME_BYTES",
    "FRAME_SECONDS",
    "SAMPLE_RATE",
    "AgentState",
    "CallError",
    "CallSession",
    "CallStatus",
    "CallTransferred",
    "ClearAudio",
    "DeliveryAttempt",
    "DeliveryOutcome",
    "ProviderError",
    "ServerEvent",
    "SpeechMark",
    "TaskFinished",
    "TaskStarted",
    "ToolCall",
    "Transcript",
    "UserState",
    "WireModel",
]

# -- audio format (binary frames, both directions) -----------------------------------------

SAMPLE_RATE = 16000
"""PCM16 mono little-endian at this rate, caller and agent audio alike."""
FRAME_BYTES = frame_bytes(SAMPLE_RATE)  # 640: one 20 ms frame
FRAME_SECONDS = FRAME_MS / 1000


class WireModel(BaseModel):
    """A JSON text frame of the call protocol."""

    model_config = ConfigDict(frozen=True)

    def to_wire(self) -> str:
        """The frame as sent: compact JSON."""
        return self.model_dump_json()


# -- server -> client ----------------------------------------------------------------------


class CallSession(WireModel):
    """First event of every call: where it runs and the audio format to use."""

    type: Literal["session"] = "session"
    room_id: str
    conversation: str
    desk: str
    title: str
    resumed: bool
    greeting: bool  # the agent speaks first (new conversation on a desk with a greeting)
    # how the call continues the conversation's last one: "new", "handover" (another
    # instance handed it over), "failover" (another instance lost it), "reconnect"
    continued: Literal["new", "handover", "failover", "reconnect"] = "new"
    sample_rate: int = SAMPLE_RATE
    frame_bytes: int = FRAME_BYTES


_ACTIVITY_FIELDS = frozenset(
    {
        "idle",
        "user_speaking",
        "agent_speaking",
        "agent_thinking",
        "reply_queued",
        "awaiting_answer",
        "playout_pending",
    }
)


class CallStatus(WireModel):
    """The answer to a `StatusRequest`: what the conversation is still waiting for.

    The activity fields are None (and left out of the JSON) before the voice session runs.
    """

    type: Literal["status"] = "status"
    room_id: str
    running_tasks: int
    background_jobs: int
    pending_deliveries: int
    idle: bool | None = None
    user_speaking: bool | None = None
    agent_speaking: bool | None = None
    agent_thinking: bool | None = None
    reply_queued: bool | None = None
    awaiting_answer: bool | None = None
    playout_pending: bool | None = None

    @property
    def settled(self) -> bool:
        """Idle, with no running work and nothing left to deliver."""
        busy = self.running_tasks or self.background_jobs or self.pending_deliveries
        return bool(self.idle) and not busy

    @model_serializer(mode="wrap")
    def _omit_unknown_activity(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        fields: dict[str, Any] = handler(self)
        return {k: v for k, v in fields.items() if v is not None or k not in _ACTIVITY_FIELDS}


class UserState(WireModel):
    """The caller's voice activity as livekit sees it ("speaking", "listening", "away")."""

    type: Literal["user_state"] = "user_state"
    state: str  # livekit's value, passed through: new livekit states must not break calls


class AgentState(WireModel):
    """The agent's state as livekit sees it ("listening", "thinking", "speaking", ...)."""

    type: Literal["agent_state"] = "agent_state"
    state: str


class Transcript(WireModel):
    """Words of the caller (interim and final STT results) or of the agent (final)."""

    type: Literal["transcript"] = "transcript"
    role: Literal["user", "assistant"]
    text: str
    final: bool


class ToolCall(WireModel):
    """The agent ran a tool; `arguments` is the model's JSON text, as given."""

    type: Literal["tool_call"] = "tool_call"
    name: str
    arguments: str
    call_id: str


class SpeechMark(WireModel):
    """All agent audio of a speech segment has been sent: ack with `Playout` once played."""

    type: Literal["speech_mark"] = "speech_mark"
    id: str
    # WebRTC only: where the speech's audio ends on the agent's track, in ms from the track's
    # first packet. The data channel overtakes audio in the jitter buffer and decoder, so a
    # client holds the mark until its track has played that far.
    track_ms: int | None = None


class ClearAudio(WireModel):
    """The caller barged in: drop agent audio not yet played (its marks need no ack)."""

    type: Literal["clear"] = "clear"


class TaskStarted(WireModel):
    """A background task was delegated to an agent (it runs in room `child_room_id`)."""

    type: Literal["task_started"] = "task_started"
    task_id: str | None
    agent_id: str | None
    task: str
    room_id: str
    child_room_id: str | None


class TaskFinished(WireModel):
    """A background task ended; `status` is its `TaskStatus` value ("ok", "failed", ...)."""

    type: Literal["task_finished"] = "task_finished"
    task_id: str | None
    agent_id: str | None
    status: str | None
    summary: str
    room_id: str


class DeliveryAttempt(WireModel):
    """A held result is about to be spoken into the call."""

    type: Literal["delivery_attempt"] = "delivery_attempt"
    delivery_id: str | None
    strategy: str | None
    attempt: int | None
    kind: str | None  # what produced the result, from the delivery's metadata, if said
    text: str
    room_id: str
    topic: str | None = None  # the task the result answers ("heat pumps"), if known


class DeliveryOutcome(WireModel):
    """How a delivery attempt ended: "delivered", "interrupted", "failed" or "expired"."""

    type: Literal["delivery"] = "delivery"
    delivery_id: str | None
    strategy: str | None
    attempt: int | None
    kind: str | None
    text: str
    room_id: str
    topic: str | None = None
    outcome: str | None
    final: bool | None  # no further attempt will follow
    error: str | None


class CallTransferred(WireModel):
    """The caller is handed to another desk of this server (a transfer for a browser or
    WebSocket caller): connect to `url` (same conversation); this call then ends."""

    type: Literal["transfer"] = "transfer"
    desk: str
    title: str
    conversation: str
    url: str


class CallError(WireModel):
    """What went wrong, for the client to show: a bad frame (the call goes on), a refused
    call or a failed start (the socket closes next)."""

    type: Literal["error"] = "error"
    code: str
    message: str


class ProviderError(WireModel):
    """A cloud provider fault the call rode out or is riding out: a retry, a reconnect, a
    fallback to the offline recognizer (`source` is "stt_error", "tts_error", ...)."""

    type: Literal["provider_error"] = "provider_error"
    source: str
    message: str
    recoverable: bool = False


ServerEvent = (
    CallSession
    | CallStatus
    | UserState
    | AgentState
    | Transcript
    | ToolCall
    | SpeechMark
    | ClearAudio
    | TaskStarted
    | TaskFinished
    | DeliveryAttempt
    | DeliveryOutcome
    | CallError
    | ProviderError
    | CallTransferred
)
"""Every text frame the server sends."""
