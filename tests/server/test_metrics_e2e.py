"""A real call, then a Prometheus scrape: the embedded stack on uvicorn (Silero VAD,
PocketSphinx, Piper), caller speech synthesized by Piper and streamed in real time, the
research desk delegating to its two analysts; `/metrics` parsed with prometheus_client's
parser must count exactly what the call did."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from prometheus_client.parser import text_string_to_metric_families

from tests.e2e_helpers import RunningServer, running_server
from tests.support.speech import spoken
from voicehub.client.call import CallClient, CallOptions
from voicehub.desks.desk import load_desks
from voicehub.desks.voice_stack import VoiceStacks, default_voice_stacks
from voicehub.server.settings import ServerSettings
from voicehub.voice.events import AgentState, DeliveryOutcome, TaskFinished, Transcript

os.environ.setdefault("HF_HUB_OFFLINE", "1")
pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.realtime]

CHANNELS = Path(__file__).resolve().parents[2] / "channels"
RESEARCH = "could you research heat pumps for me please"


@pytest.fixture(scope="module")
def factory() -> VoiceStacks:
    return default_voice_stacks()  # models load once for every server of the module


@pytest_asyncio.fixture(loop_scope="module")
async def server(tmp_path: Path, factory: VoiceStacks) -> AsyncIterator[RunningServer]:
    # A server per test: each scrape must count that test's call alone.
    settings = ServerSettings(channels_dir=CHANNELS, db_path=tmp_path / "voicehub.db")
    desks = {"research": load_desks(CHANNELS)["research"]}
    async with running_server(settings, voice=factory, desks=desks) as running:
        yield running


async def scrape(server: RunningServer) -> dict[str, float]:
    response = await server.get("/metrics")
    assert response.status_code == 200
    found = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            labels = ",".join(f'{k}="{v}"' for k, v in sorted(sample.labels.items()))
            found[f"{sample.name}{{{labels}}}"] = sample.value
    return found


def of(found: dict[str, float], prefix: str) -> dict[str, float]:
    return {name: value for name, value in found.items() if name.startswith(prefix + "{")}


async def test_a_research_call_is_counted_exactly(server: RunningServer) -> None:
    options = CallOptions(
        desk="research",
        server=server.url,
        conversation="metrics-e2e",
        playout_speed=16.0,
        quiet=0.5,
    )
    async with CallClient(options) as call:
        await call.wait_for_turn()
        await call.say(spoken(RESEARCH), RESEARCH)
        assert await call.settle(90)
        found = await scrape(server)  # during the call, once it settled
        live_call = server.switchboard.calls["research:metrics-e2e"]
        await call.hangup()
    await live_call.finished.wait()  # the server's cleanup, after the close handshake
    report = call.report
    [delivery] = report.events_of(DeliveryOutcome)
    assert delivery.outcome == "delivered"
    assert [e.status for e in report.events_of(TaskFinished)] == ["ok", "ok"]

    assert found["voicehub_active_calls{}"] == 1
    after = await scrape(server)
    assert after["voicehub_active_calls{}"] == 0
    assert after['voicehub_calls_total{desk="research",transport="websocket"}'] == 1
    assert of(found, "voicehub_calls_total") == {
        'voicehub_calls_total{desk="research",transport="websocket"}': 1
    }
    finals = [e for e in report.events_of(Transcript) if e.final]
    user_turns = sum(e.role == "user" for e in finals)
    assert user_turns >= 1
    assert of(found, "voicehub_turns_total") == {
        'voicehub_turns_total{desk="research",role="assistant"}': len(finals) - user_turns,
        'voicehub_turns_total{desk="research",role="user"}': user_turns,
    }
    # One heard turn, answered once ("I'm dispatching my analysts"); the delivery later is
    # not an answer to anything, so it is not a latency.
    v2v = 'voicehub_voice_to_voice_seconds_count{desk="research"}'
    assert found[v2v] == 1
    total = found['voicehub_voice_to_voice_seconds_sum{desk="research"}']
    [client_latency] = report.latencies()
    print(f"\nserver v2v {total:.3f} s, client latency {client_latency:.3f} s")
    # One definition on both sides of the line (end of the caller's last voiced audio to
    # the first agent audio): the caller's figure is longer only by the line (the frames'
    # trip in, the answer's trip out), not by the server VAD's silence window (0.5 s and
    # more), which the server's figure once left out.
    assert 0 < total <= client_latency + 0.05
    assert client_latency - total < 0.3, (total, client_latency)
    assert of(found, "voicehub_deliveries_total") == {
        'voicehub_deliveries_total{outcome="delivered",strategy="wait_for_idle"}': 1
    }
    lag = 'voicehub_delivery_lag_beyond_buffer_seconds_count{strategy="wait_for_idle"}'
    assert found[lag] == 1
    assert of(found, "voicehub_tasks_total") == {'voicehub_tasks_total{status="ok"}': 2}
    assert found['voicehub_task_duration_seconds_count{status="ok"}'] == 2
    assert found["voicehub_tasks_running{}"] == 0
    # A polite caller: nobody spoke over anybody.
    assert of(found, "voicehub_talk_over_total") == {}
    assert of(found, "voicehub_barge_ins_total") == {}
    assert found['voicehub_store_operation_seconds_count{operation="put_delivery"}'] >= 1
    assert found["voicehub_event_loop_lag_seconds_count{}"] >= 1


async def test_a_caller_who_speaks_over_the_greeting_is_one_barge_in(
    server: RunningServer,
) -> None:
    options = CallOptions(
        desk="research",
        server=server.url,
        conversation="metrics-barge-in",
        playout_speed=1.0,  # the greeting plays in real time, so the caller can cut in
        quiet=0.5,
    )
    async with CallClient(options) as call:
        await call.wait_for_event(AgentState, lambda e: e.state == "speaking")
        await call.say(spoken(RESEARCH), RESEARCH)
        call.options.playout_speed = 16.0  # the rest needs no real-time playout
        assert await call.settle(90)
        live_call = server.switchboard.calls["research:metrics-barge-in"]
        await call.hangup()
    await live_call.finished.wait()

    found = await scrape(server)
    assert of(found, "voicehub_barge_ins_total") == {
        'voicehub_barge_ins_total{desk="research",speech="reply"}': 1
    }
    assert of(found, "voicehub_talk_over_total") == {}
    assert of(found, "voicehub_deliveries_total") == {
        'voicehub_deliveries_total{outcome="delivered",strategy="wait_for_idle"}': 1
    }
