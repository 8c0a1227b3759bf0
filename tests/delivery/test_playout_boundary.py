"""Exactly once at the last boundary (issue 15, item 5), on a real SQLite file.

The window: the client has confirmed the playout of a result's last audio, and the process
dies before `delivered` is written. The confirmation then existed only in the dead
process's memory, exactly as if it had died a moment before the confirmation arrived; no
order of "write" and "confirm" on the server alone avoids that (one of them comes first,
and a crash can fall between them). Closing it needs the client's help (remembering the
delivery ids it played and saying so on reconnect), which the call protocol does not have.
So the service errs on the side of never losing a result: such a result is spoken again
on the next call, with the interrupted attempt counted, and the window is kept as short as
one store write after the confirmation (`voicehub bench` measures it as
`delivery_talkover.ack_to_delivered_ms`).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from voicehub.core.clock import VirtualClock
from voicehub.core.store.base import DeliveryStatus
from voicehub.core.store.sqlite import SQLiteStore
from voicehub.delivery.injector import InjectOutcome
from voicehub.delivery.policy import WaitForIdle
from voicehub.delivery.service import DeliveryService
from voicehub.hub import Hub
from voicehub_dev.fakes.scripted_session import FakeSession


class ConfirmedThenCrashed(FakeSession):
    """Speaks, gets the client's playout confirmation, and the process dies right there:
    the injection never returns to the service."""

    def __init__(self, clock: VirtualClock) -> None:
        super().__init__(clock, speech_seconds=1.0)
        self.confirmed = asyncio.Event()
        self.driver: asyncio.Task[Any] | None = None

    async def inject(
        self, text: str, *, allow_interrupt: bool, metadata: dict[str, Any]
    ) -> InjectOutcome:
        self.driver = asyncio.current_task()
        outcome = await super().inject(text, allow_interrupt=allow_interrupt, metadata=metadata)
        assert outcome is InjectOutcome.FINISHED  # the client confirmed the whole result
        self.confirmed.set()
        await asyncio.Event().wait()  # the crash: nothing after this point runs
        return outcome


async def _hub(clock: VirtualClock, path: Path) -> Hub:
    hub = Hub(clock=clock, store=SQLiteStore(path))
    hub.delivery = DeliveryService(hub, default_strategy=WaitForIdle(1.0), wall=clock.now)
    await hub.start()
    return hub


async def test_a_crash_between_the_confirmation_and_the_write_speaks_it_again(
    tmp_path: Path,
) -> None:
    clock = VirtualClock()
    path = tmp_path / "voicehub.db"
    crashed = await _hub(clock, path)
    session = ConfirmedThenCrashed(clock)
    await crashed.delivery.attach("r", session, session.activity)
    result = await crashed.deliver("r", "the heat pump report", delivery_id="r-1")
    await clock.advance(3.0)  # 1 s buffer, 1 s of speech, playout confirmed
    assert session.confirmed.is_set()
    assert session.driver is not None
    session.driver.cancel()  # the process dies: no settle, no hook, no close
    await clock.advance(0)
    record = await crashed.store.get_delivery(result)
    assert record is not None and record.status is DeliveryStatus.DELIVERING

    # The restart on the same file: the result is not lost, and (the window) heard again.
    restarted = await _hub(clock, path)
    again = FakeSession(clock)
    await restarted.delivery.attach("r", again, again.activity)
    await clock.advance(60.0)  # the dead instance's lease runs out, then a gap
    assert again.injections_per_id() == {result: 1}
    record = await restarted.store.get_delivery(result)
    assert record is not None and record.status is DeliveryStatus.DELIVERED
    assert record.attempts == 2  # the crashed attempt counts

    # Once written, never again: a third instance speaks nothing.
    await restarted.aclose()
    third_hub = await _hub(clock, path)
    third = FakeSession(clock)
    await third_hub.delivery.attach("r", third, third.activity)
    await clock.advance(60.0)
    assert third.injections == []
    await third_hub.aclose()
    await crashed.aclose()
