"""What the results held for a caller are about, in words: for a transfer's briefing, a
voicemail and an SMS ("your results on heat pumps and solar panels are ready")."""

from __future__ import annotations

from collections.abc import Iterable

from voicehub.core.store.base import DeliveryRecord, DeliveryStatus
from voicehub.delivery.followup import NOTICE_KIND

__all__ = ["NOTICE_KIND", "held_for_caller", "topics_of", "topics_phrase"]

# NOTICE_KIND marks deliveries that tell the caller about the call itself (a transfer nobody
# answered): never results, so never briefed, left on voicemail, texted or called back for.
_WAITING = (DeliveryStatus.HELD, DeliveryStatus.PENDING, DeliveryStatus.INTERRUPTED)


def held_for_caller(records: Iterable[DeliveryRecord]) -> list[DeliveryRecord]:
    """The results among `records` still waiting for the caller (not notices)."""
    return [r for r in records if r.status in _WAITING and r.metadata.get("kind") != NOTICE_KIND]


def topics_of(records: Iterable[DeliveryRecord]) -> list[str]:
    """What each result is about (the task it answers), each once, in order."""
    topics: list[str] = []
    for record in records:
        task = record.metadata.get("task")
        topic = task.strip() if isinstance(task, str) and task.strip() else "your request"
        if topic not in topics:
            topics.append(topic)
    return topics


def topics_phrase(topics: list[str]) -> str:
    """ "a", "a and b", "a, b and c"."""
    if len(topics) <= 1:
        return "".join(topics) or "your request"
    return ", ".join(topics[:-1]) + " and " + topics[-1]
