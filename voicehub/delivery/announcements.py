"""Cross-instance delivery: a result finished on one instance reaches the instance that holds
the call at once, through the store's announcements (Redis pub/sub), not on a poll."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Protocol

from voicehub.core.clock import Clock
from voicehub.delivery.service import DeliveryService

log = logging.getLogger("voicehub.delivery")

RETRY_SECONDS = 1.0
"""How long to wait before subscribing again after the store dropped the subscription."""


class Announcer(Protocol):
    """A store that announces every delivery it adds (as `RedisStore` does)."""

    def watch_deliveries(self) -> AsyncIterator[tuple[str, str]]: ...


async def follow_announcements(service: DeliveryService, store: Announcer, clock: Clock) -> None:
    """Hand each announced delivery to `service.notice` until cancelled. After an outage the
    subscription is taken again; results announced meanwhile are found when their
    conversation next attaches (`DeliveryService.attach` reloads it from the store)."""
    while True:
        try:
            async for room_id, delivery_id in store.watch_deliveries():
                try:
                    await service.notice(room_id, delivery_id)
                except Exception:  # one bad record must not stop the others
                    log.exception("could not take delivery %s of room %s", delivery_id, room_id)
        except Exception:
            log.exception("lost the delivery announcements; subscribing again")
        await clock.sleep(RETRY_SECONDS)
