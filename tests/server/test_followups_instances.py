"""Follow-ups exactly once across instances and a kill -9, on a real redis-server: two
instances sweeping the same outbox at once send each result once (SMS through the real
`twilio` client against the fake account; webhooks to an HTTPS receiver); an instance
killed in the middle of sending is taken over when its lease runs out, and the survivor
does not send the SMS twice (it finds it in the account's log by its reference) and sends
the webhook again with the same idempotency key (the receiver acts on it once)."""

from __future__ import annotations

import asyncio
import json
import logging
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio

from voicehub.core.clock import SystemClock
from voicehub.core.store.base import DeliveryRecord, DeliveryStatus
from voicehub.core.store.redis import RedisStore
from voicehub.delivery.followup import FollowUpChannel, FollowUpPlan, followup_state
from voicehub.delivery.followup_service import FollowUps, FollowUpSender
from voicehub.desks.number_vault import NumberVault
from voicehub.server.followups import REACH_KEY, SmsSender, WebhookSender, sms_reference
from voicehub.telephony.twilio.rest import TwilioRest
from voicehub_dev.fakes.redis_server import RedisServer, redis_server, unique_prefix
from voicehub_dev.fakes.twilio import FakeTwilio
from voicehub_dev.fakes.twilio_rest import FakeTwilioRest
from voicehub_dev.fakes.webhook_receiver import WebhookReceiver

# real-time end to end: `make test` runs it, `make check` does not
pytestmark = pytest.mark.realtime

__all__ = ["redis_server"]

REPO = Path(__file__).resolve().parents[2]
ACCOUNT, TOKEN = "AC" + "0" * 32, "t" * 32
NUMBER_KEY = b"k" * 32
SECRET = b"w" * 32
LINE = "+15550009999"
HOUR = 3600.0
LEASE = 30.0


class Outbox:
    """One Redis outbox, the fake Twilio account and the webhook receiver."""

    def __init__(self, redis: RedisServer, account: FakeTwilioRest, receiver: WebhookReceiver):
        self.redis, self.account, self.receiver = redis, account, receiver
        self.prefix = unique_prefix()
        self.vault = NumberVault(NUMBER_KEY)
        self.stores: list[RedisStore] = []

    def store(self) -> RedisStore:
        store = RedisStore(self.redis.url, prefix=self.prefix)
        self.stores.append(store)
        return store

    async def held(self, desk: str, count: int) -> list[str]:
        """`count` results held for two hours, each for its own caller."""
        store, ids = self.store(), []
        for n in range(count):
            delivery_id = f"dlv-{desk}-{n}"
            record = DeliveryRecord(
                id=delivery_id,
                room_id=f"{desk}:tel-{n}",
                content=f"Result {n}: heat pumps move heat.",
                status=DeliveryStatus.HELD,
                created_at=time.time() - 2 * HOUR,
                metadata={
                    "task": "heat pumps",
                    REACH_KEY: self.vault.seal(delivery_id, f"+1555020{n:04d}", LINE),
                },
            )
            assert await store.put_delivery(record)
            ids.append(delivery_id)
        return ids

    def sender(self, channel: FollowUpChannel) -> FollowUpSender:
        if channel == "sms":
            rest = TwilioRest(ACCOUNT, TOKEN, api_url=self.account.url)
            return SmsSender(rest, self.vault, {})
        client = httpx.AsyncClient(verify=self.receiver.ssl_context())
        return WebhookSender({"hook": (self.receiver.url, SECRET)}, client=client)

    def instance(self, owner: str, *, late: float = 0.0) -> FollowUps:
        return FollowUps(
            self.store(),
            plans={"text": FollowUpPlan(HOUR, "sms"), "hook": FollowUpPlan(HOUR, "webhook")},
            senders={"sms": self.sender("sms"), "webhook": self.sender("webhook")},
            clock=SystemClock(),
            wall=lambda: time.time() + late,
            owner=owner,
            lease=LEASE,
        )

    async def record(self, delivery_id: str) -> DeliveryRecord:
        found = await self.stores[0].get_delivery(delivery_id)
        assert found is not None
        return found

    def settings(self, channel: str) -> dict[str, Any]:
        return {
            "redis": self.redis.url,
            "prefix": self.prefix,
            "desk": "text" if channel == "sms" else "hook",
            "channel": channel,
            "hold_for": HOUR,
            "lease": LEASE,
            "account": ACCOUNT,
            "token": TOKEN,
            "twilio_api": self.account.url,
            "number_key": NUMBER_KEY.decode(),
            "url": self.receiver.url,
            "secret": SECRET.decode(),
            "cafile": str(self.receiver.cert),
        }


@pytest_asyncio.fixture
async def outbox(redis_server: RedisServer) -> AsyncIterator[Outbox]:
    twilio = FakeTwilio("http://unused", public_url="https://voicehub.test", auth_token=TOKEN)
    twilio.account_sid = ACCOUNT
    async with WebhookReceiver(SECRET) as receiver, FakeTwilioRest(twilio) as account:
        found = Outbox(redis_server, account, receiver)
        yield found
        for store in found.stores:
            await store.close()


async def test_two_instances_sweeping_at_once_send_each_result_once(outbox: Outbox) -> None:
    texts = await outbox.held("text", 4)
    hooks = await outbox.held("hook", 4)
    a, b = outbox.instance("a"), outbox.instance("b")
    await asyncio.gather(a.sweep(), b.sweep(), a.sweep(), b.sweep())
    sent = sorted(m["body"].rsplit(" ", 2)[-1] for m in outbox.account.messages)
    records = [await outbox.record(i) for i in texts]
    expected = sorted(sms_reference(record).split()[-1] for record in records)
    assert sent == expected  # each result's SMS once
    assert sorted(r.key for r in outbox.receiver.requests) == sorted(hooks)  # each POST once
    assert sorted(outbox.receiver.processed) == sorted(hooks)
    for delivery_id in texts + hooks:
        record = await outbox.record(delivery_id)
        assert record.status is DeliveryStatus.DELIVERED
        assert followup_state(record)["state"] == "sent"
    settled = [await outbox.record(i) for i in texts + hooks]
    owners = [followup_state(record)["owner"] for record in settled]
    assert set(owners) <= {"a", "b"}
    assert len(a.sent) + len(b.sent) == 8


def spawn(settings: dict[str, Any]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.server.followup_process", json.dumps(settings)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def kill(process: subprocess.Popen[str]) -> None:
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=30)
    assert process.returncode == -signal.SIGKILL


@pytest.mark.parametrize("channel", ["sms", "webhook"])
async def test_an_instance_killed_mid_send_is_taken_over_without_a_second_send(
    outbox: Outbox, channel: str, caplog: pytest.LogCaptureFixture
) -> None:
    for logger in ("voicehub", "twilio", "httpx"):
        caplog.set_level(logging.DEBUG, logger=logger)
    desk = "text" if channel == "sms" else "hook"
    [delivery_id] = await outbox.held(desk, 1)
    gate = asyncio.Event()  # Twilio (or the receiver) takes it, and the answer never leaves
    if channel == "sms":
        outbox.account.message_gate = gate
    else:
        outbox.receiver.gate = gate
    doomed = spawn(outbox.settings(channel))
    try:
        if channel == "sms":
            await outbox.account.wait_for(lambda: outbox.account.messages, timeout=60)
        else:
            await asyncio.wait_for(outbox.receiver.arrived.wait(), 60)
    finally:
        kill(doomed)
    gate.set()
    claimed = await outbox.record(delivery_id)
    state = followup_state(claimed)
    assert (claimed.status, state["state"], state["owner"]) == ("delivering", "sending", "doomed")

    survivor = outbox.instance("survivor")
    assert await survivor.sweep() >= time.time() + LEASE - 5  # the lease still runs: it waits
    later = outbox.instance("survivor", late=LEASE + 1)
    await later.sweep()
    done = await outbox.record(delivery_id)
    state = followup_state(done)
    assert done.status is DeliveryStatus.DELIVERED and state["state"] == "sent"
    assert state["owner"] == "survivor" and state["attempts"] == 2
    if channel == "sms":
        [message] = outbox.account.messages  # found in the log, not sent again
        assert state["reference"] == message["sid"]
        assert all("5550200000" not in record.getMessage() for record in caplog.records)
    else:
        first, second = outbox.receiver.requests  # sent again, the same key and body
        assert first.key == second.key == delivery_id and first.body == second.body
        assert list(outbox.receiver.processed) == [delivery_id]  # acted on once
