"""ask_user by voice on a realtime desk: the model speaks the tool's question, does not
answer the caller's reply by itself, and the reply's input transcription answers it.

A desk file with `engine = "openai-realtime"` pointed at the fake Realtime server through
`[voice.realtime] base_url`, run by the `openai-realtime` stack (the server's path), with the
real `openai` SDK; the caller's words are Piper speech, heard by the fake's PocketSphinx.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from tests.support.speech import spoken
from tests.support.waiting import until_activity
from tests.voice.realtime.test_session import RATE, finals, speak
from voicehub.core.clock import VirtualClock
from voicehub.core.events import EventKind
from voicehub.desks.desk import Desk, load_desks
from voicehub.desks.realtime_call import RealtimeStack
from voicehub.desks.voice_stack import CallSpec
from voicehub.errors import ConfigError
from voicehub.hub import Hub
from voicehub.orchestration.ask_user import ANSWER_ROUTE
from voicehub.testing import MemoryTransport
from voicehub.voice.realtime_session import SAY_INSTRUCTIONS
from voicehub_dev.fakes.openai_realtime import Call, FakeRealtimeServer, Say, Turn

ROOM = "help:ask-1"
QUESTION = "Which city are you calling from?"

DESK = """\
name = "help"
title = "Help desk"

[voice]
engine = "openai-realtime"

[voice.realtime]
silence_ms = 300
api_key_env = "HELP_DESK_TEST_KEY"
base_url = "{base_url}"

[delivery]
strategy = "wait_for_idle"
buffer = 1.0

[[agents]]
id = "desk"
instructions = "You help callers. Ask for their city with ask_user first."

[ask_user]
agents = ["desk"]
timeout = 60.0
"""


def brain(turn: Turn) -> list[Say | Call]:
    said = SAY_INSTRUCTIONS.split("{text}")[0]
    if turn.instructions.startswith(said):
        return [Say(turn.instructions[len(said) :])]
    last = turn.last
    if last.get("type") == "function_call_output":
        answers = json.loads(last["output"])
        return [Say(f"Thanks, noted: {json.dumps(answers)[:60]}")]
    if last.get("role") == "user" and "ask_user" in turn.tools:
        question = {"question": QUESTION, "type": "freeform", "store": "city"}
        return [Call("ask_user", {"questions": [question]})]
    return [Say("Okay.")]


@pytest.fixture
async def desk_and_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[Desk, FakeRealtimeServer]]:
    monkeypatch.setenv("HELP_DESK_TEST_KEY", "test-key")
    async with FakeRealtimeServer(brain) as server:
        (tmp_path / "help.toml").write_text(DESK.format(base_url=server.base_url))
        yield load_desks(tmp_path)["help"], server


async def test_the_question_is_spoken_and_the_next_turn_answers_it(
    desk_and_server: tuple[Desk, FakeRealtimeServer],
) -> None:
    desk, server = desk_and_server
    async with Hub(clock=VirtualClock()) as hub:
        transport = MemoryTransport(RATE, ack="immediate")
        session = await RealtimeStack().start(await CallSpec.for_room(hub, desk, ROOM, transport))
        transport.session = session
        try:
            tools = server.of_type("session.update")[0]["session"]["tools"]
            assert "ask_user" in [t["name"] for t in tools]
            await speak(session, spoken("my internet is down", rate=RATE))
            await transport.wait_for(lambda: ("assistant", QUESTION) in finals(transport))
            # while the question is open the model does not answer turns by itself
            detection = server.sessions[-1].config["audio"]["input"]["turn_detection"]
            assert detection["create_response"] is False
            created = len([e for e in server.sent if e["type"] == "response.created"])

            await speak(session, spoken("from paris", rate=RATE))
            await transport.wait_for(
                lambda: any(text.startswith("Thanks, noted") for _, text in finals(transport))
            )
            responses = [e for e in server.sent if e["type"] == "response.created"]
            assert len(responses) == created + 1  # the tool's follow-up, no reply of its own
            assert detection["create_response"] is True  # back on once answered
            await until_activity(session.activity, lambda s: s.is_idle)

            history = await hub.history(ROOM)
            [answer] = [e for e in history if e.metadata.get("_routed_to") == ANSWER_ROUTE]
            assert answer.kind is EventKind.TRANSCRIPT and answer.role == "user"
            [question] = [e for e in history if e.metadata.get("ask_user")]
            assert question.text == QUESTION and question.metadata["spoken"] is True
            [output] = [
                e["item"]["output"]
                for e in server.of_type("conversation.item.create")
                if e["item"]["type"] == "function_call_output"
            ]
            assert answer.text in output and "city" in output
        finally:
            await session.aclose()


async def test_ask_user_without_input_transcription_is_refused_at_call_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HELP_DESK_TEST_KEY", "test-key")
    text = DESK.format(base_url="http://127.0.0.1:9/v1").replace(
        "silence_ms = 300", 'silence_ms = 300\ntranscription_model = ""'
    )
    (tmp_path / "help.toml").write_text(text)
    desk = load_desks(tmp_path)["help"]
    async with Hub() as hub:
        with pytest.raises(ConfigError, match="transcription_model"):
            await RealtimeStack().start(
                await CallSpec.for_room(hub, desk, ROOM, MemoryTransport(RATE))
            )
        assert ROOM not in hub.rooms  # refused before the room was touched
