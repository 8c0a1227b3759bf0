"""The contract suite runs every test once per voice engine."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.voice.contract.engines import (
    ROOM,
    Harness,
    PipelineHarness,
    RealtimeHarness,
    brain,
    caller_speech,
    offline_models,
)
from voicehub.core.clock import VirtualClock
from voicehub.hub import Hub
from voicehub_dev.fakes.openai_realtime import FakeRealtimeServer


@pytest.fixture(scope="module", autouse=True)
def loaded() -> None:
    offline_models()  # the models load before any test's clock starts
    caller_speech()


@pytest.fixture(params=["pipeline", "realtime"])
async def engine(request: pytest.FixtureRequest) -> AsyncIterator[Harness]:
    async with Hub(clock=VirtualClock()) as hub:
        await hub.create_room(ROOM, orchestration=None)
        if request.param == "pipeline":
            harness: Harness = PipelineHarness(hub)
            try:
                yield harness
            finally:
                await harness.aclose()
            return
        async with FakeRealtimeServer(brain) as server:
            harness = RealtimeHarness(hub, server)
            try:
                yield harness
            finally:
                await harness.aclose()
