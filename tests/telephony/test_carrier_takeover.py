"""Fail-over on Telnyx and Plivo: the calls a lost instance carried are redirected to our
voice webhook (`resume=1`) through each carrier's official SDK, against a fake of its REST
API (Telnyx's TeXML call update, Plivo's transfer of the caller's leg); a call the carrier
says is over is recorded ended; Vonage's calls, which no API can redirect, are left alone."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from tests.telephony.test_carrier_control import PUBLIC_PEM, calls_of
from voicehub.core.clock import VirtualClock
from voicehub.core.store.base import CallRecord, CallState
from voicehub.core.store.memory import MemoryStore
from voicehub.telephony.carriers import carrier_redirectors, voice_path
from voicehub.telephony.control import CarrierCalls
from voicehub.telephony.twilio.takeover import PhoneTakeover
from voicehub_dev.fakes.carrier_rest import CarrierRest


@pytest_asyncio.fixture
async def rest(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[CarrierRest]:
    async with CarrierRest(PUBLIC_PEM) as running:
        monkeypatch.setenv("SSL_CERT_FILE", str(running.cert))
        monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(running.cert))
        yield running


def record(carrier: str, call_id: str, n: int) -> CallRecord:
    return CallRecord(
        room_id=f"research:tel-{n}",
        desk="research",
        conversation=f"tel-{n}",
        transport=carrier,
        owner="a",
        fence=1,
        line={"call_sid": call_id, "stream_sid": f"S{n}"},
    )


async def test_a_lost_instances_telnyx_and_plivo_calls_are_redirected(rest: CarrierRest) -> None:
    clock, store = VirtualClock(), MemoryStore()
    calls: dict[str, CarrierCalls] = {c: calls_of(c, rest) for c in ("telnyx", "plivo", "vonage")}
    redirectors = carrier_redirectors(calls)
    assert sorted(redirectors) == ["plivo", "telnyx"]  # Vonage cannot redirect a live call
    takeover = PhoneTakeover(
        store,
        "b",
        redirectors,
        lambda carrier, desk: "https://voicehub.test" + voice_path(carrier, desk),
        clock,
        wall=clock.now,
    )
    for n, (carrier, call_id) in enumerate(
        [("telnyx", "v3:live"), ("plivo", "P-live"), ("vonage", "V-live"), ("telnyx", "v3:over")]
    ):
        await store.swap_call(record(carrier, call_id, n), expected_fence=0)
    rest.ended.add("v3:over")  # it ended at Telnyx while nobody carried it
    try:
        await takeover.instance_lost("a")
    finally:
        for each in calls.values():
            await each.aclose()
    done = [(name, action, call, body) for name, action, call, body in rest.requests]
    assert done[0] == (
        "telnyx",
        "redirect",
        "v3:live",
        {"Url": "https://voicehub.test/telnyx/research/voice?resume=1", "Method": "POST"},
    )
    assert done[1][:3] == ("plivo", "transfer", "P-live")
    assert done[1][3]["aleg_url"] == "https://voicehub.test/plivo/research/answer?resume=1"
    assert len(done) == 2
    taken = await store.get_call("research:tel-0")
    assert taken is not None and (taken.owner, taken.fence) == ("b", 2)
    over = await store.get_call("research:tel-3")
    assert over is not None and over.state is CallState.ENDED
    vonage = await store.get_call("research:tel-2")
    assert vonage is not None and (vonage.owner, vonage.state) == ("a", CallState.LIVE)
