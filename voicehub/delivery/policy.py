"""The delivery policy: when to speak pending results into a call. Pure and sans-I/O.

`decide(snapshot, pending, now)` looks at a room's activity snapshot, the room's pending
items and the current time, and returns one `Action`:

- `Deliver(items)`: make one injection now (a single item, or one `Queued` batch);
- `WakeAt(time)`: nothing is ready; call again at `time` or on the next change;
- `WaitForChange()`: nothing can become ready by time alone; call again on the next
  activity change or when the pending items change.

The driver (the asyncio delivery service) owns everything else. Its contract:

- Call `decide` again whenever the activity changes, an item arrives or leaves, or a
  `WakeAt` time is reached. Safety never depends on being woken: every decision is
  taken on the snapshot passed in.
- Run one injection at a time per room, and leave in-flight items out of `pending`
  (otherwise a second `Immediate` could cut the first).
- Pass times in one clock domain: `arrived_at` of items loaded after a restart must be
  restamped on the running clock (monotonic clocks restart).

Rules, for every strategy: nothing starts while the caller is speaking, and nothing starts
while no session is live (items are held). The caller's per-frame speech evidence
(`caller_voiced_at`, the latest speech-like frame, which the debounced `user_speaking` lags)
counts too: a voiced frame ends the current gap, so a `WaitForIdle` buffer is counted from
after it and no strategy starts within `VOICE_HOLD` seconds of it. Among ready items the
oldest goes first (by `arrived_at`, then `delivery_id`; a `Queued` batch counts as its first
item).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Protocol, TypeAlias

from voicehub.core.clock import WakeAt

__all__ = [
    "VOICE_HOLD",
    "Action",
    "ActivityState",
    "Deliver",
    "DeliveryStrategy",
    "Immediate",
    "PendingItem",
    "Queued",
    "StrategyJSON",
    "WaitForChange",
    "WaitForIdle",
    "WakeAt",
    "decide",
    "parse_strategy",
    "strategy_from_json",
]

StrategyJSON: TypeAlias = dict[str, str | float | None]
"""The persisted form of a strategy, e.g. `{"kind": "queued", "buffer": 2.0}`."""


def _seconds(owner: str, field: str, value: object) -> float:
    """Validate a duration field: a finite number of seconds >= 0."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{owner}.{field} must be a number of seconds, got {value!r}")
    seconds = float(value)
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"{owner}.{field} must be a finite number of seconds >= 0, got {value!r}")
    return seconds


def _optional_seconds(owner: str, field: str, value: object) -> float | None:
    return None if value is None else _seconds(owner, field, value)


@dataclass(frozen=True, slots=True)
class Immediate:
    """Speak as soon as the caller is not speaking; may cut the agent's own speech."""

    def to_json(self) -> StrategyJSON:
        """The persisted form, read back by `strategy_from_json`."""
        return {"kind": "immediate"}


@dataclass(frozen=True, slots=True)
class WaitForIdle:
    """Speak after `buffer` seconds of continuous idle; activity restarts the wait.

    Once `max_wait` seconds have passed since the item arrived, the buffer is waived and
    the item goes at the first idle instant; it still never talks over anyone. Items go
    one per injection, so the next waits a fresh buffer after that speech.
    """

    buffer: float = 1.0
    max_wait: float | None = None

    def __post_init__(self) -> None:
        # Coerce ints so equal strategies compare, hash and persist alike.
        object.__setattr__(self, "buffer", _seconds("WaitForIdle", "buffer", self.buffer))
        max_wait = _optional_seconds("WaitForIdle", "max_wait", self.max_wait)
        object.__setattr__(self, "max_wait", max_wait)

    def to_json(self) -> StrategyJSON:
        """The persisted form, read back by `strategy_from_json`."""
        return {"kind": "wait_for_idle", "buffer": self.buffer, "max_wait": self.max_wait}


@dataclass(frozen=True, slots=True)
class Queued:
    """Batch results that arrive within `buffer` seconds of each other; speak each batch
    as one injection at the first idle instant after it closes.

    A batch closes `buffer` seconds after its last arrival (with mixed buffers: when the
    latest `arrived_at + buffer` of its members passes). A steady stream of results closer
    together than `buffer` keeps one batch open.
    """

    buffer: float = 2.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "buffer", _seconds("Queued", "buffer", self.buffer))

    def to_json(self) -> StrategyJSON:
        """The persisted form, read back by `strategy_from_json`."""
        return {"kind": "queued", "buffer": self.buffer}


DeliveryStrategy: TypeAlias = Immediate | WaitForIdle | Queued
"""How a result is timed into the call."""

StrategyLike: TypeAlias = DeliveryStrategy | str
"""A strategy or its shorthand ("immediate", "wait_for_idle", "queued")."""

_SHORTHANDS: Final[dict[str, DeliveryStrategy]] = {
    "immediate": Immediate(),
    "wait_for_idle": WaitForIdle(),
    "queued": Queued(),
}
_ALLOWED: Final = ", ".join(repr(name) for name in _SHORTHANDS)


def parse_strategy(
    value: StrategyLike | None, default: DeliveryStrategy = WaitForIdle()
) -> DeliveryStrategy:
    """Turn a strategy value, a shorthand string or None (meaning `default`) into a strategy.

    Shorthands (case and surrounding spaces ignored) give the default parameters:
    "immediate", "wait_for_idle" (buffer 1 s), "queued" (buffer 2 s).

    Raises:
        ValueError: naming the bad value and the allowed ones.
    """
    if value is None:
        return default
    if isinstance(value, Immediate | WaitForIdle | Queued):
        return value
    if isinstance(value, str):
        strategy = _SHORTHANDS.get(value.strip().lower())
        if strategy is not None:
            return strategy
    raise ValueError(
        f"unknown delivery strategy {value!r}: use one of {_ALLOWED}, "
        "or an Immediate(), WaitForIdle(...) or Queued(...) value"
    )


def strategy_from_json(data: Mapping[str, object] | str) -> DeliveryStrategy:
    """Read a strategy persisted with `to_json()`, as a mapping or as JSON text.

    Missing parameters take their defaults. Raises ValueError on an unknown kind, an
    unknown field or a bad value, naming it.
    """
    if isinstance(data, str):
        try:
            loaded = json.loads(data)
        except json.JSONDecodeError as error:
            raise ValueError(f"delivery strategy is not valid JSON: {data!r} ({error})") from None
        if not isinstance(loaded, dict):
            raise ValueError(f"delivery strategy JSON must be an object, got {data!r}")
        data = loaded
    fields = dict(data)
    kind = fields.pop("kind", None)
    allowed: tuple[str, ...]
    if kind == "immediate":
        allowed = ()
    elif kind == "wait_for_idle":
        allowed = ("buffer", "max_wait")
    elif kind == "queued":
        allowed = ("buffer",)
    else:
        raise ValueError(f"unknown delivery strategy kind {kind!r}: use one of {_ALLOWED}")
    unknown = sorted(set(fields) - set(allowed))
    if unknown:
        raise ValueError(f"unknown field(s) {unknown} for delivery strategy {kind!r}")
    if kind == "immediate":
        return Immediate()
    if kind == "queued":
        return Queued(_seconds("Queued", "buffer", fields.get("buffer", 2.0)))
    return WaitForIdle(
        _seconds("WaitForIdle", "buffer", fields.get("buffer", 1.0)),
        _optional_seconds("WaitForIdle", "max_wait", fields.get("max_wait")),
    )


@dataclass(frozen=True, slots=True)
class PendingItem:
    """A result waiting to be spoken: its id, arrival time (driver's clock) and strategy."""

    delivery_id: str
    arrived_at: float
    strategy: DeliveryStrategy


@dataclass(frozen=True, slots=True)
class Deliver:
    """Make one injection now: a single item, or a `Queued` batch (in arrival order)."""

    items: tuple[PendingItem, ...]


@dataclass(frozen=True, slots=True)
class WaitForChange:
    """Nothing can become ready by time alone: call `decide` again on the next activity
    change or when the pending items change."""


Action: TypeAlias = Deliver | WakeAt | WaitForChange
"""What the driver should do next."""

_WAIT_FOR_CHANGE: Final = WaitForChange()
_NEVER: Final = math.inf

VOICE_HOLD: Final = 0.3
"""Seconds after the caller's latest speech-like frame before anything may start (about a
VAD's end-of-speech silence): a voiced frame the debounced state has not counted yet, or a
short sound that never becomes a turn, holds every item for the next gap."""


class ActivityState(Protocol):
    """The part of an activity snapshot the policy reads.

    `voicehub.voice.activity.ActivitySnapshot` satisfies it; the protocol keeps `delivery`
    free of imports from `voice` (dependencies point from voice to delivery).
    """

    @property
    def user_speaking(self) -> bool: ...

    @property
    def is_idle(self) -> bool: ...

    @property
    def idle_since(self) -> float | None: ...

    @property
    def session_live(self) -> bool: ...

    @property
    def caller_voiced_at(self) -> float | None:
        """Clock time of the caller's latest speech-like audio frame, if any."""
        ...


def _order(item: PendingItem) -> tuple[float, str]:
    return (item.arrived_at, item.delivery_id)


def decide(snapshot: ActivityState, pending: Sequence[PendingItem], now: float) -> Action:
    """Choose the next action for one room. Pure: same inputs, same answer.

    Readiness, given the room is live and the caller is not speaking (where "idle since"
    is moved to the caller's latest voiced frame when that is later, and nothing is ready
    within `VOICE_HOLD` of that frame):

    - `Immediate`: ready now, even while the agent speaks or thinks.
    - `WaitForIdle(buffer, max_wait)`: the room is idle and `idle_since + buffer <= now`,
      or the room is idle and `arrived_at + max_wait <= now` (the gap rule). It is
      computed as a ready time so that a `WakeAt` time always tests ready when reached.
    - `Queued(buffer)`: the item's batch is closed (its latest `arrived_at + buffer`
      is <= now) and the room is idle. Batches are chains over the `Queued` items only,
      sorted by arrival: an item joins the open batch if it arrived before the batch's
      close time. Items of other strategies in between do not split a batch.

    The oldest ready candidate is delivered. Otherwise the earliest future ready time is
    returned as `WakeAt` (only when the room is idle: a busy room changes before anything
    can become ready), else `WaitForChange`. Items repeating a `delivery_id` already seen
    are ignored, so one call never speaks an id twice. Order of `pending` does not matter.
    """
    if not pending or not snapshot.session_live or snapshot.user_speaking:
        return _WAIT_FOR_CHANGE
    idle_since = snapshot.idle_since if snapshot.is_idle else None
    voiced_at = snapshot.caller_voiced_at
    hold_until = -_NEVER if voiced_at is None else voiced_at + VOICE_HOLD
    if idle_since is not None and voiced_at is not None:
        idle_since = max(idle_since, voiced_at)  # a voiced frame ends the gap

    best: tuple[PendingItem, ...] | None = None
    best_key: tuple[float, str] | None = None
    wake = _NEVER
    batch: list[PendingItem] = []
    batch_closes = -_NEVER
    seen: set[str] = set()

    def consider(items: tuple[PendingItem, ...], ready_at: float) -> None:
        nonlocal best, best_key, wake
        if ready_at <= now:
            key = _order(items[0])
            if best_key is None or key < best_key:
                best, best_key = items, key
        elif ready_at < wake:
            wake = ready_at

    def close_batch() -> None:
        if batch:
            ready_at = max(batch_closes, hold_until) if idle_since is not None else _NEVER
            consider(tuple(batch), ready_at)
            batch.clear()

    for item in sorted(pending, key=_order) if len(pending) > 1 else pending:
        if item.delivery_id in seen:
            continue
        seen.add(item.delivery_id)
        strategy = item.strategy
        if isinstance(strategy, Queued):
            if batch and item.arrived_at >= batch_closes:
                close_batch()
            if not batch:
                batch_closes = -_NEVER
            batch.append(item)
            batch_closes = max(batch_closes, item.arrived_at + strategy.buffer)
        elif isinstance(strategy, Immediate):
            consider((item,), hold_until)
        elif idle_since is None:
            pass  # WaitForIdle needs idle; only an activity change can bring it
        else:
            ready_at = idle_since + strategy.buffer
            if strategy.max_wait is not None:
                ready_at = min(ready_at, item.arrived_at + strategy.max_wait)
            consider((item,), max(ready_at, hold_until))
    close_batch()

    if best is not None:
        return Deliver(best)
    if wake < _NEVER:
        return WakeAt(wake)
    return _WAIT_FOR_CHANGE
