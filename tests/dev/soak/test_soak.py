"""`voicehub soak` on the real server (uvicorn in the test's loop, the embedded stack,
the research desk): two callers for a few seconds. Its accounting must agree with the
store, and a result made to be lost or spoken twice must be reported as such.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
import pytest_asyncio

from tests.e2e_helpers import RunningServer, running_server
from tests.support.speech import spoken
from voicehub.core.store.base import DeliveryStatus
from voicehub.desks.desk import load_desks
from voicehub.server.settings import ServerSettings
from voicehub_dev.soak import SoakOptions, account, format_soak, run_soak, soak_json
from voicehub_dev.soak.accounting import SoakTally
from voicehub_dev.soak.caller import CallerLines, SoakCaller
from voicehub_dev.soak.run import SoakResult, stored_deliveries
from voicehub_dev.soak.server_process import HealthSampler

os.environ.setdefault("HF_HUB_OFFLINE", "1")
pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.realtime]

CHANNELS = Path(__file__).resolve().parents[3] / "channels"


@pytest.fixture(scope="module")
def lines() -> CallerLines:
    return CallerLines.synthesize(spoken)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def server(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[RunningServer]:
    folder = tmp_path_factory.mktemp("soak")
    settings = ServerSettings(channels_dir=CHANNELS, db_path=folder / "voicehub.db")
    desks = {"research": load_desks(CHANNELS)["research"]}
    async with running_server(settings, desks=desks) as running:
        yield running


def options(server: RunningServer, **changes: object) -> SoakOptions:
    base = {
        "calls": 2,
        "minutes": 0.05,  # each caller places one call, then the collecting one
        "seed": 11,  # the coins: caller 0 waits for its results, caller 1 hangs up early
        "url": server.url,
        "hang_up": 0.5,
        "barge_in": 0.0,
        "playout_speed": 16.0,
        "sample_every": 1.0,
        "settle_timeout": 40.0,
        "follow_ups": (1, 1),  # a caller that stays takes one more turn
    }
    base.update(changes)
    return SoakOptions(**base)  # type: ignore[arg-type]


async def test_soak_accounts_for_every_stored_result(
    server: RunningServer, lines: CallerLines
) -> None:
    result = await run_soak(options(server), lines=lines)
    tally = result.tally
    hub = server.switchboard.hub
    stored = [
        record
        for caller in range(2)
        for record in await hub.store.list_deliveries(room_id=f"research:soak-11-{caller}")
    ]
    assert stored, f"the callers asked for research: no result stored; {soak_json(result)}"
    assert tally.results == len(stored)
    assert tally.failed_calls == 0
    assert tally.calls >= 4  # each caller: at least one call and the collecting one
    assert all(record.status is DeliveryStatus.DELIVERED for record in stored)
    assert tally.results_lost == 0 and tally.results_spoken_twice == 0
    assert tally.deliveries == len(stored) - tally.results_unconfirmed
    assert result.samples and result.samples[-1].loop_lag_ms is not None
    figures = soak_json(result)
    assert figures["results_lost"] == 0 and figures["calls"] == tally.calls
    assert tally.unanswered_calls == 0  # every caller that spoke and stayed heard a reply
    assert 0 < figures["caller_talk_share"] < 1 and figures["agent_talk_share"] > 0
    assert "results spoken twice" in format_soak(result)


async def test_soak_reports_a_result_spoken_twice_a_held_one_and_a_lost_one(
    server: RunningServer, lines: CallerLines
) -> None:
    settings = options(server, seed=8, hang_up=0.0)
    first = await run_soak(settings, lines=lines)
    hub = server.switchboard.hub
    room = "research:soak-8-0"
    delivered = await hub.store.list_deliveries(room_id=room)
    assert delivered and first.tally.results_spoken_twice == 0
    # Forced double-speak: the server forgets it spoke a result, so the call-back speaks it
    # again. Forced loss: a result the caller never calls back for.
    await hub.delivery.outbox.set_status(delivered[0], DeliveryStatus.HELD)
    again = SoakCaller(0, settings, server.url, lines)
    await again.run(until=0.0)  # only the collecting call
    held_id = await hub.deliver("research:soak-8-1", "a result nobody called back for")
    lost_id = await hub.deliver("research:soak-8-1", "a result the server gave up on")
    [lost] = [
        r for r in await hub.store.list_deliveries(room_id="research:soak-8-1") if r.id == lost_id
    ]
    await hub.delivery.outbox.set_status(lost, DeliveryStatus.FAILED)

    stored = await stored_deliveries(server.url, "research", ["soak-8-0", "soak-8-1"])
    tally = account([*first.logs, *again.calls], stored)
    assert tally.twice == [delivered[0].id]
    assert tally.results_spoken_twice == 1
    assert tally.held == [held_id] and tally.results_held == 1  # waits for the next call
    assert tally.lost == [f"{lost_id} (failed)"]
    assert tally.results_lost == 1


async def test_a_call_refused_busy_is_counted_as_refused_not_failed_nor_unanswered(
    server: RunningServer, lines: CallerLines
) -> None:
    admission = server.app.state.parts.admission
    max_load = admission.max_load
    admission.max_load = -1.0  # any load is above it: every new call is refused busy
    try:
        caller = SoakCaller(0, options(server, seed=21, ramp=0.0), server.url, lines)
        await caller._call(collect=False)  # a conversing call, as the soak's loop places
        await caller.run(until=0.0)  # and the collecting one
    finally:
        admission.max_load = max_load
    assert [log.refused_busy for log in caller.calls] == [True, True]
    tally = account(caller.calls, {})
    assert (tally.calls, tally.refused_busy) == (2, 2)
    assert (tally.failed_calls, tally.unanswered_calls) == (0, 0)


async def test_soak_options_reject_bad_ranges() -> None:
    with pytest.raises(ValueError, match="turn_pause is a range"):
        SoakOptions(turn_pause=(2.0, 1.0))
    with pytest.raises(ValueError, match="follow_ups is a range"):
        SoakOptions(follow_ups=(-1, 2))
    assert SoakOptions(calls=100).ramp_seconds == 30.0
    assert SoakOptions(calls=10).ramp_seconds == pytest.approx(3.0)


async def test_health_samples_carry_the_cpu_the_server_used_between_them() -> None:
    class Server:  # stands for a `ServerProcess`: its RSS, and its CPU seconds so far
        cpu: float | None = 10.0

        def rss_mb(self) -> float:
            return 100.0

        def cpu_seconds(self) -> float | None:
            return self.cpu

    server = Server()
    health = httpx.MockTransport(lambda _: httpx.Response(200, json={"calls": 3}))
    sampler = HealthSampler("http://server", 5.0, server)  # type: ignore[arg-type]
    async with httpx.AsyncClient(base_url="http://server", transport=health) as http:
        await sampler.sample(http, 0.0)
        server.cpu = 17.5
        await sampler.sample(http, 5.0)
        server.cpu = None  # the server has exited
        await sampler.sample(http, 10.0)
    assert [s.cpu_cores for s in sampler.samples] == [None, 1.5, None]
    calls = SoakOptions(calls=1, minutes=0.05, url="http://server")
    result = SoakResult(options=calls, server="http://server", seconds=10.0, tally=SoakTally())
    result.samples = sampler.samples
    figures = soak_json(result)
    assert (figures["server"]["cpu_cores_median"], figures["server"]["cpu_cores_max"]) == (1.5, 1.5)
    assert "server CPU cores median / max      1.5 / 1.5" in format_soak(result)
