"""Coming back to the same conversation when a call's line drops: `voicehub call` does what
the console page does (`server/web/app.js`).

The line may drop because the instance serving the call died, was drained (it hands the
call over: close 1012, reconnect now), is busy or draining (1013, try again later), or the
network broke (no close frame: 1006). The client reconnects to the address it called (a load
balancer in production, which sends it to a live instance) with the same conversation id,
at once (`Reconnector`), then after a backoff (`Backoff`: 0.1 s doubling to 2 s, with
jitter; busy or draining, the first attempt waits too), for up to `give_up_after` seconds.
The instance it reaches takes the call up (`CallSession.continued` says how) and the
conversation goes on. It does not reconnect after its own hang-up, nor
when the server ended the call or refused it for good (it went away: 1001; bad token,
unknown desk, replaced by a newer connection, a session that could not start).
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field

__all__ = ["RECONNECT_CODES", "Backoff", "Reconnection", "Reconnector"]

log = logging.getLogger("voicehub.client")

RECONNECT_CODES = frozenset({1006, 1012, 1013})
"""Close codes after which the call goes on: abnormal (no close frame: the server died or
the network broke), service restart (handed over), try again later (busy or draining). A
server going away (1001) ended the call on purpose: its results are held for a call-back."""
_LATER = 1013  # busy or draining: the first attempt waits its backoff; any other at once


@dataclass(frozen=True)
class Backoff:
    """Waits between attempts: `first`, doubling up to `most`, each scaled by a random
    factor in [1 - jitter, 1] (callers of one dead instance do not come back in step)."""

    first: float = 0.1
    most: float = 2.0
    jitter: float = 0.3
    give_up_after: float = 30.0

    def delays(self) -> Iterator[float]:
        delay = self.first
        while True:
            yield delay * (1 - self.jitter * random.random())
            delay = min(delay * 2, self.most)


@dataclass
class Reconnection:
    """One drop of the line and the way back: when it dropped (`closed_at`, seconds on the
    call's timeline) and why (`code`, `reason`), when each attempt began (`tried_at`), when
    the last one's line opened (`opened_at`: the server accepted it), when the call was
    live again (`live_at`: the server's session event; None if it never was) and how the
    server took it up (`continued`)."""

    closed_at: float
    code: int | None
    reason: str
    attempts: int = 0
    tried_at: list[float] = field(default_factory=list)
    opened_at: float | None = None
    live_at: float | None = None
    continued: str = ""

    @property
    def gap(self) -> float | None:
        """Seconds from the drop to the call being live again."""
        return None if self.live_at is None else self.live_at - self.closed_at


@dataclass
class Reconnector:
    """Decides whether and when a dropped call reconnects; `open_line()` opens a new line
    to the same conversation (raising when it cannot) and returns once the server's
    session event arrived, with how the call continued.

    The first attempt is at once, unless the server said busy or draining (1013): after a
    hand-over (1012) another instance is ready, and after an abnormal close (1006) the
    instance most likely died, so the balancer sends the attempt to a live one (a network
    that broke fails it at once, and the backoff begins)."""

    backoff: Backoff = field(default_factory=Backoff)
    history: list[Reconnection] = field(default_factory=list)
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep  # a test's virtual clock

    @staticmethod
    def wanted(code: int | None, *, hung_up: bool) -> bool:
        """Whether a line closed with `code` should be reconnected."""
        return not hung_up and (code is None or code in RECONNECT_CODES)

    async def reconnect(
        self,
        drop: Reconnection,
        open_line: Callable[[], Awaitable[str]],
        now: Callable[[], float],
    ) -> bool:
        """Try to bring the call back until it is live or `give_up_after` passes; True if
        it is. `drop` is recorded in `history` either way."""
        self.history.append(drop)
        deadline = now() + self.backoff.give_up_after
        delays = self.backoff.delays()
        first = True
        while True:
            delay = 0.0 if first and drop.code != _LATER else next(delays)
            first = False
            if now() + delay > deadline:
                log.warning("gave up reconnecting after %d attempts", drop.attempts)
                return False
            if delay > 0:
                await self.sleep(delay)
            drop.attempts += 1
            drop.tried_at.append(now())
            try:
                drop.continued = await open_line()
            except Exception as exc:  # refused, busy, unreachable: try again
                log.info("reconnect attempt %d failed: %s", drop.attempts, exc)
                continue
            drop.live_at = now()
            log.info("reconnected after %.2f s (%s)", drop.live_at - drop.closed_at, drop.continued)
            return True
