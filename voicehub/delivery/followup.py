"""Follow-ups: what becomes of a result nobody collects (the pure decision).

A desk with `[delivery] hold_for` gives each of its results that long after it arrived to
be heard; a result still held then (the caller gone and not back) goes out by the desk's
`fallback` channel: "sms" (a summary to the caller's number), "webhook" (a signed POST) or
"none" (it expires). The state of a result's follow-up lives in its delivery record's
metadata (`followup`), written with compare-and-set on the record's fence, so that of
every instance sharing the store exactly one sends it, and a restarted or surviving one
knows where a killed one stopped:

    {"state": "sending", "channel": "sms", "owner": "inst-a", "until": t, "attempts": 1,
     "since": t0}
    {"state": "retry", "next_at": t, ...}          # a passing failure: again after a backoff
    {"state": "sent", "reference": "SM...", ...}   # final: the record is delivered
    {"state": "none" | "gave_up" | "refused", "error": "...", ...}   # final for follow-ups

A "sending" state whose owner's lease (`until`) ran out means the sender may have stopped
after sending but before writing "sent": the next claim is a recovery, and the channel
checks first (an SMS already in the account's log is not sent again; a webhook is sent
again with the same idempotency key, which the receiver deduplicates).

`decide` is a pure function of (record, plan, now).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from voicehub.core.clock import WakeAt
from voicehub.core.store.base import DeliveryRecord, DeliveryStatus

__all__ = [
    "FINAL_STATES",
    "FOLLOWUP_KEY",
    "NOTICE_KIND",
    "TTL_ERROR",
    "Claim",
    "FollowUpChannel",
    "FollowUpPlan",
    "Skip",
    "WakeAt",
    "decide",
    "followup_state",
]

FOLLOWUP_KEY = "followup"
NOTICE_KIND = "call_notice"  # a notice about the call itself: never followed up
TTL_ERROR = "time to live passed"  # the outbox's own expiry (as `DeliveryService` writes it)
FINAL_STATES = frozenset({"sent", "none", "gave_up", "refused"})

FollowUpChannel = Literal["sms", "webhook", "none"]


@dataclass(frozen=True)
class FollowUpPlan:
    """A desk's follow-up: after `hold_for` seconds held, send by `channel`."""

    hold_for: float
    channel: FollowUpChannel


@dataclass(frozen=True)
class Skip:
    """Nothing to do for this record, now or later."""


@dataclass(frozen=True)
class Claim:
    """Claim the record and send it; `recover`: an earlier sender may have sent it."""

    recover: bool = False


Decision = Skip | WakeAt | Claim


def followup_state(record: DeliveryRecord) -> dict[str, Any]:
    """The record's follow-up state (empty before any)."""
    state = record.metadata.get(FOLLOWUP_KEY)
    return dict(state) if isinstance(state, dict) else {}


def decide(record: DeliveryRecord, plan: FollowUpPlan, now: float) -> Decision:
    """What the follow-up of `record` needs at wall time `now`."""
    if record.metadata.get("kind") == NOTICE_KIND or "::" in record.room_id:
        return Skip()
    state = followup_state(record)
    step = state.get("state")
    if step in FINAL_STATES:
        return Skip()
    if step == "sending":
        until = float(state.get("until", 0.0))
        return Claim(recover=True) if until <= now else WakeAt(until)
    if not _waiting(record):
        return Skip()
    due = record.created_at + plan.hold_for
    if step == "retry":
        due = max(due, float(state.get("next_at", 0.0)))
    return Claim() if due <= now else WakeAt(due)


def _waiting(record: DeliveryRecord) -> bool:
    """Held for a caller who is gone, or expired by the outbox's time to live before its
    follow-up ran (a server down at the time): still due its fallback."""
    if record.status is DeliveryStatus.HELD:
        return True
    return record.status is DeliveryStatus.EXPIRED and record.error == TTL_ERROR
