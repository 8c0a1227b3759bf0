"""Call-start rate limits: the buckets on virtual time, and the real server refusing the
call beyond the burst as busy (`rate_limited`, close 1013) per address and per token."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from websockets.asyncio.client import connect

from tests.e2e_helpers import running_server
from tests.server.test_app import closed, next_event
from voicehub.core.clock import VirtualClock
from voicehub.desks.desk import load_desks
from voicehub.server.call_starts import CallStartLimits
from voicehub.server.settings import ServerSettings
from voicehub_dev.fakes.server_session import ScriptedStack

CHANNELS = Path(__file__).resolve().parents[2] / "channels"


async def test_buckets_refill_at_the_rate_and_count_token_and_address_apart() -> None:
    clock = VirtualClock()
    limits = CallStartLimits(per_minute=6, burst=2, clock=clock)  # one every 10 s
    assert limits.take(token=None, address="a") is None
    assert limits.take(token=None, address="a") is None
    assert limits.take(token=None, address="a") == pytest.approx(10.0)
    assert limits.take(token=None, address="b") is None  # another address
    await clock.advance(5)
    assert limits.take(token=None, address="a") == pytest.approx(5.0)
    await clock.advance(5)
    assert limits.take(token=None, address="a") is None
    # a token's calls count wherever they come from; a refusal takes from no bucket
    assert limits.take(token="t", address="c") is None
    assert limits.take(token="t", address="d") is None
    assert limits.take(token="t", address="e") == pytest.approx(10.0)
    assert limits.take(token=None, address="e") is None
    with pytest.raises(ValueError, match="both must be positive"):
        CallStartLimits(per_minute=0, burst=1, clock=clock)


async def test_the_server_refuses_the_call_beyond_the_burst(tmp_path: Path) -> None:
    settings = ServerSettings(
        channels_dir=CHANNELS,
        db_path=tmp_path / "voicehub.db",
        call_starts_per_minute=0.001,  # no refill within the test
        call_start_burst=2,
    )
    desks = {"research": load_desks(CHANNELS)["research"]}
    async with running_server(settings, voice=ScriptedStack(), desks=desks) as server:
        for n in (1, 2):
            url = f"{server.ws_url}/desks/research/call?conversation=rate-{n}"
            async with connect(url) as ws:
                await next_event(ws, "session")
                await ws.send(json.dumps({"type": "hangup"}))
                await closed(ws)
        async with connect(f"{server.ws_url}/desks/research/call?conversation=rate-3") as ws:
            error = await next_event(ws, "error")
            assert error["code"] == "rate_limited"
            assert "too many calls started" in error["message"]
            code, _ = await closed(ws)
            assert code == 1013
        # a call coming back is not a new start
        url = f"{server.ws_url}/desks/research/call?conversation=rate-1&resume=1"
        async with connect(url) as ws:
            await next_event(ws, "session")
        metrics = (await server.get("/metrics")).text
        assert 'reason="rate_limited"' in metrics
