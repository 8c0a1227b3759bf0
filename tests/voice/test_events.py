"""The call events: every server event is understood by the call client, survives JSON, and
carries the fields the browser page reads; malformed client messages are explained."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, get_args

import pytest

from voicehub.client.call import CallClient, CallOptions
from voicehub.client.report import describe_event
from voicehub.errors import ProtocolError
from voicehub.transports.call_events import (
    BadClientMessage,
    ClientMessage,
    Hangup,
    Playout,
    StatusRequest,
    parse_client_message,
    parse_server_event,
)
from voicehub.voice.events import (
    AgentState,
    CallError,
    CallSession,
    CallStatus,
    CallTransferred,
    ClearAudio,
    DeliveryAttempt,
    DeliveryOutcome,
    ProviderError,
    ServerEvent,
    SpeechMark,
    TaskFinished,
    TaskStarted,
    ToolCall,
    Transcript,
    UserState,
)

APP_JS = Path(__file__).resolve().parents[2] / "voicehub" / "server" / "web" / "app.js"

# One example per event class; a class added to `ServerEvent` needs one here (and the tests
# below then check that the client handles it).
EXAMPLES: dict[type[ServerEvent], ServerEvent] = {
    CallSession: CallSession(
        room_id="research:c-1",
        conversation="c-1",
        desk="research",
        title="Research desk",
        resumed=False,
        greeting=True,
    ),
    CallStatus: CallStatus(
        room_id="research:c-1",
        running_tasks=1,
        background_jobs=0,
        pending_deliveries=1,
        idle=False,
        user_speaking=False,
        agent_speaking=True,
        agent_thinking=False,
        reply_queued=False,
        awaiting_answer=False,
        playout_pending=True,
    ),
    UserState: UserState(state="speaking"),
    AgentState: AgentState(state="thinking"),
    Transcript: Transcript(role="user", text="research heat pumps", final=True),
    ToolCall: ToolCall(name="delegate_workers", arguments='{"task": "pumps"}', call_id="c1"),
    SpeechMark: SpeechMark(id="speech_1/1"),
    ClearAudio: ClearAudio(),
    TaskStarted: TaskStarted(
        task_id="research:c-1::task-1",
        agent_id="analyst-a",
        task="heat pumps",
        room_id="research:c-1",
        child_room_id="research:c-1::task-1",
    ),
    TaskFinished: TaskFinished(
        task_id="research:c-1::task-1",
        agent_id="analyst-a",
        status="ok",
        summary="Heat pumps move heat.",
        room_id="research:c-1",
    ),
    DeliveryAttempt: DeliveryAttempt(
        delivery_id="d-1",
        strategy="wait_for_idle",
        attempt=1,
        kind="supervisor",
        text="Your report is ready.",
        room_id="research:c-1",
    ),
    DeliveryOutcome: DeliveryOutcome(
        delivery_id="d-1",
        strategy="wait_for_idle",
        attempt=1,
        kind=None,
        text="Your report is ready.",
        room_id="research:c-1",
        outcome="interrupted",
        final=False,
        error=None,
    ),
    CallError: CallError(code="bad_json", message="text message is not JSON"),
    ProviderError: ProviderError(source="stt_error", message="reconnecting", recoverable=True),
    CallTransferred: CallTransferred(
        desk="swarm",
        title="Service line",
        conversation="c-1",
        url="/desks/swarm/call?conversation=c-1",
    ),
}

SERVER_EVENTS: list[type[ServerEvent]] = list(get_args(ServerEvent))


def example(kind: type[ServerEvent]) -> ServerEvent:
    assert kind in EXAMPLES, f"no example of {kind.__name__}: add one (and client support)"
    return EXAMPLES[kind]


class RecordingSocket:
    """The client's side of the socket: what it sent."""

    def __init__(self) -> None:
        self.sent: list[str | bytes] = []

    async def send(self, message: str | bytes) -> None:
        self.sent.append(message)


@pytest.mark.parametrize("kind", SERVER_EVENTS, ids=lambda kind: kind.__name__)
async def test_the_call_client_understands_every_server_event(kind: type[ServerEvent]) -> None:
    event = example(kind)
    client = CallClient(CallOptions(desk="research", conversation="c-1"))
    socket = RecordingSocket()
    client._ws = socket  # type: ignore[assignment]
    # both dispatchers end in `assert_never`: an event they do not handle raises here
    client._on_event(parse_server_event(event.to_wire()), now=0.5)
    entry = describe_event(event)
    for task in list(client._acks):
        await task
    assert [received.event for received in client.report.events] == [event]
    assert client.report.events_of(kind) == [event]
    assert entry is None or all(isinstance(part, str) and part for part in entry)
    if isinstance(event, SpeechMark):  # nothing is playing: acked at once
        assert [parse_client_message(str(sent)) for sent in socket.sent] == [Playout(id=event.id)]


@pytest.mark.parametrize("kind", SERVER_EVENTS, ids=lambda kind: kind.__name__)
def test_every_server_event_round_trips_through_json(kind: type[ServerEvent]) -> None:
    event = example(kind)
    wire = event.to_wire()
    assert parse_server_event(wire) == event
    assert parse_server_event(json.loads(wire)) == event
    assert json.loads(wire)["type"] == event.type
    assert set(json.loads(wire)) <= set(kind.model_fields)


def test_event_types_are_unique_and_examples_cover_exactly_the_union() -> None:
    types = [kind.model_fields["type"].default for kind in SERVER_EVENTS]
    assert len(set(types)) == len(types)
    assert set(EXAMPLES) == set(SERVER_EVENTS)


def test_a_status_before_the_session_runs_leaves_the_activity_out() -> None:
    early = CallStatus(room_id="r", running_tasks=0, background_jobs=0, pending_deliveries=0)
    assert json.loads(early.to_wire()) == {
        "type": "status",
        "room_id": "r",
        "running_tasks": 0,
        "background_jobs": 0,
        "pending_deliveries": 0,
    }
    assert not early.settled  # idle is unknown
    assert parse_server_event(early.to_wire()) == early
    assert json.loads(example(CallStatus).to_wire())["playout_pending"] is True


def test_the_browser_page_reads_only_fields_its_events_have() -> None:
    handler = APP_JS.read_text().split("function onEvent(event)", 1)[1].split("\n}\n", 1)[0]
    cases = re.findall(r'case "(\w+)":(.*?)(?=case "|default:)', handler, re.DOTALL)
    by_type = {kind.model_fields["type"].default: kind for kind in SERVER_EVENTS}
    assert {"session", "speech_mark", "clear", "transcript"} <= {name for name, _ in cases}
    for type_name, body in cases:
        assert type_name in by_type, f"the page handles {type_name!r}, which is no event"
        read = set(re.findall(r"event\.(\w+)", body))
        missing = read - set(by_type[type_name].model_fields)
        assert not missing, f"the page reads {sorted(missing)} of {type_name!r} events"


async def test_an_unknown_or_broken_server_event_is_skipped_by_the_client() -> None:
    with pytest.raises(ProtocolError, match="unknown server event type 'dance'; known types: "):
        parse_server_event('{"type": "dance"}')
    with pytest.raises(ProtocolError, match="not JSON"):
        parse_server_event("hello")
    with pytest.raises(ProtocolError, match="a JSON list, not an object"):
        parse_server_event("[1]")
    with pytest.raises(ProtocolError, match="'speech_mark' event: id: required field"):
        parse_server_event({"type": "speech_mark"})
    # fields a newer server adds are ignored
    assert parse_server_event('{"type": "clear", "why": "barge-in"}') == ClearAudio()


# -- client messages --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "message", [Playout(id="speech_1/2"), Hangup(), StatusRequest()], ids=lambda m: m.type
)
def test_client_messages_round_trip(message: ClientMessage) -> None:
    assert parse_client_message(message.to_wire()) == message
    assert parse_client_message(json.loads(message.to_wire())) == message


@pytest.mark.parametrize(
    ("data", "code", "says"),
    [
        ("hello", "bad_json", "text message is not JSON ('hello')"),
        ("[1, 2]", "unknown_message", "unknown message (a JSON list)"),
        ('{"type": "dance"}', "unknown_message", "unknown message (type 'dance')"),
        ({"id": "x"}, "unknown_message", "unknown message (type None)"),
        (
            '{"type": "playout"}',
            "bad_message",
            "bad 'playout' message: id: required field is missing",
        ),
        ('{"type": "playout", "id": ""}', "bad_message", "id: String should have at least"),
        ({"type": "hangup", "now": True}, "bad_message", "now: unknown field"),
    ],
)
def test_malformed_client_messages_are_explained(
    data: str | dict[str, Any], code: str, says: str
) -> None:
    with pytest.raises(BadClientMessage) as raised:
        parse_client_message(data)
    assert raised.value.code == code
    assert says in raised.value.message
    if code != "bad_message":  # show what a good message looks like
        assert '{"type": "playout", "id": "..."}' in raised.value.message
