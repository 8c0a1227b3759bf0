"""Rate limits on call starts: per access token and per client address, token buckets.

    limits = CallStartLimits(per_minute=10, burst=5, clock=clock)
    wait = limits.take(token="...", address="203.0.113.7")   # None: admitted

Each key (a token, an address) has a bucket of `burst` starts that refills at `per_minute`;
a start takes one from every bucket it is counted in, or from none when any is empty: it is
refused with the seconds until that bucket has one again. Counted in this process: with N
instances behind a balancer a client gets up to N times the rate. Calls that come back
(`?resume=1`) and phone calls (their address is the carrier's) are not counted; the
entry gate decides which are (`voicehub.server.entry_gate`). Buckets full again are
forgotten, so the table holds only the recent callers.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from voicehub.core.clock import Clock

__all__ = ["CallStartLimits"]

_PRUNE_AT = 10_000  # buckets kept before the full ones are dropped


class CallStartLimits:
    """Token buckets of call starts by token and by address (see the module)."""

    def __init__(self, *, per_minute: float, burst: int, clock: Clock) -> None:
        if per_minute <= 0 or burst < 1:
            raise ValueError(f"per_minute={per_minute}, burst={burst}: both must be positive")
        self.rate = per_minute / 60.0
        self.burst = float(burst)
        self.clock = clock
        self._buckets: dict[str, tuple[float, float]] = {}  # key -> (level, at)

    def _level(self, key: str, now: float) -> float:
        level, at = self._buckets.get(key, (self.burst, now))
        return min(self.burst, level + (now - at) * self.rate)

    def take(self, *, token: str | None, address: str | None) -> float | None:
        """Count one call start; None when admitted, else the seconds to wait."""
        now = self.clock.now()
        keys = [f"address {address}"] if address else []
        if token:  # keyed by a digest: the table holds no secret
            keys.append("token " + hashlib.sha256(token.encode()).hexdigest()[:24])
        levels = {key: self._level(key, now) for key in keys}
        short = [(1.0 - level) / self.rate for level in levels.values() if level < 1.0]
        if short:
            return max(short)
        for key, level in levels.items():
            self._buckets[key] = (level - 1.0, now)
        if len(self._buckets) > _PRUNE_AT:
            self._buckets = {
                key: (level, at)
                for key, (level, at) in self._buckets.items()
                if level + (now - at) * self.rate < self.burst
            }
        return None
