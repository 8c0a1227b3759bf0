"""Results nobody collects, on the real server: after `hold_for` they go by SMS (the real
`twilio` client against the fake account) or a signed webhook (an HTTPS receiver), once;
the caller's number is kept only sealed, never in the SQLite file nor the logs."""

from __future__ import annotations

import asyncio
import logging
import shutil
import time
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
import pytest_asyncio

from tests.e2e_helpers import RunningServer, running_server
from tests.support.waiting import until
from voicehub.core.clock import VirtualClock
from voicehub.core.store.base import DeliveryRecord
from voicehub.delivery.followup import followup_state
from voicehub.desks.desk import load_desks
from voicehub.errors import ConfigError
from voicehub.server.app import create_app
from voicehub.server.followups import REACH_KEY, ServerFollowUps, sms_reference
from voicehub.server.settings import ServerSettings
from voicehub.telephony.twilio.webhooks import caller_conversation
from voicehub_dev.fakes.server_session import ScriptedStack
from voicehub_dev.fakes.twilio import FakeTwilio
from voicehub_dev.fakes.twilio_rest import FakeTwilioRest
from voicehub_dev.fakes.webhook_receiver import WebhookReceiver

CHANNELS = Path(__file__).resolve().parents[2] / "channels"
PUBLIC = "https://voicehub.test"
AUTH_TOKEN = "c" * 32
NUMBER_KEY = "k" * 32
ACCOUNT = "AC" + "0" * 32
CALLER = "+15550100777"
ROOM = f"research:{caller_conversation(CALLER, NUMBER_KEY.encode())}"
SECRET = "s" * 32
HOUR = 3600.0


def desks_folder(tmp: Path, webhook: str | None = None) -> Path:
    """research (SMS after an hour) and research-hook (a webhook after an hour)."""
    folder = tmp / "channels"
    shutil.copytree(CHANNELS, folder, dirs_exist_ok=True)
    for path in folder.glob("*.toml"):
        if path.stem not in ("research", "research-hook"):
            path.unlink()
    text = (CHANNELS / "research.toml").read_text()
    sms = 'hold_for = "1h"\nfallback = "sms"\n'
    (folder / "research.toml").write_text(text.replace("[delivery]\n", f"[delivery]\n{sms}"))
    if webhook is not None:
        hook = f'hold_for = "1h"\nfallback = "webhook"\nwebhook = "{webhook}"\n'
        text = text.replace('name = "research"', 'name = "research-hook"', 1)
        (folder / "research-hook.toml").write_text(
            text.replace("[delivery]\n", f"[delivery]\n{hook}")
        )
    return folder


class Line:
    def __init__(self, server: RunningServer, rest: FakeTwilioRest, receiver: WebhookReceiver):
        self.server, self.rest, self.receiver, self.twilio = server, rest, receiver, rest.twilio
        self.late = 0.0  # how far past now the follow-ups' wall clock runs

    @property
    def followups(self) -> ServerFollowUps:
        found: ServerFollowUps = self.server.app.state.parts.telephony.followups
        return found

    async def call_and_hang_up(self, caller: str = CALLER) -> str:
        """Call the research desk, hear what it has to say, hang up; the room id."""
        factory: ScriptedStack = self.server.switchboard.lifecycle.voice  # type: ignore[assignment]
        sessions = len(factory.sessions)
        answer = await self.twilio.incoming_call("research", caller)
        room = f"research:{answer.parameters['conversation']}"
        async with self.twilio.stream(answer, playout_speed=16.0) as phone:
            await until(lambda: len(factory.sessions) > sessions, timeout=10)
            session = factory.sessions[sessions]
            if session.greeting or self.server.switchboard.hub.delivery.pending(room):
                await phone.wait_quiet(0.2)
        call = self.server.switchboard.calls.get(room)
        if call is not None:
            await asyncio.wait_for(call.finished.wait(), 10)
        return room

    async def held(self, room: str, text: str, task: str) -> str:
        return await self.server.switchboard.hub.delivery.deliver(
            room, text, metadata={"task": task}
        )

    async def sweep(self, later: float) -> None:
        """The follow-ups look at the outbox `later` seconds from now."""
        self.late += later
        self.followups.followups.wall = lambda: time.time() + self.late
        await self.followups.followups.sweep()

    async def record(self, delivery_id: str) -> DeliveryRecord:
        found = await self.server.switchboard.hub.store.get_delivery(delivery_id)
        assert found is not None
        return found


@pytest_asyncio.fixture
async def line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Line]:
    monkeypatch.setenv("VOICEHUB_WEBHOOK_SECRET", SECRET)
    twilio = FakeTwilio("http://unset", public_url=PUBLIC, auth_token=AUTH_TOKEN)
    async with WebhookReceiver(SECRET.encode()) as receiver, FakeTwilioRest(twilio) as rest:
        settings = ServerSettings(
            channels_dir=desks_folder(tmp_path, receiver.url),
            db_path=tmp_path / "voicehub.db",
            public_url=PUBLIC,
            twilio_auth_token=AUTH_TOKEN,
            number_key=NUMBER_KEY,
            twilio_account_sid=ACCOUNT,
            twilio_api_url=rest.url,
        )
        async with running_server(
            settings, voice=ScriptedStack(), phone_clock=VirtualClock()
        ) as server:
            twilio.local_url = server.url
            sender = server.app.state.parts.telephony.followups.webhook_sender
            sender.client = httpx.AsyncClient(verify=receiver.ssl_context())
            yield Line(server, rest, receiver)


async def test_an_uncollected_result_goes_by_sms_once(
    line: Line, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="voicehub")
    await line.call_and_hang_up()
    delivery_id = await line.held(ROOM, "Heat pumps move heat from outside. " * 20, "heat pumps")
    record = await line.record(delivery_id)
    assert record.status == "held" and REACH_KEY in record.metadata  # the number, sealed

    await line.sweep(HOUR - 60)  # not yet
    assert line.rest.messages == []
    await line.sweep(120)
    await line.sweep(HOUR)  # again later: nothing more
    [sms] = line.rest.messages
    assert (sms["to"], sms["from"]) == (CALLER, "+15550009999")  # from the number called
    body = sms["body"]
    assert body.startswith("Research desk: your results on heat pumps are ready. Heat pumps")
    assert body.endswith(f"Call +15550009999 to hear them in full. {sms_reference(record)}")
    assert len(body) < 480  # a summary, not the whole result
    done = await line.record(delivery_id)
    state = followup_state(done)
    assert done.status == "delivered"
    assert (state["state"], state["channel"], state["reference"]) == ("sent", "sms", sms["sid"])

    # The number is at rest only sealed: not in the database file, nor in any log line.
    files = await asyncio.to_thread(lambda: [p.read_bytes() for p in tmp_path.glob("voicehub.db*")])
    stored = b"".join(files)
    assert CALLER.encode() not in stored and CALLER[1:].encode() not in stored
    assert all(CALLER[2:] not in r.getMessage() for r in caplog.records)

    # Calling in afterwards: it went by SMS, so it is not spoken again.
    await line.call_and_hang_up()
    assert line.server.switchboard.hub.delivery.pending(ROOM) == []


@pytest.mark.slow
async def test_a_caller_who_rings_back_in_time_hears_it_and_gets_no_sms(line: Line) -> None:
    await line.call_and_hang_up()
    delivery_id = await line.held(ROOM, "Solar pays back in ten years.", "solar panels")
    await line.call_and_hang_up()  # heard on this call
    await line.sweep(2 * HOUR)
    assert (await line.record(delivery_id)).status == "delivered"
    assert line.rest.messages == [] and followup_state(await line.record(delivery_id)) == {}


async def test_a_withheld_number_is_refused_and_the_result_stays_held(line: Line) -> None:
    room = await line.call_and_hang_up("anonymous")
    delivery_id = await line.held(room, "Insulation first.", "insulation")
    await line.sweep(2 * HOUR)
    record = await line.record(delivery_id)
    state = followup_state(record)
    assert record.status == "held" and state["state"] == "refused"
    assert state["error"].startswith("the caller's number is not known (withheld")
    assert line.rest.messages == []


async def test_a_webhook_is_signed_retried_with_the_same_key_and_processed_once(
    line: Line,
) -> None:
    room = "research-hook:alice"  # a browser caller: no number needed
    delivery_id = await line.held(room, "Tidal power is predictable.", "tidal power")
    line.receiver.answers.extend([503, 200])
    await line.sweep(HOUR + 1)
    state = followup_state(await line.record(delivery_id))
    assert state["state"] == "retry" and state["error"].endswith("answered 503")
    await line.sweep(29)  # the backoff is 30 s
    assert len(line.receiver.requests) == 1
    await line.sweep(2)
    first, second = line.receiver.requests
    assert first.signed and second.signed and first.key == second.key == delivery_id
    assert first.body == second.body
    assert line.receiver.processed == {
        delivery_id: {
            "type": "voicehub.result",
            "id": delivery_id,
            "desk": "research-hook",
            "room_id": room,
            "conversation": "alice",
            "content": "Tidal power is predictable.",
            "topics": ["tidal power"],
            "created_at": first.payload["created_at"],
        }
    }
    done = await line.record(delivery_id)
    assert done.status == "delivered" and followup_state(done)["reference"] == "HTTP 200"


async def test_a_webhook_refusal_leaves_the_result_held(line: Line) -> None:
    delivery_id = await line.held("research-hook:bob", "Wind is cheap.", "wind")
    line.receiver.answers.append(410)
    await line.sweep(HOUR + 1)
    await line.sweep(HOUR)
    record = await line.record(delivery_id)
    assert record.status == "held" and followup_state(record)["state"] == "refused"
    assert len(line.receiver.requests) == 1


def test_a_webhook_without_its_secret_stops_the_server_with_the_variable_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("VOICEHUB_WEBHOOK_SECRET", raising=False)
    folder = desks_folder(tmp_path, "https://hooks.example.com/results")
    from voicehub.hub import Hub

    with pytest.raises(
        ConfigError,
        match=r"research-hook.toml: delivery.webhook: .*"
        r"\$VOICEHUB_WEBHOOK_SECRET, which is not set",
    ):
        ServerFollowUps(Hub(), load_desks(folder), number_key=b"k" * 32, rest=None, environ={})
    assert create_app  # the server composes the same at start
