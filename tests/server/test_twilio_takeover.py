"""Phone calls nobody carries are redirected through Twilio's REST API (the call update):
after a stream ended and no new stream took the call within the grace, and for the Twilio
calls of a lost instance. One instance acts (it claims the call record first); a call Twilio
says is over is recorded ended. The real `twilio` client talks to a local stand-in of the
API's call update."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from urllib.parse import parse_qsl

import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from tests.e2e_helpers import _Server
from voicehub.core.clock import VirtualClock
from voicehub.core.store.base import CallRecord, CallState
from voicehub.core.store.memory import MemoryStore
from voicehub.telephony.twilio.rest import TwilioRest
from voicehub.telephony.twilio.takeover import PhoneTakeover

ACCOUNT, TOKEN = "AC" + "1" * 32, "t" * 32
ROOM = "research:tel-1"
VOICE = "https://voicehub.test/twilio/research/voice?resume=1"


class CallUpdates:
    """Twilio's `POST /2010-04-01/Accounts/{sid}/Calls/{call}.json`, recording each update;
    a call in `over` answers 404 as Twilio does for a completed call."""

    def __init__(self) -> None:
        self.updates: list[tuple[str, dict[str, str]]] = []
        self.over: set[str] = set()
        self.url = ""

    async def update(self, request: Request) -> JSONResponse:
        call = request.path_params["call"]
        form = dict(parse_qsl((await request.body()).decode()))
        if call in self.over:
            return JSONResponse({"code": 20404, "message": "not found", "status": 404}, 404)
        self.updates.append((call, form))
        return JSONResponse(
            {"sid": call, "account_sid": ACCOUNT, "status": "in-progress", "to": "+1", "from": "+2"}
        )


@pytest.fixture
async def api() -> AsyncIterator[CallUpdates]:
    updates = CallUpdates()
    route = Route(
        "/2010-04-01/Accounts/{account}/Calls/{call}.json", updates.update, methods=["POST"]
    )
    config = uvicorn.Config(
        Starlette(routes=[route]), host="127.0.0.1", port=0, log_level="warning"
    )
    server = _Server(config)
    serving = asyncio.create_task(server.serve())
    await server.listening.wait()
    updates.url = f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}"
    yield updates
    server.should_exit = True
    await serving


def record(owner: str, stream: str, fence: int = 1) -> CallRecord:
    return CallRecord(
        room_id=ROOM,
        desk="research",
        conversation="tel-1",
        transport="twilio",
        owner=owner,
        fence=fence,
        line={"call_sid": "CA1", "stream_sid": stream},
    )


def takeover(store: MemoryStore, api: CallUpdates, clock: VirtualClock) -> PhoneTakeover:
    redirector = TwilioRest(ACCOUNT, TOKEN, api_url=api.url)
    return PhoneTakeover(
        store,
        "b",
        {"twilio": redirector},
        lambda carrier, desk: VOICE,
        clock,
        wall=clock.now,
        grace=5.0,
    )


async def test_a_stream_that_ended_with_no_new_one_is_redirected_after_the_grace(
    api: CallUpdates,
) -> None:
    clock, store = VirtualClock(), MemoryStore()
    await store.swap_call(record("a", "MZ1"), expected_fence=0)
    phone = takeover(store, api, clock)
    phone.stream_ended("research", "tel-1", "CA1", "MZ1")
    await clock.advance(4.0)
    assert api.updates == []  # Twilio's own redirect may still come
    await clock.advance(1.0)
    await phone.wait()
    assert api.updates == [("CA1", {"Url": VOICE, "Method": "POST"})]
    taken = await store.get_call(ROOM)
    assert taken is not None and (taken.owner, taken.fence) == ("b", 2)


async def test_a_stream_followed_by_a_new_one_or_a_hang_up_is_left_alone(api: CallUpdates) -> None:
    clock, store = VirtualClock(), MemoryStore()
    await store.swap_call(record("a", "MZ1"), expected_fence=0)
    phone = takeover(store, api, clock)
    phone.stream_ended("research", "tel-1", "CA1", "MZ1")
    await store.swap_call(record("c", "MZ2", fence=2), expected_fence=1)  # the redirect came
    await clock.advance(5.0)
    await phone.wait()
    ended = record("c", "MZ2", fence=3).model_copy(update={"state": CallState.ENDED})
    await store.swap_call(ended, expected_fence=2)
    phone.stream_ended("research", "tel-1", "CA1", "MZ2")  # the caller hung up
    await clock.advance(5.0)
    await phone.wait()
    assert api.updates == []


async def test_a_lost_instances_phone_calls_are_redirected_and_an_ended_one_recorded(
    api: CallUpdates,
) -> None:
    clock, store = VirtualClock(), MemoryStore()
    await store.swap_call(record("a", "MZ1"), expected_fence=0)
    other = record("a", "MZ9").model_copy(
        update={"room_id": "research:tel-2", "conversation": "tel-2", "line": {"call_sid": "CA2"}}
    )
    await store.swap_call(other, expected_fence=0)
    api.over.add("CA2")  # it ended at Twilio while nobody carried it
    phone = takeover(store, api, clock)
    await phone.instance_lost("a")
    assert api.updates == [("CA1", {"Url": VOICE, "Method": "POST"})]
    gone = await store.get_call("research:tel-2")
    assert gone is not None and gone.state is CallState.ENDED
    assert await store.list_calls(owner="a") == []
    # a second survivor sweeping the same instance finds nothing left to redirect
    assert await takeover(store, api, clock).take_up(record("a", "MZ1")) is False


class RacedStore(MemoryStore):
    """A store where another instance's write lands right after the next `get_call`
    returned: `racing` is claimed on top of the record just read."""

    def __init__(self) -> None:
        super().__init__()
        self.racing: CallRecord | None = None

    async def get_call(self, room_id: str) -> CallRecord | None:
        seen = await super().get_call(room_id)
        racing, self.racing = self.racing, None
        if racing is not None and seen is not None:
            assert await self.swap_call(racing, expected_fence=seen.fence)
        return seen


async def test_a_new_stream_claiming_the_call_after_the_follow_up_read_it_wins(
    api: CallUpdates,
) -> None:
    """Twilio's own redirect brings the call to a new stream (instance c claims it) between
    the follow-up reading the record (still the ended stream's) and claiming it: the claim's
    version check (the fence) loses, and the live stream is not redirected away."""
    clock, store = VirtualClock(), RacedStore()
    await store.swap_call(record("a", "MZ1"), expected_fence=0)
    phone = takeover(store, api, clock)
    phone.stream_ended("research", "tel-1", "CA1", "MZ1")
    store.racing = record("c", "MZ2", fence=2)
    await clock.advance(5.0)
    await phone.wait()
    assert store.racing is None  # the race happened, after the read
    assert api.updates == [] and phone.redirected == []
    live = await store.get_call(ROOM)
    assert live is not None and (live.owner, live.fence, live.line["stream_sid"]) == ("c", 2, "MZ2")


async def test_the_follow_up_claims_first_and_a_late_stream_then_sees_the_claim(
    api: CallUpdates,
) -> None:
    """The other order: the follow-up claims the record (fence 2) and redirects; a stream
    that read the record before that claim cannot write over it (its compare-and-set
    loses), so exactly one of them acts."""
    clock, store = VirtualClock(), MemoryStore()
    await store.swap_call(record("a", "MZ1"), expected_fence=0)
    phone = takeover(store, api, clock)
    phone.stream_ended("research", "tel-1", "CA1", "MZ1")
    await clock.advance(5.0)
    await phone.wait()
    assert api.updates == [("CA1", {"Url": VOICE, "Method": "POST"})]
    assert not await store.swap_call(record("c", "MZ2", fence=2), expected_fence=1)
    taken = await store.get_call(ROOM)
    assert taken is not None and (taken.owner, taken.line["redirected_by"]) == ("b", "b")
