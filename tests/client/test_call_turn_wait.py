"""`CallClient.wait_for_turn` against a server that says nothing more once its greeting is
played: the wait ends at the client's last ack, not at `turn_timeout`."""

from __future__ import annotations

import asyncio
import math
from pathlib import Path

from tests.e2e_helpers import running_server
from voicehub.client.call import CallClient, CallOptions
from voicehub.desks.desk import load_desks
from voicehub.server.settings import ServerSettings
from voicehub_dev.fakes.server_session import ScriptedStack

CHANNELS = Path(__file__).resolve().parents[2] / "channels"


async def test_the_turn_wait_ends_with_the_last_ack_when_no_message_follows(
    tmp_path: Path,
) -> None:
    # The scripted session sends its greeting's audio and mark, then nothing (no agent
    # state): only the client's own ack can end the wait. It once woke while the ack's task
    # was still counted as owed, and slept until turn_timeout.
    settings = ServerSettings(channels_dir=CHANNELS, db_path=tmp_path / "voicehub.db")
    desks = {"research": load_desks(CHANNELS)["research"]}
    async with running_server(settings, voice=ScriptedStack(), desks=desks) as server:
        options = CallOptions(
            desk="research",
            server=server.url,
            conversation="turn-wait",
            realtime=False,
            playout_speed=math.inf,
            turn_timeout=3600.0,
        )
        async with CallClient(options) as call:
            async with asyncio.timeout(30):  # turn_pause (0.8 s) after the ack, not an hour
                await call.wait_for_turn()
            [segment] = call.report.segments
            assert segment.acked_at is not None
