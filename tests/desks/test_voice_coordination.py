"""The frontdesk ([manager]) and report ([blackboard]) desks on a live call, with the real
offline stack: the caller's request is heard, handed on in the background, and the result is
spoken into the call by the delivery service (never by the tool, which answers at once)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.desks.desk_calls import call_desk, example_desks, offline_models
from voicehub.core.events import Event, EventKind
from voicehub.core.hooks import HookContext, HookTrigger
from voicehub.hub import Hub

HEAT_PUMPS = "A heat pump moves heat from the outside air"


@pytest.fixture(scope="module", autouse=True)
def loaded() -> None:
    offline_models()


class DeliveryWatch:
    """The metadata of every delivery attempt's outcome, as it happens."""

    def __init__(self, hub: Hub) -> None:
        self.seen: list[dict[str, Any]] = []
        self._changed = asyncio.Event()

        @hub.hook(HookTrigger.AFTER_DELIVER)
        async def record(event: Event, context: HookContext) -> None:
            self.seen.append(dict(event.metadata))
            self._changed.set()

    async def delivered(self, timeout: float = 60.0) -> dict[str, Any]:
        """The first outcome `delivered` (waiting for it on the hook, not on the transport:
        the outcome is written after the speech's last audio went out)."""

        async def first() -> dict[str, Any]:
            while True:
                for metadata in self.seen:
                    if metadata["outcome"] == "delivered":
                        return metadata
                self._changed.clear()
                await self._changed.wait()

        return await asyncio.wait_for(first(), timeout)


@pytest.mark.slow
async def test_the_front_desk_routes_research_by_voice_and_the_result_is_spoken() -> None:
    desk = example_desks()["frontdesk"]
    async with Hub() as hub:
        watch = DeliveryWatch(hub)
        call = await call_desk(hub, desk, "frontdesk:voice-1")
        await call.agent_said("What do you need?")
        assert [tool.name for tool in call.session.tools] == [
            "list_agents",
            "list_workflows",
            "delegate",
            "check_tasks",
            "cancel_task",
            "ask_user",
        ]
        await call.caller_says("could you research heat pumps for me please")
        await call.agent_said("market brief team look into heat pumps")
        await call.agent_said("as soon as it's ready")  # the tool answered at once
        # Both analysts' answers, spoken by the delivery service.
        result = await call.agent_said(HEAT_PUMPS, timeout=60.0)
        assert result.startswith("Here is what I found.")
        assert result.count(HEAT_PUMPS) == 1  # the second reading of it is left out
        outcome = await watch.delivered()
        assert outcome["strategy"] == "wait_for_idle"
        history = await hub.history("frontdesk:voice-1")
        calls = [e for e in history if e.kind is EventKind.TOOL_CALL]
        assert [e.metadata["tool"] for e in calls] == ["delegate"]
        assert '"market-brief"' in calls[0].text and "heat pumps" in calls[0].text
        tasks = await hub.store.list_tasks(parent_room_id="frontdesk:voice-1")
        assert [t.agent_id for t in tasks] == ["analyst-a", "analyst-b"]
        assert call.transport.acked == call.transport.marks
        await call.session.aclose()


@pytest.mark.slow
async def test_a_report_is_written_on_the_blackboard_and_read_to_the_caller() -> None:
    desk = example_desks()["report"]
    async with Hub() as hub:
        watch = DeliveryWatch(hub)
        call = await call_desk(hub, desk, "report:voice-1")
        await call.agent_said("What should I write a report about?")
        await call.caller_says("could you write a report about heat pumps please")
        await call.agent_said("a report on heat pumps researched and written")
        await call.agent_said("as soon as it's written")
        report = await call.agent_said("Here is your report on heat pumps.", timeout=60.0)
        assert HEAT_PUMPS in report
        outcome = await watch.delivered()
        assert outcome["strategy"] == "wait_for_idle"
        (record,) = await hub.store.list_deliveries(room_id="report:voice-1")
        assert (record.metadata["kind"], record.metadata["finished"]) == ("blackboard", True)
        tasks = await hub.store.list_tasks(parent_room_id="report:voice-1")
        assert [t.agent_id for t in tasks] == ["researcher", "outliner", "writer"]
        history = await hub.history("report:voice-1")
        board = [e.metadata["tool"] for e in history if e.source == "coordinator"]
        assert board[0] == "create_target" and board[-1] == "finish_session"
        await call.session.aclose()
