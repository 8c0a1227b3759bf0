"""The delivery lag beyond the buffer, on a virtual clock: the switchboard, a real hub on a
SQLite file and a scripted session, with no sockets. A held result counts from the caller's
reconnect; a result that waits for the caller to finish counts that wait."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from voicehub.core.clock import VirtualClock
from voicehub.core.store.sqlite import SQLiteStore
from voicehub.delivery.policy import WaitForIdle
from voicehub.desks.call_lifecycle import CallLifecycle
from voicehub.desks.desk import load_desks
from voicehub.hub import Hub
from voicehub.server.call_metrics import CallMetrics
from voicehub.server.calls import LiveCall, Switchboard
from voicehub.server.metrics import ServerMetrics
from voicehub.server.settings import ServerSettings
from voicehub.voice.events import ServerEvent
from voicehub.voice.session import VoiceSession
from voicehub_dev.fakes.server_session import ScriptedStack

CHANNELS = Path(__file__).resolve().parents[2] / "channels"
ROOM = "drafting:lag"


class Line:
    """A call line that confirms each speech mark at once (a speaker with no delay)."""

    sample_rate = 16000

    def __init__(self) -> None:
        self.confirm = lambda speech_id: None
        self.ended = asyncio.Event()

    async def send_audio(self, pcm16: bytes) -> None:
        return None

    async def mark(self, speech_id: str) -> None:
        asyncio.get_running_loop().call_soon(self.confirm, speech_id)

    async def clear(self) -> None:
        return None

    async def send_event(self, event: ServerEvent) -> None:
        return None

    def send_event_nowait(self, event: ServerEvent) -> None:
        return None

    def close(self, code: int = 1000, reason: str = "") -> None:
        self.ended.set()


def lag_figures(metrics: ServerMetrics) -> tuple[float, float]:
    found = {
        s.name: s.value
        for family in text_string_to_metric_families(metrics.render().decode())
        for s in family.samples
        if s.labels.get("strategy") == "wait_for_idle"
    }
    prefix = "voicehub_delivery_lag_beyond_buffer_seconds"
    return found.get(f"{prefix}_count", 0.0), found.get(f"{prefix}_sum", 0.0)


async def test_lag_counts_from_the_reconnect_and_includes_waiting_for_the_caller(
    tmp_path: Path,
) -> None:
    clock = VirtualClock()
    hub = Hub(store=SQLiteStore(tmp_path / "v.db"), clock=clock)
    await hub.start()
    factory = ScriptedStack()
    desks = {"drafting": load_desks(CHANNELS)["drafting"]}
    calls = CallLifecycle(hub, desks, factory)
    board = Switchboard(calls, ServerSettings(channels_dir=CHANNELS))
    metrics = ServerMetrics(clock)
    calls.observe(CallMetrics(metrics, board))
    strategy = WaitForIdle(buffer=1.0)
    try:
        await hub.delivery.deliver(ROOM, "Held while nobody was on the line.", strategy=strategy)
        await clock.advance(100.0)  # the caller calls back 100 s later

        line = Line()
        sessions: list[VoiceSession] = []

        async def until_over(session: VoiceSession) -> None:
            sessions.append(session)
            line.confirm = session.playout_confirmed
            await line.ended.wait()

        call = asyncio.create_task(
            board.run_call(LiveCall(desks["drafting"], "lag", line), until_over)
        )
        await clock.advance(0.5)
        assert lag_figures(metrics) == (0, 0)  # the buffer has not passed yet
        await clock.advance(1.0)
        count, total = lag_figures(metrics)
        assert count == 1 and total == pytest.approx(0.0, abs=0.01)  # not 100 s

        activity = factory.sessions[0].activity
        activity.user_speech_started()  # the caller talks for 5 s
        await hub.delivery.deliver(ROOM, "Finished while the caller talked.", strategy=strategy)
        await clock.advance(5.0)
        activity.user_speech_stopped()
        await clock.advance(1.0)
        count, total = lag_figures(metrics)
        assert count == 2 and total == pytest.approx(5.0, abs=0.01)

        line.close()
        await call
    finally:
        await hub.aclose()
