"""One follow-up instance in a process of its own, for the kill -9 test: it sweeps a Redis
store once with the real channels, printing "sweeping" first (the test kills it mid-send).

    python -m tests.server.followup_process '<json settings>'
"""

from __future__ import annotations

import asyncio
import json
import ssl
import sys
import time
from typing import Any

import httpx

from voicehub.core.clock import SystemClock
from voicehub.core.store.redis import RedisStore
from voicehub.delivery.followup import FollowUpPlan
from voicehub.delivery.followup_service import FollowUps, FollowUpSender
from voicehub.desks.number_vault import NumberVault
from voicehub.server.followups import SmsSender, WebhookSender
from voicehub.telephony.twilio.rest import TwilioRest


async def main(settings: dict[str, Any]) -> None:
    store = RedisStore(settings["redis"], prefix=settings["prefix"])
    desk, channel = settings["desk"], settings["channel"]
    sender: FollowUpSender
    if channel == "sms":
        rest = TwilioRest(settings["account"], settings["token"], api_url=settings["twilio_api"])
        sender = SmsSender(rest, NumberVault(settings["number_key"].encode()), {})
    else:
        trusted = ssl.create_default_context(cafile=settings["cafile"])
        client = httpx.AsyncClient(verify=trusted, timeout=60.0)
        sender = WebhookSender(
            {desk: (settings["url"], settings["secret"].encode())}, client=client
        )
    followups = FollowUps(
        store,
        plans={desk: FollowUpPlan(settings["hold_for"], channel)},
        senders={channel: sender},
        clock=SystemClock(),
        wall=time.time,
        owner="doomed",
        lease=settings["lease"],
    )
    print("sweeping", flush=True)
    await followups.sweep()
    print("swept", flush=True)


if __name__ == "__main__":
    asyncio.run(main(json.loads(sys.argv[1])))
