"""Keypad digits on a call with the real offline stack (triage desk): a digit answers an
ask_user question by option number, and outside a question it is a caller turn the agent
answers. (The keypad itself is `voicehub.telephony.keypad`; Twilio's `dtmf` events feed it.)"""

from __future__ import annotations

import json

import pytest

from tests.desks.desk_calls import call_desk, example_desks, offline_models
from tests.desks.test_voice_ask_user import QUESTION_1, QUESTION_2, answer, tool_result
from voicehub.core.clock import VirtualClock
from voicehub.core.events import EventKind
from voicehub.desks.phone import PhoneConfig
from voicehub.hub import Hub
from voicehub.orchestration.state import ConversationState, set_conversation_state
from voicehub.telephony.keypad import Keypad

ROOM = "triage:keypad"


@pytest.fixture(scope="module", autouse=True)
def loaded() -> None:
    offline_models()


@pytest.mark.slow
async def test_pressing_2_picks_the_second_option_and_a_bare_digit_is_a_turn() -> None:
    desk = example_desks()["triage"]
    async with Hub() as hub:
        room = await hub.create_room(ROOM, orchestration=desk.call_orchestration())
        await set_conversation_state(
            room, ConversationState(phase="handling", active_agent_id="handler")
        )
        call = await call_desk(hub, desk, ROOM)
        clock = VirtualClock()
        keypad = Keypad(call.session, PhoneConfig(), hub.store, clock)

        await answer(call, "it still does not work", QUESTION_1)
        await answer(call, "yes", QUESTION_2)
        keypad.press("2")
        await clock.advance(1.0)  # the digit gap: "2" is the whole entry
        await call.agent_said("Thanks. I have reset your Phone line.")

        history = await hub.history(ROOM)
        interview = json.loads(tool_result(history, "ask_user").text)
        assert [a["answer"] for a in interview["answers"]] == ["yes", "Phone"]

        # No question open: the digits are a caller turn, which the agent answers.
        before = len(call.agent_lines())
        keypad.press("4")
        keypad.press("2")
        keypad.press("#")  # ends the entry without waiting for the gap
        await call.transport.wait_for(lambda: len(call.agent_lines()) > before, 30)
        turns = [e.text for e in await hub.history(ROOM) if e.kind is EventKind.TRANSCRIPT]
        assert "42" in turns
        await keypad.aclose()
        await call.session.aclose()
