"""Call events: what a call says to its client, and what the client says back.

Every JSON text frame of the call protocol is one of the models below, told apart by its
`type` field. The voice session, the WebSocket transport and the server build them; the
call client parses them with `parse_server_event` and dispatches on the model class. The
browser console page (`voicehub/server/web/app.js`) reads the same field names, so a
field renamed here must be renamed there too.

Server events ignore fields they do not know (a newer server may add some); client
messages forbid them (a typo in a client should be told, not ignored).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Annotated, Any, Literal, get_args

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    TypeAdapter,
    ValidationError,
    model_serializer,
)

from voicehub.core.validation import describe_errors
from voicehub.errors import ProtocolError
from voicehub.voice.audio import FRAME_MS, frame_bytes

__all__ = [
    "FRAME_BYTES",
    "FRAME_SECONDS",
    "SAMPLE_RATE",
    "AgentState",
    "BadClientMessage",
    "CallError",
    "CallSession",
    "CallStatus",
    "CallTransferred",
    "CallerText",
    "ClearAudio",
    "ClientMessage",
    "DeliveryAttempt",
    "DeliveryOutcome",
    "Hangup",
    "KeypadPress",
    "Playout",
    "ProviderError",
    "ServerEvent",
    "SpeechMark",
    "StatusRequest",
    "TaskFinished",
    "TaskStarted",
    "ToolCall",
    "Transcript",
    "UserState",
    "WireModel",
    "parse_client_message",
    "parse_server_event",
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

# -- client -> server ----------------------------------------------------------------------


class _ClientModel(WireModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Playout(_ClientModel):
    """The client played every byte of agent audio sent before speech mark `id`."""

    type: Literal["playout"] = "playout"
    id: str = Field(min_length=1, max_length=200)


class Hangup(_ClientModel):
    """The caller ends the call (the conversation stays; results wait for a reconnect)."""

    type: Literal["hangup"] = "hangup"


class StatusRequest(_ClientModel):
    """The client asks for a `CallStatus` (used to tell when a conversation has settled)."""

    type: Literal["status"] = "status"


class CallerText(_ClientModel):
    """A caller turn typed instead of spoken: answered like a spoken turn."""

    type: Literal["text"] = "text"
    text: str = Field(min_length=1, max_length=2000)


class KeypadPress(_ClientModel):
    """Keys pressed on a keypad (0-9, `*`, `#`), handled as a phone call's keypad
    (`[phone] digit_gap` and `[phone.keys]` of the desk)."""

    type: Literal["keypad"] = "keypad"
    digits: str = Field(min_length=1, max_length=32, pattern=r"^[0-9*#]+$")


ClientMessage = Playout | Hangup | StatusRequest | CallerText | KeypadPress
"""Every text frame the client sends."""


class BadClientMessage(ProtocolError):
    """A client text frame that is not a `ClientMessage`; `code` names the kind of mistake
    ("bad_json", "unknown_message" or "bad_message") for the error event."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


# -- parsing ---------------------------------------------------------------------------------


def _types_of(union: Any) -> tuple[str, ...]:
    return tuple(str(member.model_fields["type"].default) for member in get_args(union))


_SERVER_EVENT_TYPES = _types_of(ServerEvent)
_CLIENT_MESSAGE_TYPES = _types_of(ClientMessage)
_SERVER_EVENT: TypeAdapter[ServerEvent] = TypeAdapter(
    Annotated[ServerEvent, Field(discriminator="type")]
)
_CLIENT_MESSAGE: TypeAdapter[ClientMessage] = TypeAdapter(
    Annotated[ClientMessage, Field(discriminator="type")]
)
_EXPECTED_CLIENT = (
    'expected JSON like {"type": "playout", "id": "..."}, {"type": "hangup"} or {"type": "status"}'
)


def parse_server_event(data: str | bytes | Mapping[str, Any]) -> ServerEvent:
    """One server text frame (JSON text or already decoded) as its event model.

    Raises `ProtocolError` naming the problem: not JSON, an unknown `type`, or fields
    that do not fit the type.
    """
    decoded: object = data
    if isinstance(data, str | bytes):
        try:
            decoded = json.loads(data)
        except ValueError:
            raise ProtocolError(f"server event is not JSON: {data[:40]!r}") from None
    if not isinstance(decoded, Mapping):
        raise ProtocolError(f"server event is a JSON {type(decoded).__name__}, not an object")
    kind = decoded.get("type")
    if kind not in _SERVER_EVENT_TYPES:
        known = ", ".join(_SERVER_EVENT_TYPES)
        raise ProtocolError(f"unknown server event type {kind!r}; known types: {known}")
    try:
        return _SERVER_EVENT.validate_python(decoded)
    except ValidationError as exc:
        raise ProtocolError(f"bad {kind!r} event: {_problems(exc)}") from None


def parse_client_message(data: str | Mapping[str, Any]) -> ClientMessage:
    """One client text frame (JSON text or already decoded) as its message model.

    Raises `BadClientMessage` saying what is wrong and what a valid message looks like.
    """
    decoded: object = data
    if isinstance(data, str):
        try:
            decoded = json.loads(data)
        except ValueError:
            raise BadClientMessage(
                "bad_json", f"text message is not JSON ({data[:40]!r}); {_EXPECTED_CLIENT}"
            ) from None
    if not isinstance(decoded, Mapping):
        got = f"a JSON {type(decoded).__name__}"
        raise BadClientMessage("unknown_message", f"unknown message ({got}); {_EXPECTED_CLIENT}")
    kind = decoded.get("type")
    if kind not in _CLIENT_MESSAGE_TYPES:
        raise BadClientMessage(
            "unknown_message", f"unknown message (type {kind!r}); {_EXPECTED_CLIENT}"
        )
    try:
        return _CLIENT_MESSAGE.validate_python(decoded)
    except ValidationError as exc:
        raise BadClientMessage("bad_message", f"bad {kind!r} message: {_problems(exc)}") from None


def _problems(exc: ValidationError) -> str:
    # e.g. `id: required field is missing`; the union's tag (the type) leads each location
    # and is already named in the message, so it is left out.
    return "; ".join(describe_errors(exc, root="message", strip=1))
