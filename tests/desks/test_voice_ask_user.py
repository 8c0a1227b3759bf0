"""ask_user by voice, with the real offline stack on the triage desk: the technician speaks
each question, the caller's spoken answer is read (a yes/no, an option matched loosely), an
answer that matches nothing is asked again, and the agent never replies to an answer turn
itself; once the interview is done, its reply uses the answers."""

from __future__ import annotations

import json

import pytest

from tests.desks.desk_calls import DeskCallHarness, call_desk, example_desks, offline_models
from voicehub.core.events import Event, EventKind
from voicehub.hub import Hub
from voicehub.orchestration.ask_user import ANSWER_ROUTE
from voicehub.orchestration.state import ConversationState, set_conversation_state
from voicehub.voice.providers.offline import transcribe

ROOM = "triage:voice-ask"
QUESTION_1 = "Have you restarted your router, yes or no?"
QUESTION_2 = "Which service is affected: internet, phone or television?"


@pytest.fixture(scope="module", autouse=True)
def loaded() -> None:
    offline_models()


async def answer(call: DeskCallHarness, words: str, next_line: str) -> bytes:
    """The caller answers; returns the audio of the agent's next line (once it is said)."""
    start = len(call.transport.audio)
    await call.caller_says(words)
    await call.agent_said(next_line)
    return bytes(call.transport.audio[start:])


@pytest.mark.slow
async def test_questions_are_spoken_and_answers_heard_with_a_reask() -> None:
    desk = example_desks()["triage"]
    async with Hub() as hub:
        # The caller is already with the technician (a call coming back to the desk).
        room = await hub.create_room(ROOM, orchestration=desk.call_orchestration())
        await set_conversation_state(
            room, ConversationState(phase="handling", active_agent_id="handler")
        )
        call = await call_desk(hub, desk, ROOM)
        assert call.session.agent.id == "handler"

        audio = await answer(call, "it still does not work", QUESTION_1)
        # The question reached the caller as audio (recognized back) and as a caption.
        heard = transcribe(audio, 16000)
        assert "router" in heard or "restarted" in heard, heard

        await answer(call, "yes", QUESTION_2)
        before = len(call.agent_lines())
        await answer(call, "banana", "Sorry, I didn't catch that.")
        reask = call.agent_lines()[before]
        assert QUESTION_2 in reask and reask.endswith("Please say the option or its number.")
        reply = await answer(call, "the phone one", "Thanks. I have reset your Phone line.")
        assert reply  # spoken, not only written

        # What the agents said: the questions and the reply to the interview, nothing in
        # between (no fallback answer to "yes", "banana" or "the phone one").
        lines = call.agent_lines()
        assert lines[0].startswith("Let me check a couple of things.")
        assert [QUESTION_1 in lines[0], QUESTION_2 in lines[1], QUESTION_2 in lines[2]] == [
            True
        ] * 3
        assert lines[3].startswith("Thanks. I have reset your Phone line.")
        assert len(lines) == 4

        history = await hub.history(ROOM)
        answers = [e for e in history if e.metadata.get("_routed_to") == ANSWER_ROUTE]
        assert len(answers) == 3 and all(e.role == "user" for e in answers)
        asked = {e.id: e.text for e in history if e.metadata.get("ask_user")}
        assert [asked[e.metadata["_answer_to"]].splitlines()[-1] for e in answers[:2]] == [
            QUESTION_1,
            "3. Television",  # the select question ends with its options
        ]
        assert all(e.metadata.get("spoken") for e in history if e.metadata.get("ask_user"))
        interview = json.loads(tool_result(history, "ask_user").text)
        assert [(a["answer"], a["status"]) for a in interview["answers"]] == [
            ("yes", "answered"),
            ("Phone", "answered"),
        ]
        assert interview["stored"] == {"restarted": "yes", "service": "Phone"}
        assert call.session.activity.snapshot().session_live
        await call.session.aclose()


def tool_result(history: list[Event], tool: str) -> Event:
    return next(
        e for e in history if e.kind is EventKind.TOOL_RESULT and e.metadata["tool"] == tool
    )
