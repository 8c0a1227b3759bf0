"""Riding out a passing store outage (Redis restarting, unreachable or failing over, a
SQLite file locked by another process): a write that met `StoreUnavailableError` is tried
again on the hub clock, the delay doubling from `FIRST_DELAY` up to `MAX_DELAY`, until it
lands or `limit` seconds (`STORE_OUTAGE_SECONDS` for the hub's writes) have passed; then
the last error is raised. Any other error is raised at once.

Only writes that are idempotent may be retried this way: one that landed but whose answer
was lost is sent again (`Store.append_event` is idempotent by room, seq and event id).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

from voicehub.core.clock import Clock
from voicehub.errors import StoreUnavailableError

__all__ = ["FIRST_DELAY", "MAX_DELAY", "STORE_OUTAGE_SECONDS", "retry_unavailable"]

log = logging.getLogger("voicehub.store")

T = TypeVar("T")

FIRST_DELAY = 0.05
MAX_DELAY = 1.0
STORE_OUTAGE_SECONDS = 30.0
"""How long a room's event or a task's record is retried while the store is unavailable
(as `voicehub.delivery.service.PUT_RETRY_SECONDS` for a new result)."""


async def retry_unavailable(
    clock: Clock,
    write: Callable[[], Awaitable[T]],
    first_error: StoreUnavailableError,
    *,
    what: str,
    limit: float,
) -> T:
    """Try `write` again after its first attempt raised `first_error`, as the module says.
    `what` names the write in the log."""
    delay, deadline = FIRST_DELAY, clock.now() + limit
    log.warning("%s: %s; retrying for up to %g s", what, first_error, limit)
    attempts = 1
    while True:
        if clock.now() + delay > deadline:
            log.error("%s: the store stayed unavailable for %g s: giving up", what, limit)
            raise first_error
        await clock.sleep(delay)
        delay = min(2 * delay, MAX_DELAY)
        attempts += 1
        try:
            written = await write()
        except StoreUnavailableError as exc:
            first_error = exc  # the latest word on why
            continue
        log.info("%s: stored at attempt %d, the store is back", what, attempts)
        return written
