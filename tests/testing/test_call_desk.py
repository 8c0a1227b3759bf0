"""`voicehub.testing`: a desk author's test of their desk, as the docs show it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from voicehub.hub import Hub
from voicehub.testing import MemoryTransport, call_desk
from voicehub.voice.events import Transcript

os.environ.setdefault("HF_HUB_OFFLINE", "1")
CHANNELS = Path(__file__).resolve().parents[2] / "channels"


async def test_a_typed_turn_gets_the_desks_answer() -> None:
    async with call_desk(CHANNELS / "research.toml") as call:
        await call.agent_said("What would you like me to look into?")  # the greeting
        await call.caller_types("could you research heat pumps")
        said = await call.agent_said("my analysts look into heat pumps")
        assert said.startswith("Sure")
        tasks = await call.hub.store.list_tasks(parent_room_id=call.room_id)
        assert tasks and all("heat pumps" in t.input for t in tasks)  # the analysts work on it
    assert call.room_id == "research:test"


async def test_a_second_call_to_the_same_conversation_is_not_greeted_again() -> None:
    async with Hub() as hub:
        async with call_desk(CHANNELS / "research.toml", hub=hub, conversation="again") as first:
            await first.agent_said("What would you like me to look into?")
        async with call_desk(CHANNELS / "research.toml", hub=hub, conversation="again") as call:
            await call.caller_types("thank you")
            await call.agent_said("You're welcome")
            assert not any("What would you like" in line for line in call.agent_lines())


async def test_waiting_for_words_never_said_names_what_was_said() -> None:
    async with call_desk(CHANNELS / "research.toml") as call:
        await call.agent_said("look into?")
        with pytest.raises(TimeoutError, match=r"no agent line with 'sunflowers'.*look into\?"):
            await call.agent_said("sunflowers", timeout=0.5)


async def test_the_memory_transport_confirms_playout_as_told() -> None:
    confirmed: list[str] = []

    class Session:
        def playout_confirmed(self, speech_id: str) -> None:
            confirmed.append(speech_id)

    line = MemoryTransport(8000, ack="manual")
    line.session = Session()  # type: ignore[assignment]
    await line.send_audio(bytes(320))
    await line.mark("s1")
    await line.mark("s2")
    assert line.pending == ["s1", "s2"] and confirmed == []
    line.ack("s1")
    await line.clear()  # a clear drops what is still to be confirmed
    line.ack()
    assert confirmed == ["s1"] and line.seconds_of_audio == 0.02
    await line.send_event(Transcript(role="assistant", text="hi", final=True))
    assert [e.text for e in line.events_of(Transcript)] == ["hi"]
