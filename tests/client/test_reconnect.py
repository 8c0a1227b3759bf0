"""When a dropped call's client tries again (`Reconnector`), on a virtual clock: the first
attempt at once after a dead instance (1006) or a hand-over (1012), after the backoff when
the server was busy or draining (1013), and the backoff's waits between failed attempts."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest

from voicehub.client.reconnect import Backoff, Reconnection, Reconnector


class VirtualClock:
    def __init__(self) -> None:
        self.t = 0.0
        self.waits: list[float] = []

    def now(self) -> float:
        return self.t

    async def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)
        self.t += seconds


def opener(clock: VirtualClock, failures: int) -> tuple[list[float], Callable[[], Awaitable[str]]]:
    attempts: list[float] = []

    async def open_line() -> str:
        attempts.append(clock.now())
        if len(attempts) <= failures:
            raise ConnectionRefusedError("no instance answers")
        clock.t += 0.01  # the handshake
        return "failover"

    return attempts, open_line


@pytest.mark.parametrize("code", [1006, None, 1012])
async def test_a_dead_instance_or_a_hand_over_is_tried_again_at_once(code: int | None) -> None:
    clock = VirtualClock()
    reconnector = Reconnector(Backoff(first=0.1, jitter=0.0), sleep=clock.sleep)
    attempts, open_line = opener(clock, failures=0)
    drop = Reconnection(closed_at=0.0, code=code, reason="")
    assert await reconnector.reconnect(drop, open_line, clock.now)
    assert attempts == [0.0] and clock.waits == []
    assert drop.tried_at == [0.0] and drop.live_at == pytest.approx(0.01)
    assert drop.continued == "failover" and reconnector.history == [drop]


async def test_busy_or_draining_waits_the_backoff_first() -> None:
    clock = VirtualClock()
    reconnector = Reconnector(Backoff(first=0.1, jitter=0.0), sleep=clock.sleep)
    attempts, open_line = opener(clock, failures=0)
    drop = Reconnection(closed_at=0.0, code=1013, reason="busy")
    assert await reconnector.reconnect(drop, open_line, clock.now)
    assert clock.waits == [0.1] and attempts == [pytest.approx(0.1)]


async def test_failed_attempts_back_off_doubling_to_the_most() -> None:
    clock = VirtualClock()
    reconnector = Reconnector(Backoff(first=0.1, most=0.4, jitter=0.0), sleep=clock.sleep)
    attempts, open_line = opener(clock, failures=4)
    drop = Reconnection(closed_at=0.0, code=1006, reason="")
    assert await reconnector.reconnect(drop, open_line, clock.now)
    assert clock.waits == pytest.approx([0.1, 0.2, 0.4, 0.4])
    assert drop.attempts == 5 and drop.tried_at == attempts


async def test_it_gives_up_after_give_up_after() -> None:
    clock = VirtualClock()
    backoff = Backoff(first=0.5, most=0.5, jitter=0.0, give_up_after=1.2)
    reconnector = Reconnector(backoff, sleep=clock.sleep)
    attempts, open_line = opener(clock, failures=100)
    drop = Reconnection(closed_at=0.0, code=1006, reason="")
    assert not await reconnector.reconnect(drop, open_line, clock.now)
    assert attempts == pytest.approx([0.0, 0.5, 1.0]) and drop.live_at is None
