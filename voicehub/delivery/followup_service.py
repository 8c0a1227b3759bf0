"""The follow-up driver: sweeps the outbox for results nobody collected and sends each by its
desk's fallback channel, exactly once across instances and restarts
(`voicehub.delivery.followup` has the decision and the states).

    followups = FollowUps(store, plans={"research": FollowUpPlan(86_400, "sms")},
                          senders={"sms": sms}, clock=hub.clock, wall=hub.wall,
                          owner=hub.instance_id)
    followups.start()          # sweeps until aclose(); `sweep()` runs one pass

A claim is a compare-and-set on the delivery record: its follow-up state becomes "sending"
with this instance as owner for `lease` seconds, and a held record becomes `delivering`
under the same lease, so the delivery service leaves it alone meanwhile (a caller who
rings back then hears it once it is settled, or not at all if it went out). Sent: the
record is `delivered`, marked with the channel and its reference. A passing failure puts
it back (held, "retry" after a doubling backoff); a refusal that will not change (a
withheld number, a 4xx) or `max_attempts` failures leave it held for the caller's next
call ("refused" / "gave_up"). Channel "none" lets it expire.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from voicehub.core.clock import Clock
from voicehub.core.jobs import cancel_and_wait
from voicehub.core.store.base import DeliveryRecord, DeliveryStatus, Store
from voicehub.core.trusted import replace
from voicehub.delivery.followup import (
    FINAL_STATES,
    FOLLOWUP_KEY,
    Claim,
    FollowUpChannel,
    FollowUpPlan,
    WakeAt,
    decide,
    followup_state,
)
from voicehub.errors import StoreError, VoicehubError

__all__ = ["FollowUpError", "FollowUpSender", "FollowUps"]

log = logging.getLogger("voicehub.delivery")
_SWEPT = (DeliveryStatus.HELD, DeliveryStatus.EXPIRED, DeliveryStatus.DELIVERING)


class FollowUpError(VoicehubError):
    """A channel could not send; `permanent` when trying again will not help."""

    def __init__(self, message: str, *, permanent: bool = False) -> None:
        super().__init__(message)
        self.permanent = permanent


class FollowUpSender(Protocol):
    """One channel ("sms", "webhook"): sends a result, returns its reference there."""

    async def send(self, record: DeliveryRecord, *, recover: bool) -> str:
        """Send `record` (with `recover`, first look whether an earlier attempt already did,
        and return that one's reference). Raises FollowUpError."""
        ...


class FollowUps:
    """Sends held results past their desk's `hold_for` (see the module)."""

    def __init__(
        self,
        store: Store,
        *,
        plans: Mapping[str, FollowUpPlan],
        senders: Mapping[FollowUpChannel, FollowUpSender],
        clock: Clock,
        wall: Callable[[], float],
        owner: str,
        lease: float = 60.0,
        interval: float = 60.0,
        max_attempts: int = 5,
        backoff: float = 30.0,
    ) -> None:
        self.store, self.plans, self.senders = store, dict(plans), dict(senders)
        self.clock, self.wall, self.owner = clock, wall, owner
        self.lease, self.interval = lease, interval
        self.max_attempts, self.backoff = max_attempts, backoff
        self.sent: list[tuple[str, str]] = []  # (delivery id, outcome) settled here
        self._task: asyncio.Task[None] | None = None
        self._kick = asyncio.Event()

    def start(self) -> None:
        """Sweep in the background until `aclose` (nothing to do without plans)."""
        if self._task is None and self.plans:
            self._task = asyncio.create_task(self._run())

    def kick(self) -> None:
        """Sweep again now (a result was just held)."""
        self._kick.set()

    async def aclose(self) -> None:
        if self._task is not None:
            await cancel_and_wait(self._task)
            self._task = None

    async def _run(self) -> None:
        while True:
            wake = math.inf
            try:
                wake = await self.sweep()
            except Exception:  # a store outage: try again next round
                log.exception("follow-up sweep failed")
            self._kick.clear()
            wait = min(self.interval, max(0.0, wake - self.wall()))
            sleeper = asyncio.ensure_future(self.clock.sleep(wait))
            kicked = asyncio.ensure_future(self._kick.wait())
            try:
                await asyncio.wait({sleeper, kicked}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                sleeper.cancel()
                kicked.cancel()

    async def sweep(self) -> float:
        """One pass: follow up every record that is due. Returns the wall time of the next
        record due (inf when none waits)."""
        wake = math.inf
        for record in await self.store.list_deliveries(statuses=_SWEPT):
            plan = self.plans.get(record.room_id.split(":", 1)[0])
            if plan is None:
                continue
            decision = decide(record, plan, self.wall())
            if isinstance(decision, WakeAt):
                wake = min(wake, decision.time)
            elif isinstance(decision, Claim):
                await self._follow_up(record, plan, decision.recover)
        return wake

    async def _follow_up(self, record: DeliveryRecord, plan: FollowUpPlan, recover: bool) -> None:
        claimed = await self._claim(record, plan)
        if claimed is None:
            return  # another instance has it
        if plan.channel == "none":
            await self._finish(claimed, "none", status=DeliveryStatus.EXPIRED, error=_held(plan))
            return
        sender = self.senders.get(plan.channel)
        try:
            if sender is None:
                raise FollowUpError(f"no {plan.channel} sender on this server", permanent=True)
            reference = await sender.send(claimed, recover=recover)
        except FollowUpError as exc:
            await self._failed(claimed, exc)
        except Exception as exc:  # a channel's bug: retried like an outage, and logged
            log.exception("follow-up of delivery %s failed", record.id)
            await self._failed(claimed, FollowUpError(f"{type(exc).__name__}: {exc}"))
        else:
            await self._finish(
                claimed, "sent", status=DeliveryStatus.DELIVERED, reference=reference
            )

    async def _claim(self, record: DeliveryRecord, plan: FollowUpPlan) -> DeliveryRecord | None:
        now, state = self.wall(), followup_state(record)
        attempts = int(state.get("attempts", 0)) + 1
        fields: dict[str, Any] = {}
        if record.status in (DeliveryStatus.HELD, DeliveryStatus.DELIVERING):
            # Leased like a delivery in progress: the delivery service keeps off.
            fields = {
                "status": DeliveryStatus.DELIVERING,
                "lease_owner": self.owner,
                "lease_until": now + self.lease,
            }
        claim = {
            **state,
            "state": "sending",
            "channel": plan.channel,
            "owner": self.owner,
            "until": now + self.lease,
            "attempts": attempts,
            "since": state.get("since", now),  # the first attempt: where recovery looks from
            "held_status": state.get("held_status", str(record.status)),
        }
        return await self._swap(record, claim, now, **fields)

    async def _failed(self, record: DeliveryRecord, exc: FollowUpError) -> None:
        state = followup_state(record)
        attempts = int(state.get("attempts", 1))
        if exc.permanent or attempts >= self.max_attempts:
            outcome = "refused" if exc.permanent else "gave_up"
            log.warning("follow-up of delivery %s: %s (%s)", record.id, outcome, exc)
            await self._finish(record, outcome, status=_held_status(state), error=str(exc))
            return
        delay = self.backoff * 2 ** (attempts - 1)
        log.info("follow-up of delivery %s failed (%s); again in %.0f s", record.id, exc, delay)
        retry = {**state, "state": "retry", "next_at": self.wall() + delay, "error": str(exc)}
        await self._swap(record, retry, self.wall(), **_unleased(_held_status(state)))

    async def _finish(
        self,
        record: DeliveryRecord,
        outcome: str,
        *,
        status: DeliveryStatus,
        error: str = "",
        reference: str = "",
    ) -> None:
        now = self.wall()
        state = {**followup_state(record), "state": outcome, "settled_at": now}
        state.pop("until", None)
        if reference:
            state["reference"] = reference
        if error:
            state["error"] = error
        extra: dict[str, Any] = {"error": error} if status is DeliveryStatus.EXPIRED else {}
        current: DeliveryRecord | None = record
        for _ in range(5):  # a store hiccup, or a write racing ours: a sent result stays sent
            with contextlib.suppress(StoreError):
                if current is not None and followup_state(current).get("state") in FINAL_STATES:
                    return  # settled elsewhere (a recovering instance found our message)
                if current is not None and await self._swap(
                    current, {**followup_state(current), **state}, now, **_unleased(status), **extra
                ):
                    self.sent.append((record.id, outcome))
                    log.info("follow-up of delivery %s: %s", record.id, outcome)
                    return
                current = await self.store.get_delivery(record.id)
        log.error("follow-up of delivery %s: %s, but it could not be recorded", record.id, outcome)

    async def _swap(
        self, record: DeliveryRecord, state: dict[str, Any], now: float, **fields: Any
    ) -> DeliveryRecord | None:
        updated = replace(
            record,
            metadata={**record.metadata, FOLLOWUP_KEY: state},
            fence=record.fence + 1,
            updated_at=now,
            **fields,
        )
        if await self.store.swap_delivery(updated, expected_fence=record.fence):
            return updated
        return None


def _held_status(state: dict[str, Any]) -> DeliveryStatus:
    """The status the record had before its claim: it goes back to it when not sent."""
    try:
        return DeliveryStatus(state.get("held_status", DeliveryStatus.HELD))
    except ValueError:
        return DeliveryStatus.HELD


def _unleased(status: DeliveryStatus) -> dict[str, Any]:
    return {"status": status, "lease_owner": "", "lease_until": None}


def _held(plan: FollowUpPlan) -> str:
    hours = plan.hold_for / 3600
    return f"held {hours:g} h with nobody to collect it; the desk's fallback is none"
