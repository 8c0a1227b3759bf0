"""One research call through one fault, and what it did to the caller.

The caller asks for research (again, up to `ASKS` times, when no task started within
`ASK_AGAIN_AFTER` seconds: as a person would when not heard), the fault's `arm` runs before
the first request (a fault the request itself meets: the recognizer's) and its `inject`
once both analysts work; then the call waits until every stored result was delivered.

Reported: calls ended (the caller could not go on), results lost (a stored result not
delivered once the call settled, or none stored: the workers' results go out as one),
spoken twice (heard delivered more than once), what the caller heard (the agent's lines
from the fault on, and each result's first words), asks (how often the caller had to ask),
`recover_s`: the fault's end to the result delivered, and how each task and each stored
result ended (a task left `running` after its result was spoken would run again after a
restart).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from voicehub.client.call import CallClient, CallOptions, caller_audio
from voicehub.client.reconnect import Backoff
from voicehub.core.store.base import DeliveryStatus, Store
from voicehub.errors import VoicehubError
from voicehub.voice.events import DeliveryOutcome, TaskStarted, Transcript

__all__ = ["ASKS", "Fault", "fault_call"]

REQUEST = "could you research heat pumps for me please"
SPEED = 8.0
ASKS = 3
ASK_AGAIN_AFTER = 20.0
SETTLE_SECONDS = 90.0

Step = Callable[[], Awaitable[None]]


@dataclass(frozen=True)
class Fault:
    """One row: `arm` before the request, `during` while the caller makes it (the first
    time), `inject` once both analysts work (each returns when the fault has ended), on
    the desk `desk`."""

    name: str
    inject: Step | None = None
    arm: Step | None = None
    during: Step | None = None
    desk: str = "research-slow"


async def fault_call(url: str, store: Store, fault: Fault) -> dict[str, Any]:
    conversation = f"fault-{fault.name}-{time.monotonic_ns()}"
    room = f"{fault.desk}:{conversation}"
    options = CallOptions(
        desk=fault.desk, server=url, conversation=conversation,
        playout_speed=SPEED, quiet=0.5, reconnect=Backoff(first=0.05, give_up_after=90),
    )  # fmt: skip
    speech = caller_audio(text=REQUEST)
    async with CallClient(options) as call:
        await call.wait_for_turn()
        report = call.report
        heard_from = len(report.events)
        ended_at = time.monotonic()
        if fault.arm is not None:
            await fault.arm()
            ended_at = time.monotonic()
        asks = 0
        during = asyncio.ensure_future(fault.during()) if fault.during is not None else None
        while asks < ASKS and not call.closed:
            asks += 1
            await call.say(speech, REQUEST)
            if during is not None:
                await during
                ended_at, during = time.monotonic(), None
            with contextlib.suppress(TimeoutError):
                await call.wait_for(
                    lambda: len(report.events_of(TaskStarted)) >= 2, ASK_AGAIN_AFTER
                )
                break
        if fault.inject is not None and len(report.events_of(TaskStarted)) >= 2:
            await fault.inject()
            ended_at = time.monotonic()

        async def settled() -> bool:
            with contextlib.suppress(VoicehubError):
                stored = await store.list_deliveries(room_id=room)
                # the workers' results go out as one delivery, once all of them are done
                return bool(stored) and all(d.status is DeliveryStatus.DELIVERED for d in stored)
            return False

        recovered: float | None = None
        deadline = time.monotonic() + SETTLE_SECONDS
        while time.monotonic() < deadline and not call.closed and report.events_of(TaskStarted):
            if await settled():
                recovered = time.monotonic() - ended_at
                break
            await asyncio.sleep(0.2)
        with contextlib.suppress(Exception):
            await call.settle(20)
        ended = int(call.closed)
        await call.hangup()
    stored = await store.list_deliveries(room_id=room)
    tasks = await store.list_tasks(parent_room_id=room)
    outcomes = report.events_of(DeliveryOutcome)
    heard = [e.delivery_id for e in outcomes if e.outcome == "delivered"]
    lines = [
        " ".join(event.text.split()[:10])
        for event in (received.event for received in report.events[heard_from:])
        if isinstance(event, Transcript) and event.role == "assistant" and event.final
    ]
    return {
        "calls_ended": ended,
        # a stored result not delivered, or none stored at all
        "results_lost": sum(d.status is not DeliveryStatus.DELIVERED for d in stored)
        + (not stored),
        "spoken_twice": sum(heard.count(i) > 1 for i in set(heard)),
        "asks": asks,
        "heard": lines,
        "results": [e.text for e in outcomes if e.outcome == "delivered"],
        "recover_s": round(recovered, 2) if recovered is not None else None,
        # how each task and each stored result ended, for a row that lost one
        "tasks": [f"{t.agent_id}: {t.status.value} {t.reason}"[:80] for t in tasks],
        "stored": [f"{d.status.value} {d.error}"[:80] for d in stored],
    }
