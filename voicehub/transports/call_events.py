"""The call protocol's wire part: what the client says, and the parsing of both directions.

Every text frame of the WebSocket call protocol (`voicehub.transports.websocket`) is a
`WireModel`: the server's are the events of `voicehub.voice.events`, the client's are the
messages below. The server parses client messages with `parse_client_message`; the call
client (`voicehub.client`) parses server events with `parse_server_event` and dispatches
on the model class. Server events ignore fields they do not know (a newer server may add
some); client messages forbid them (a typo in a client should be told, not ignored).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Annotated, Any, Literal, get_args

from pydantic import ConfigDict, Field, TypeAdapter, ValidationError

from voicehub.core.validation import describe_errors
from voicehub.errors import ProtocolError
from voicehub.voice.events import ServerEvent, WireModel

__all__ = [
    "BadClientMessage",
    "CallerText",
    "ClientMessage",
    "Hangup",
    "KeypadPress",
    "Playout",
    "StatusRequest",
    "parse_client_message",
    "parse_server_event",
]

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
