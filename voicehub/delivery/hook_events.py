"""The events the delivery service hands to its hooks (BEFORE_DELIVER, AFTER_DELIVER)."""

from __future__ import annotations

from typing import Any

from voicehub.core.events import ChannelType, Event, EventKind
from voicehub.core.store.base import DeliveryRecord
from voicehub.delivery.policy import DeliveryStrategy, Immediate, Queued, WaitForIdle

__all__ = ["delivery_event", "strategy_name"]


def strategy_name(strategy: DeliveryStrategy) -> str:
    """The kind of a strategy: immediate, wait_for_idle or queued."""
    return _NAMES.get(type(strategy)) or str(strategy.to_json()["kind"])


_NAMES: dict[type, str] = {Immediate: "immediate", WaitForIdle: "wait_for_idle", Queued: "queued"}


def delivery_event(record: DeliveryRecord, strategy: DeliveryStrategy, **extra: Any) -> Event:
    """A delivery event for `record`'s next attempt; `extra` adds (or overrides) keys."""
    return Event(
        kind=EventKind.DELIVERY,
        text=record.content,
        source="delivery",
        role="assistant",
        source_type=ChannelType.SYSTEM,
        room_id=record.room_id,
        # The caller's metadata first: it must not mask the service's own keys.
        metadata={
            **record.metadata,
            "delivery_id": record.id,
            "strategy": strategy_name(strategy),
            "attempt": record.attempts + 1,
            **extra,
        },
    )
