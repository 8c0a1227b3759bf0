"""The server over real sockets (uvicorn on 127.0.0.1, the `websockets` client), with a
scripted voice session instead of the models: protocol, auth, REST, reconnects, shutdown."""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from tests.e2e_helpers import RunningServer, running_server
from voicehub.agents.tools import ToolContext
from voicehub.client.call import CallClient, CallOptions
from voicehub.core.store.base import DeliveryStatus
from voicehub.core.store.sqlite import SQLiteStore
from voicehub.desks.desk import Desk, load_desks
from voicehub.errors import ConfigError
from voicehub.server.app import create_app
from voicehub.server.settings import ServerSettings
from voicehub.voice.events import (
    CallSession,
    DeliveryAttempt,
    DeliveryOutcome,
    TaskFinished,
    TaskStarted,
    Transcript,
)
from voicehub_dev.fakes.server_session import ScriptedStack

CHANNELS = Path(__file__).resolve().parents[2] / "channels"
TOKEN = "a-long-enough-test-token"


@pytest.fixture(scope="module")
def desks() -> dict[str, Desk]:
    # The two example desks these tests know; `channels/` may hold more.
    examples = load_desks(CHANNELS)
    return {name: examples[name] for name in ("drafting", "research")}


@pytest.fixture
def settings(tmp_path: Path) -> ServerSettings:
    return ServerSettings(channels_dir=CHANNELS, db_path=tmp_path / "var" / "voicehub.db")


@pytest.fixture
def factory() -> ScriptedStack:
    return ScriptedStack()


@pytest.fixture
async def server(
    settings: ServerSettings, factory: ScriptedStack, desks: dict[str, Desk]
) -> AsyncIterator[RunningServer]:
    async with running_server(settings, voice=factory, desks=desks) as running:
        yield running


async def next_event(ws: ClientConnection, kind: str, timeout: float = 10) -> dict[str, Any]:
    """Read until a JSON event of type `kind` (audio and other events are skipped)."""

    async def read() -> dict[str, Any]:
        while True:
            message = await ws.recv()
            if isinstance(message, str) and (event := json.loads(message))["type"] == kind:
                return dict(event)

    return await asyncio.wait_for(read(), timeout)


async def closed(ws: ClientConnection, timeout: float = 10) -> tuple[int | None, str]:
    """Drain the socket until the server closes it; its close code and reason."""

    async def drain() -> None:
        with pytest.raises(ConnectionClosed):
            while True:
                await ws.recv()

    await asyncio.wait_for(drain(), timeout)
    return ws.close_code, ws.close_reason or ""


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


# -- pages and the REST view ------------------------------------------------------------------


async def test_health_console_page_and_static_files(
    server: RunningServer, factory: ScriptedStack
) -> None:
    health = await server.get("/health")
    body = health.json()
    loop_lag, rss = body.pop("loop_lag_ms"), body.pop("rss_mb")
    assert body == {
        "status": "ok",
        "desks": ["drafting", "research"],
        "calls": 0,
        "broken_desks": {},  # every desk file built (voicehub.desks.folder_scan)
    }
    assert loop_lag >= 0 and rss > 10  # the server's own figures, for `voicehub soak`
    page = await server.get("/")
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
    assert '<script src="/static/app.js"' in page.text
    for name in ("app.js", "capture-worklet.js", "app.css"):
        assert (await server.get(f"/static/{name}")).status_code == 200
    assert factory.prepared == ["drafting", "research"]  # models loaded at startup


async def test_desks_are_listed_with_their_call_urls(server: RunningServer) -> None:
    listed = (await server.get("/api/desks")).json()["desks"]
    research = next(desk for desk in listed if desk["name"] == "research")
    assert research["call_url"] == "/desks/research/call"
    assert research["delivery"]["strategy"] == "wait_for_idle"


@pytest.mark.slow
async def test_rest_view_of_rooms_tasks_and_deliveries(
    server: RunningServer, desks: dict[str, Desk]
) -> None:
    async with CallClient(fast(server, "research", "rest-1")) as call:
        await call.wait_for_turn()  # the greeting, acked
        board = server.switchboard
        delegate = desks["research"].front_agent_with_tools().tool("delegate_workers")
        assert delegate is not None
        context = ToolContext(hub=board.hub, room_id="research:rest-1", agent_id="desk")
        result = await delegate.invoke({"task": "heat pumps"}, context)
        assert json.loads(result.content)["status"] == "dispatched"
        delivered = await call.wait_for_event(DeliveryOutcome, lambda e: e.outcome == "delivered")
        assert await call.settle(30)

    assert "three units of heat" in delivered.text
    started = call.report.events_of(TaskStarted)
    assert sorted(str(e.agent_id) for e in started) == ["analyst-a", "analyst-b"]
    assert {e.room_id for e in started} == {"research:rest-1"}
    assert [e.status for e in call.report.events_of(TaskFinished)] == ["ok", "ok"]
    assert call.report.events_of(DeliveryAttempt)[0].strategy == "wait_for_idle"

    rooms = (await server.get("/api/rooms")).json()["rooms"]
    assert [(r["id"], r["live"]) for r in rooms] == [("research:rest-1", False)]
    detail = (await server.get("/api/rooms/research:rest-1")).json()
    assert sorted(t["child_room_id"] for t in detail["tasks"]) == [
        "research:rest-1::task-1",
        "research:rest-1::task-2",
    ]
    assert sorted(c["id"] for c in detail["children"]) == [
        "research:rest-1::task-1",
        "research:rest-1::task-2",
    ]
    assert [d["status"] for d in detail["deliveries"]] == ["delivered"]
    tasks = (await server.get("/api/tasks", params={"room": "research:rest-1"})).json()["tasks"]
    assert len(tasks) == 2
    found = await server.get("/api/deliveries", params={"status": "delivered,held"})
    assert len(found.json()["deliveries"]) == 1
    child = "/api/rooms/research:rest-1::task-1/events"
    events = (await server.get(child, params={"limit": 2})).json()["events"]
    assert [e["room_id"] for e in events] == ["research:rest-1::task-1"] * 2

    assert (await server.get("/api/rooms/nope:1")).status_code == 404
    bad_limit = await server.get("/api/rooms?limit=0")
    assert bad_limit.status_code == 400 and "limit='0'" in bad_limit.json()["message"]
    bad_status = await server.get("/api/deliveries?status=lost")
    assert bad_status.status_code == 400 and "held" in bad_status.json()["message"]


# -- access ---------------------------------------------------------------------------------


async def test_a_token_guards_calls_the_api_and_the_details_of_health(
    settings: ServerSettings, factory: ScriptedStack, desks: dict[str, Desk]
) -> None:
    guarded = settings.model_copy(update={"token": TOKEN})
    async with running_server(guarded, voice=factory, desks=desks) as server:
        # a probe needs no token but learns the status only; the details need the token
        assert (await server.get("/health")).json() == {"status": "ok"}
        detailed = await server.get("/health", headers={"Authorization": f"Bearer {TOKEN}"})
        assert detailed.json()["desks"] == ["drafting", "research"]
        assert detailed.json()["rss_mb"] > 10
        refused = await server.get("/api/rooms")
        assert refused.status_code == 401
        assert refused.headers["www-authenticate"].startswith("Bearer")
        assert "Authorization: Bearer" in refused.json()["message"]
        bearer = {"Authorization": f"Bearer {TOKEN}"}
        assert (await server.get("/api/rooms", headers=bearer)).status_code == 200
        assert (await server.get(f"/api/rooms?token={TOKEN}")).status_code == 200
        wrong = await server.get("/api/rooms", headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 401

        call_url = f"{server.ws_url}/desks/research/call?conversation=auth-1"
        for url in (call_url, f"{call_url}&token=wrong"):
            async with connect(url) as ws:
                error = await next_event(ws, "error")
                assert error["code"] == "unauthorized"
                assert await closed(ws) == (4401, error["message"])
        async with connect(f"{call_url}&token={TOKEN}") as ws:
            assert (await next_event(ws, "session"))["room_id"] == "research:auth-1"
        async with connect(call_url, additional_headers=bearer) as ws:
            assert (await next_event(ws, "session"))["resumed"] is True


async def test_an_unknown_desk_or_a_bad_conversation_id_is_refused(server: RunningServer) -> None:
    async with connect(f"{server.ws_url}/desks/sales/call?conversation=x") as ws:
        error = await next_event(ws, "error")
        assert error["message"] == "unknown desk 'sales'; desks here: drafting, research"
        assert await closed(ws) == (4404, error["message"])
    async with connect(f"{server.ws_url}/desks/research/call?conversation=a:b") as ws:
        error = await next_event(ws, "error")
        assert error["code"] == "bad_conversation" and "'a:b' is not valid" in error["message"]
        assert (await closed(ws))[0] == 4400


# -- the call protocol ------------------------------------------------------------------------


async def test_a_call_streams_audio_both_ways_and_acks_playout(
    server: RunningServer, factory: ScriptedStack
) -> None:
    async with connect(f"{server.ws_url}/desks/research/call?conversation=p-1") as ws:
        session = await next_event(ws, "session")
        assert session == {
            "type": "session",
            "room_id": "research:p-1",
            "conversation": "p-1",
            "desk": "research",
            "title": "Research desk",
            "resumed": False,
            "greeting": True,
            "continued": "new",
            "sample_rate": 16000,
            "frame_bytes": 640,
        }
        audio = await asyncio.wait_for(ws.recv(), 10)
        assert isinstance(audio, bytes) and len(audio) % 640 == 0
        greeting = await next_event(ws, "transcript")
        assert greeting["text"].startswith("Hello, you have reached the research desk")
        mark = await next_event(ws, "speech_mark")
        [fake] = factory.sessions
        assert not fake.activity.is_idle  # handed over is not played
        await ws.send(json.dumps({"type": "status"}))
        assert (await next_event(ws, "status"))["playout_pending"] is True
        await ws.send(json.dumps({"type": "playout", "id": mark["id"]}))
        await ws.send(bytes(640 * 3))
        await ws.send(json.dumps({"type": "status"}))
        status = await next_event(ws, "status")
        assert status["idle"] is True and status["pending_deliveries"] == 0
        assert fake.confirmed == [mark["id"]] and len(fake.caller_audio) == 1920
        assert (await server.get("/health")).json()["calls"] == 1
        await ws.send(json.dumps({"type": "hangup"}))
        assert await closed(ws) == (1000, "hangup")
    # The server ends the session after the close handshake: wait for its cleanup.
    await asyncio.wait_for(fake.closing.wait(), 10)
    assert (await server.get("/health")).json()["calls"] == 0


async def test_malformed_input_gets_error_frames_and_the_call_goes_on(
    server: RunningServer, factory: ScriptedStack
) -> None:
    url = f"{server.ws_url}/desks/research/call?conversation="
    async with connect(url + "bad-1") as bad, connect(url + "good-1") as good:
        await next_event(bad, "session")
        await next_event(good, "session")
        await bad.send(bytes(333))
        error = await next_event(bad, "error")
        assert error == {
            "type": "error",
            "code": "bad_audio_frame",
            "message": "audio message of 333 bytes: "
            "send 16 kHz mono PCM16 in multiples of 640 bytes (20 ms)",
        }
        for text, code in [
            ("not json", "bad_json"),
            ('{"type": "dance"}', "unknown_message"),
            ('{"type": "playout"}', "bad_message"),
        ]:
            await bad.send(text)
            assert (await next_event(bad, "error"))["code"] == code
        await bad.send(bytes(640))  # still in the call
        await bad.send(json.dumps({"type": "status"}))
        await next_event(bad, "status")
        assert len(factory.sessions[0].caller_audio) == 640

        await bad.send(bytes(640 * 51))  # 1.02 s in one message
        error = await next_event(bad, "error")
        assert error["code"] == "message_too_big"
        assert await closed(bad) == (1009, error["message"])
        # the other call never noticed
        await good.send(json.dumps({"type": "status"}))
        assert (await next_event(good, "status"))["room_id"] == "research:good-1"

    async with connect(url + "huge-1", max_size=None) as huge:
        await next_event(huge, "session")
        await huge.send(bytes(200_000))  # beyond the socket limit: uvicorn closes it
        assert (await closed(huge))[0] == 1009
    async with connect(url + "text-1") as chatty:
        await next_event(chatty, "session")
        await chatty.send(json.dumps({"type": "playout", "id": "x" * 5000}))
        assert (await closed(chatty))[0] == 1009
    assert (await server.get("/health")).json()["status"] == "ok"


async def test_without_a_conversation_id_the_server_picks_one(server: RunningServer) -> None:
    async with connect(f"{server.ws_url}/desks/drafting/call") as ws:
        session = await next_event(ws, "session")
    assert len(session["conversation"]) == 16
    assert session["room_id"] == f"drafting:{session['conversation']}"


async def test_a_second_connection_to_a_conversation_replaces_the_first(
    server: RunningServer, factory: ScriptedStack
) -> None:
    url = f"{server.ws_url}/desks/research/call?conversation=twice"
    async with connect(url) as first:
        await next_event(first, "session")
        async with connect(url) as second:
            assert (await next_event(second, "session"))["resumed"] is True
            code, reason = await closed(first)
            assert (code, reason) == (4409, "replaced by a newer connection to this conversation")
            assert factory.sessions[0].closed and not factory.sessions[1].closed
            assert server.switchboard.calls["research:twice"].session is factory.sessions[1]


async def test_a_session_that_cannot_start_is_reported_and_the_server_goes_on(
    server: RunningServer, factory: ScriptedStack
) -> None:
    class Broken(ScriptedStack):
        async def start(self, *args: Any, **kwargs: Any) -> Any:
            raise RuntimeError("no microphone model")

    server.switchboard.lifecycle.voice = Broken()
    async with connect(f"{server.ws_url}/desks/research/call?conversation=s-1") as ws:
        error = await next_event(ws, "error")
        assert error["code"] == "session_failed" and "no microphone model" in error["message"]
        assert (await closed(ws))[0] == 1011
    server.switchboard.lifecycle.voice = factory
    async with CallClient(fast(server, "research", "s-2")) as call:
        assert call.report.room_id == "research:s-2"
    # the call that could not start is counted as refused, not as a call
    metrics = (await server.get("/metrics")).text
    assert 'voicehub_calls_total{desk="research",transport="websocket"} 1.0' in metrics
    assert 'voicehub_calls_refused_total{entry="websocket",reason="session_failed"} 1.0' in metrics


async def test_a_call_that_fails_mid_call_is_logged_closed_1011_and_the_server_goes_on(
    server: RunningServer, factory: ScriptedStack, caplog: pytest.LogCaptureFixture
) -> None:
    class BreaksOnAudio(ScriptedStack):
        async def start(self, *args: Any, **kwargs: Any) -> Any:
            session = await super().start(*args, **kwargs)

            async def push_audio(pcm16: bytes) -> None:
                raise ValueError("the recognizer's buffer is gone")

            session.push_audio = push_audio  # type: ignore[method-assign]
            return session

    server.switchboard.lifecycle.voice = BreaksOnAudio()
    async with connect(f"{server.ws_url}/desks/research/call?conversation=m-1") as ws:
        await ws.send(bytes(640))
        error = await next_event(ws, "error")
        assert error["code"] == "call_failed"
        assert "ValueError: the recognizer's buffer is gone" in error["message"]
        assert (await closed(ws))[0] == 1011
    [failed] = [r for r in caplog.records if r.getMessage() == "room research:m-1: the call failed"]
    assert failed.levelname == "ERROR" and failed.exc_info is not None
    server.switchboard.lifecycle.voice = factory
    async with CallClient(fast(server, "research", "m-2")) as call:
        assert call.report.room_id == "research:m-2"


# -- results that outlive a call ------------------------------------------------------------------


@pytest.mark.slow
async def test_a_result_for_a_caller_who_hung_up_is_spoken_when_they_call_back(
    server: RunningServer,
) -> None:
    room = "research:back-1"
    async with CallClient(fast(server, "research", "back-1")) as call:
        await call.wait_for_turn()
        live = server.switchboard.calls[room]
        await call.hangup()
    await asyncio.wait_for(live.finished.wait(), 10)
    # The ended call's room left memory; it stays open in the store for the call back.
    assert room not in server.switchboard.hub.rooms
    delivery_id = await server.switchboard.hub.deliver(room, "Your report on wind is ready.")
    [held] = (await server.get("/api/deliveries", params={"room": room})).json()["deliveries"]
    assert (held["id"], held["status"]) == (delivery_id, "held")

    async with CallClient(fast(server, "research", "back-1")) as again:
        assert again.report.resumed
        delivered = await again.wait_for_event(DeliveryOutcome, lambda e: e.outcome == "delivered")
        assert await again.settle(20)
    assert delivered.delivery_id == delivery_id
    session = again.report.events_of(CallSession)[0]
    assert session.greeting is False  # a returning caller is not greeted again
    spoken = [e.text for e in again.report.events_of(Transcript)]
    assert spoken == ["Your report on wind is ready."]


@pytest.mark.slow
async def test_shutdown_keeps_undelivered_results_for_the_next_server(
    settings: ServerSettings, desks: dict[str, Desk]
) -> None:
    first = ScriptedStack()
    async with running_server(settings, voice=first, desks=desks) as server:
        call = CallClient(fast(server, "drafting", "restart-1"))
        await call.connect()
        await call.wait_for_turn()
        first.sessions[0].activity.user_speech_started()  # the caller keeps talking
        await server.switchboard.hub.deliver("drafting:restart-1", "The note is approved.")
        # leaving the server block while the call is live: shutdown ends it
    assert call.closed and call.report.close_code == 1012
    await call.close()

    store = SQLiteStore(settings.db_path)
    [kept] = await store.list_deliveries(room_id="drafting:restart-1")
    await store.close()
    assert kept.status is DeliveryStatus.HELD and kept.content == "The note is approved."

    second = ScriptedStack()
    async with (
        running_server(settings, voice=second, desks=desks) as server,
        CallClient(fast(server, "drafting", "restart-1")) as call,
    ):
        await call.wait_for_event(DeliveryOutcome, lambda e: e.outcome == "delivered")
    assert call.report.events_of(DeliveryOutcome)[-1].delivery_id == kept.id


def test_the_example_desk_folder_builds_an_app() -> None:
    app = create_app(ServerSettings(channels_dir=CHANNELS), voice=ScriptedStack())
    paths = [getattr(route, "path", "") for route in app.routes]
    assert paths[:3] == ["/", "/static", "/desks/{desk}/call"]


def test_create_app_names_a_missing_or_empty_desk_folder(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such desk folder"):
        create_app(ServerSettings(channels_dir=tmp_path / "missing"))
    with pytest.raises(ConfigError, match="no desk files"):
        create_app(ServerSettings(channels_dir=tmp_path))
