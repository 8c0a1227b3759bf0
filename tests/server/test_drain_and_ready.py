"""/ready, /metrics access and draining, on the real server (uvicorn on 127.0.0.1) with a
scripted voice session; the drain's deadline runs on a virtual clock."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.e2e_helpers import RunningServer, running_server
from tests.support.waiting import until
from voicehub.client.call import CallClient, CallOptions
from voicehub.core.clock import VirtualClock
from voicehub.core.store.base import DeliveryStatus, InstanceRecord
from voicehub.core.store.sqlite import SQLiteStore
from voicehub.desks.call_lifecycle import HANDOVER_REASON
from voicehub.desks.call_resume import APOLOGY
from voicehub.desks.desk import Desk, load_desks
from voicehub.errors import VoicehubError
from voicehub.server.drain import HANDOVER_WAIT, Drain
from voicehub.server.settings import ServerSettings
from voicehub.voice.events import CallError, Transcript
from voicehub_dev.fakes.redis_server import RedisServer
from voicehub_dev.fakes.server_session import ScriptedStack

CHANNELS = Path(__file__).resolve().parents[2] / "channels"
TOKEN = "a-long-enough-test-token"


@pytest.fixture(scope="module")
def desks() -> dict[str, Desk]:
    examples = load_desks(CHANNELS)
    return {name: examples[name] for name in ("drafting", "research")}


@pytest.fixture
def settings(tmp_path: Path) -> ServerSettings:
    return ServerSettings(channels_dir=CHANNELS, db_path=tmp_path / "voicehub.db")


@pytest.fixture
async def server(settings: ServerSettings, desks: dict[str, Desk]) -> AsyncIterator[RunningServer]:
    async with running_server(settings, voice=ScriptedStack(), desks=desks) as running:
        yield running


def fast(server: RunningServer, desk: str, conversation: str, **options: Any) -> CallOptions:
    return CallOptions(
        desk=desk,
        server=server.url,
        conversation=conversation,
        realtime=False,
        playout_speed=math.inf,
        quiet=0.2,
        **options,
    )


async def scrape(server: RunningServer, **options: Any) -> dict[str, float]:
    """`name{label="value",...}` -> value, parsed with prometheus_client's own parser."""
    response = await server.get("/metrics", **options)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    found = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            labels = ",".join(f'{k}="{v}"' for k, v in sorted(sample.labels.items()))
            found[f"{sample.name}{{{labels}}}"] = sample.value
    return found


def start_draining(server: RunningServer) -> tuple[Drain, VirtualClock, asyncio.Event]:
    drain: Drain = server.app.state.parts.drain
    drain.clock = clock = VirtualClock()
    done = asyncio.Event()
    drain.begin(on_done=done.set)
    return drain, clock, done


async def test_ready_when_started_with_the_models_loaded_and_the_store_answering(
    server: RunningServer,
) -> None:
    ready = await server.get("/ready")
    assert ready.status_code == 200
    body = ready.json()
    load = body["checks"].pop("load")
    assert body["checks"].pop("desks") == {"served": sorted(server.switchboard.desks), "broken": {}}
    assert body == {
        "status": "ready",
        "checks": {"models": "loaded", "draining": False, "store": "ok"},
    }
    assert set(load) == {"lag", "cpu", "recognizers"}
    assert all(0 <= share < 1 for share in load.values())


@pytest.mark.slow
async def test_a_drain_refuses_new_calls_and_holds_the_results_of_calls_left_at_the_deadline(
    server: RunningServer, settings: ServerSettings
) -> None:
    live = CallClient(fast(server, "drafting", "drain-live"))
    await live.connect()
    await live.wait_for_turn()
    [session] = server.switchboard.lifecycle.voice.sessions  # type: ignore[attr-defined]
    session.activity.user_speech_started()  # the caller keeps talking: the result waits
    await server.switchboard.hub.deliver("drafting:drain-live", "The note is approved.")

    _, clock, done = start_draining(server)
    ready = await server.get("/ready")
    assert ready.status_code == 503
    assert ready.json()["reason"] == "draining" and ready.json()["checks"]["draining"] is True

    refused = CallClient(fast(server, "research", "drain-new"))
    with pytest.raises(VoicehubError, match=r"refused \(1013\).*shutting down"):
        await refused.connect()
    await refused.close()
    assert [e.code for e in refused.report.events_of(CallError)] == ["draining"]
    async with httpx.AsyncClient(base_url=server.url) as client:
        offer = await client.post(
            "/desks/research/webrtc", content=b"v=0", headers={"content-type": "application/sdp"}
        )
        phone = await client.post("/twilio/research/voice", content=b"CallSid=CA1")
        carriers = [
            await client.post("/telnyx/research/voice", content=b"CallSid=v3:1"),
            await client.post("/plivo/research/answer", content=b"CallUUID=1"),
            await client.get("/vonage/research/answer?uuid=1"),
        ]
    assert offer.status_code == 503 and offer.headers["retry-after"] == "5"
    assert "shutting down" in offer.text
    assert phone.status_code == 200 and phone.headers["content-type"] == "application/xml"
    assert "<Say>" in phone.text and phone.text.endswith("<Hangup/></Response>")
    telnyx, plivo, vonage = carriers  # each told in its own answer language, and hung up
    assert telnyx.text == phone.text and plivo.text.endswith("</Speak><Hangup/></Response>")
    assert vonage.json()[0]["action"] == "talk" and "restarted" in vonage.json()[0]["text"]
    health = await server.get("/health")  # liveness is not readiness
    assert health.status_code == 200 and health.json()["calls"] == 1

    await clock.advance(29.0)
    assert not done.is_set() and not live.closed  # the live call may go on for 30 s
    await clock.advance(1.0)
    await asyncio.wait_for(done.wait(), 10)
    await live.wait_for(lambda: live.closed, 10)
    await live.close()
    # handed over: a client reconnects to go on (here, another instance has come up)
    assert live.report.close_code == 1012 and live.report.close_reason == HANDOVER_REASON

    store = SQLiteStore(settings.db_path)
    [kept] = await store.list_deliveries(room_id="drafting:drain-live")
    await store.close()
    assert kept.status is DeliveryStatus.HELD
    # alone, the instance went on speaking results to its calls while it drained
    assert not server.switchboard.hub.delivery.handing_over

    found = await scrape(server)
    assert found["voicehub_draining{}"] == 1
    assert found["voicehub_active_calls{}"] == 0
    assert found['voicehub_calls_total{desk="drafting",transport="websocket"}'] == 1
    assert 'voicehub_calls_total{desk="research",transport="websocket"}' not in found
    for entry in ("websocket", "webrtc", "twilio"):
        assert found[f'voicehub_calls_refused_total{{entry="{entry}",reason="draining"}}'] == 1
    assert found['voicehub_deliveries_total{outcome="held",strategy="wait_for_idle"}'] == 1


async def another_instance_alive(server: RunningServer) -> None:
    now = time.time()
    peer = InstanceRecord(id="peer", started_at=now, seen_at=now, expires_at=now + 3600)
    await server.switchboard.hub.store.beat_instance(peer)


@pytest.mark.slow
async def test_a_drain_with_another_instance_alive_hands_the_call_over_and_starts_no_result(
    server: RunningServer,
) -> None:
    await another_instance_alive(server)
    delivery = server.switchboard.hub.delivery

    async def found_the_peer() -> bool:  # results coming now wait for the next instance
        return delivery.handing_over

    async with CallClient(fast(server, "drafting", "drain-peer")) as call:
        await call.wait_for_turn()
        drain, clock, done = start_draining(server)
        await until(found_the_peer, what="the drain finding the other instance")
        await clock.advance(HANDOVER_WAIT)  # handed over by then, quiet or not
        await call.wait_for(lambda: call.closed, 10)
        await asyncio.wait_for(done.wait(), 10)
    assert call.report.close_code == 1012 and drain.handed_over == 1


@pytest.mark.slow
async def test_a_hand_over_carries_what_the_agent_just_said_to_the_caller_before_closing(
    server: RunningServer,
) -> None:
    await another_instance_alive(server)
    async with CallClient(fast(server, "drafting", "drain-said")) as call:
        await call.wait_for_turn()
        [session] = server.switchboard.lifecycle.voice.sessions  # type: ignore[attr-defined]
        # said and played, its record still behind a slow store post: a quiet moment
        session.unsent.append(Transcript(role="assistant", text=APOLOGY, final=True))
        _, clock, done = start_draining(server)
        await call.wait_for(lambda: call.closed, 10)  # handed over at once: nothing playing
        await clock.advance(1.0)  # the drain's next look finds no call left
        await asyncio.wait_for(done.wait(), 10)
    assert call.report.close_code == 1012
    assert APOLOGY in [e.text for e in call.report.events_of(Transcript)]


@pytest.mark.slow
async def test_a_drain_ends_as_soon_as_the_last_call_hangs_up(server: RunningServer) -> None:
    async with CallClient(fast(server, "drafting", "drain-short")) as call:
        await call.wait_for_turn()
        drain, clock, done = start_draining(server)
        await asyncio.sleep(0)
        assert not done.is_set()
        await call.hangup()
    await asyncio.wait_for(drain.wait(), 10)  # no virtual time passed: the hang-up ended it
    assert done.is_set() and clock.now() == 0.0


async def test_metrics_need_the_token_when_one_is_set_and_ready_hides_details_without_it(
    settings: ServerSettings, desks: dict[str, Desk]
) -> None:
    settings = settings.model_copy(update={"token": TOKEN})
    async with running_server(settings, voice=ScriptedStack(), desks=desks) as server:
        denied = await server.get("/metrics")
        assert denied.status_code == 401 and denied.json()["error"] == "unauthorized"
        assert (await server.get("/metrics", params={"token": "x" * 20})).status_code == 401
        found = await scrape(server, headers={"Authorization": f"Bearer {TOKEN}"})
        assert found["voicehub_active_calls{}"] == 0
        assert (await server.get("/ready")).status_code == 200  # balancers send no token
        start_draining(server)
        assert (await server.get("/ready")).json() == {
            "status": "not_ready",
            "reason": "draining",
        }
        with_token = await server.get("/ready", headers={"Authorization": f"Bearer {TOKEN}"})
        assert with_token.json()["checks"]["store"] == "ok"


async def test_ready_is_503_while_the_redis_store_is_down(
    tmp_path: Path, settings: ServerSettings, desks: dict[str, Desk]
) -> None:
    redis = RedisServer(tmp_path / "redis")
    (tmp_path / "redis").mkdir()
    redis.start()
    try:
        settings = settings.model_copy(update={"store": redis.url})
        async with running_server(settings, voice=ScriptedStack(), desks=desks) as server:
            assert (await server.get("/ready")).status_code == 200
            redis.stop()
            down = await server.get("/ready")
            assert down.status_code == 503
            body = down.json()
            assert body["reason"] == "store unreachable"
            assert body["checks"]["store"].startswith("unreachable: ")
            assert body["checks"]["models"] == "loaded" and body["checks"]["draining"] is False
            assert (await server.get("/health")).status_code == 200  # still alive
            redis.start()
            assert (await server.get("/ready")).status_code == 200
            found = await scrape(server)
            assert found['voicehub_store_operation_seconds_count{operation="get_room"}'] >= 3
    finally:
        redis.stop()
