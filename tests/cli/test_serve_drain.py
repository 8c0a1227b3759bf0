"""SIGTERM drains a real `voicehub serve` process: it stops taking calls at once, lets the
live call finish (a research result spoken to a caller speaking synthesized speech), then
exits 0; a call still live when the drain time is up is ended and the process exits."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.speech import spoken
from voicehub.client.call import CallClient, CallOptions
from voicehub.core.store.base import DeliveryStatus
from voicehub.core.store.sqlite import SQLiteStore
from voicehub.desks.call_lifecycle import HANDOVER_REASON
from voicehub.errors import VoicehubError
from voicehub.voice.events import CallError, DeliveryOutcome, TaskStarted

# real-time end to end: `make test` runs it, `make check` does not
pytestmark = pytest.mark.realtime

REPO = Path(__file__).resolve().parents[2]
RESEARCH = "could you research heat pumps for me please"


class Served:
    """A `voicehub serve` subprocess on a free port, stopped by its PID at the end."""

    def __init__(self, tmp_path: Path, *flags: str) -> None:
        self.db = tmp_path / "v.db"
        self.log = (tmp_path / "serve.log").open("w+")
        command = [sys.executable, "-m", "voicehub.cli", "serve", "--port", "0"]
        command += ["--db", str(self.db), "--log-level", "warning", *flags]
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "VOICEHUB_TOKEN": ""}
        self.process = subprocess.Popen(
            command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=self.log, text=True
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()  # blocks until the server listens
        found = re.match(r"voicehub: serving at (http://127\.0\.0\.1:\d+)/", line)
        assert found, line + self.logged()
        self.url = found.group(1)

    def logged(self) -> str:
        self.log.seek(0)
        return self.log.read()

    def call(self, conversation: str) -> CallClient:
        options = CallOptions(
            desk="research", server=self.url, conversation=conversation, playout_speed=16.0
        )
        return CallClient(options)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self.log.close()


@pytest.fixture
def served(tmp_path: Path) -> Iterator[list[Served]]:
    started: list[Served] = []
    yield started
    for server in started:
        server.stop()


async def ready_status(server: Served, want: int, within: float = 10.0) -> dict[str, object]:
    """Poll /ready until it answers `want` (the signal reaches the child asynchronously)."""
    deadline = time.monotonic() + within
    async with httpx.AsyncClient(base_url=server.url, timeout=5) as client:
        while True:
            response = await client.get("/ready")
            if response.status_code == want or time.monotonic() > deadline:
                assert response.status_code == want, response.text
                return dict(response.json())
            await asyncio.sleep(0.05)


async def exit_code(server: Served, within: float) -> int:
    return await asyncio.to_thread(server.process.wait, within)


async def test_sigterm_refuses_new_calls_lets_the_live_call_finish_then_exits_0(
    tmp_path: Path, served: list[Served]
) -> None:
    server = await asyncio.to_thread(Served, tmp_path, "--drain-seconds", "120")
    served.append(server)
    assert (await ready_status(server, 200))["status"] == "ready"
    async with server.call("drain-e2e") as call:
        await call.wait_for_turn()
        await call.say(spoken(RESEARCH), RESEARCH)
        await call.wait_for_event(TaskStarted, timeout=60)

        server.process.send_signal(signal.SIGTERM)
        signalled = time.monotonic()
        draining = await ready_status(server, 503)
        assert draining["reason"] == "draining"
        draining["checks"].pop("load")  # the process's load (`voicehub.desks.call_admission`)
        assert draining["checks"].pop("desks")["broken"] == {}
        assert draining["checks"] == {"models": "loaded", "draining": True, "store": "ok"}
        refused = server.call("drain-e2e-late")
        with pytest.raises(VoicehubError, match=r"refused \(1013\)"):
            await refused.connect()
        await refused.close()
        assert [e.code for e in refused.report.events_of(CallError)] == ["draining"]

        outcome = await call.wait_for_event(DeliveryOutcome, timeout=90)
        assert outcome.outcome == "delivered"
        await call.hangup()
    assert await exit_code(server, 60) == 0
    assert time.monotonic() - signalled < 120  # it left when the call was over, not at the end
    assert server.process.stdout is not None
    assert "drained and stopped" in server.process.stdout.read()
    store = SQLiteStore(server.db)
    [kept] = await store.list_deliveries(room_id="research:drain-e2e")
    await store.close()
    assert kept.status is DeliveryStatus.DELIVERED and kept.id == outcome.delivery_id


async def test_a_call_still_live_when_the_drain_time_is_up_is_ended_and_the_process_exits(
    tmp_path: Path, served: list[Served]
) -> None:
    server = await asyncio.to_thread(Served, tmp_path, "--drain-seconds", "1", "--no-prewarm")
    served.append(server)
    ready = await ready_status(server, 200)
    ready["checks"].pop("load")
    assert ready["checks"].pop("desks")["broken"] == {}
    assert ready["checks"] == {"models": "loaded on first call", "draining": False, "store": "ok"}
    async with server.call("drain-deadline") as call:
        await call.wait_for_turn()
        server.process.send_signal(signal.SIGTERM)
        signalled = time.monotonic()
        await call.wait_for(lambda: call.closed, 30)
    # the drain hands the call over at its end (no other instance took it before): a client
    # comes back to the conversation (uvicorn's own shutdown would give another reason)
    assert call.report.close_code == 1012
    assert call.report.close_reason == HANDOVER_REASON
    assert await exit_code(server, 30) == 0
    assert time.monotonic() - signalled >= 1.0
