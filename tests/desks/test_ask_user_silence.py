"""A question asked by `ask_user` on a call hands the turn to the caller: once it has played,
the agent is listening (the `agent_state` the caller's client and the console go by), not
"speaking" until the interview ends. Before, the state stayed "speaking" while the answer
was awaited, and `voicehub call` waited its whole turn timeout (13-16 s) before answering."""

from __future__ import annotations

import pytest

from tests.desks.desk_calls import call_desk, example_desks, offline_models
from tests.desks.test_voice_ask_user import QUESTION_1
from voicehub.hub import Hub
from voicehub.orchestration.state import ConversationState, set_conversation_state
from voicehub.voice.events import AgentState, Transcript

ROOM = "triage:ask-silence"


@pytest.fixture(scope="module", autouse=True)
def loaded() -> None:
    offline_models()


async def test_the_agent_listens_once_its_question_has_played() -> None:
    desk = example_desks()["triage"]
    async with Hub() as hub:
        room = await hub.create_room(ROOM, orchestration=desk.call_orchestration())
        await set_conversation_state(
            room, ConversationState(phase="handling", active_agent_id="handler")
        )
        call = await call_desk(hub, desk, ROOM)
        await call.session.push_text("it still does not work")
        await call.agent_said(QUESTION_1)  # played out (acks are immediate) and captioned
        events = call.transport.events
        asked = max(i for i, e in enumerate(events) if isinstance(e, Transcript))

        def listening() -> bool:
            states = [e.state for e in events[asked:] if isinstance(e, AgentState)]
            return bool(states) and states[-1] == "listening"

        await call.transport.wait_for(listening, 10)  # no answer given: the question is open
        await call.session.aclose()
