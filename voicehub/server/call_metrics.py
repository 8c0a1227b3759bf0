"""The server's metrics of its calls: a `CallObserver` of the call lifecycle (each call's
transport is wrapped by a `CallMeter` that sees the caller's and the agent's turns as they
go out on the wire) and the hub's task and delivery hooks, counting into `ServerMetrics`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from voicehub.core.hooks import HookContext, HookTrigger
from voicehub.server.call_meter import CallMeter, MeteredTransport

if TYPE_CHECKING:
    from voicehub.core.events import Event
    from voicehub.server.calls import LiveCall, Switchboard
    from voicehub.server.metrics import ServerMetrics
    from voicehub.voice.transport import CallTransport

__all__ = ["CallMetrics"]


class CallMetrics:
    """Counts `board`'s calls and its hub's tasks and deliveries into `metrics` (the server
    subscribes it to the calls; it adds its hooks itself)."""

    def __init__(self, metrics: ServerMetrics, board: Switchboard) -> None:
        self.metrics = metrics
        self.board = board
        self._meters: dict[int, CallMeter] = {}  # by id(LiveCall)
        self._transports: dict[int, str] = {}  # calls not yet accepted: their transport
        self._task_started: dict[str, float] = {}  # task id -> clock time of delegation
        hooks = board.hub.hooks
        hooks.add(HookTrigger.ON_TASK_DELEGATED, self._task_delegated, name="metrics")
        hooks.add(HookTrigger.ON_TASK_COMPLETED, self._task_completed, name="metrics")
        hooks.add(HookTrigger.BEFORE_DELIVER, self._delivery_attempt, name="metrics")
        hooks.add(HookTrigger.AFTER_DELIVER, self._delivery_outcome, name="metrics")

    # -- the call lifecycle (CallObserver) ---------------------------------------------------

    def call_started(self, call: LiveCall, transport: CallTransport) -> CallTransport:
        desk = call.desk.name
        self._transports[id(call)] = call.kind
        self.metrics.active_calls.inc()
        meter = self._meters[id(call)] = self.meter_for(desk)
        return MeteredTransport(transport, meter)

    def call_accepted(self, call: LiveCall) -> None:
        self.metrics.calls.labels(call.desk.name, self._transports.pop(id(call), "unknown")).inc()

    def meter_for(self, desk: str) -> CallMeter:
        """A new call's meter, counting into this desk's series."""
        return CallMeter(
            self.metrics.clock,
            turns=lambda role: self.metrics.turns.labels(desk, role),
            talk_over=lambda speech: self.metrics.talk_over.labels(desk, speech),
            barge_ins=lambda speech: self.metrics.barge_ins.labels(desk, speech),
        )

    def call_ended(self, call: LiveCall) -> None:
        if self._meters.pop(id(call), None) is not None:
            self.metrics.active_calls.dec()
        never_started = self._transports.pop(id(call), None)  # its session did not start
        if never_started is not None:
            self.metrics.calls_refused.labels(never_started, "session_failed").inc()

    def _meter_of(self, room_id: str) -> CallMeter | None:
        # Child rooms are `<parent>::task-<n>`; results are spoken into the parent's call.
        call = self.board.calls.get(room_id.split("::", 1)[0])
        return None if call is None else self._meters.get(id(call))

    # -- hub hooks ---------------------------------------------------------------------------

    async def _task_delegated(self, event: Event, context: HookContext) -> None:
        task_id = event.metadata.get("task_id")
        if isinstance(task_id, str):
            self._task_started[task_id] = self.metrics.clock.now()
            self.metrics.tasks_running.inc()

    async def _task_completed(self, event: Event, context: HookContext) -> None:
        status = str(event.metadata.get("status") or "unknown")
        self.metrics.tasks.labels(status).inc()
        started = self._task_started.pop(str(event.metadata.get("task_id")), None)
        if started is not None:  # delegated here (not on another instance)
            self.metrics.tasks_running.dec()
            self.metrics.task_duration.labels(status).observe(self.metrics.clock.now() - started)

    async def _delivery_attempt(self, event: Event, context: HookContext) -> None:
        meta = event.metadata
        meter = self._meter_of(event.room_id)
        if meter is not None:
            meter.delivering = True
        if meta.get("attempt") != 1:
            return
        delivery_id = meta.get("delivery_id")
        pending = self.board.hub.delivery.pending(event.room_id)
        record = next((r for r in pending if r.id == delivery_id), None)
        if record is None:
            return
        now = self.metrics.clock.now()
        # `arrived_at` is on this process' clock unless the item was loaded after a restart
        # (a time from another monotonic clock): then only the reconnect counts.
        arrived = record.arrived_at if record.arrived_at <= now else -1.0
        allowed_from = max(arrived, meter.started_at if meter is not None else arrived)
        buffer = record.strategy.get("buffer", 0.0)
        buffer = float(buffer) if isinstance(buffer, int | float) else 0.0
        lag = max(0.0, now - allowed_from - buffer)
        self.metrics.delivery_lag.labels(str(meta.get("strategy"))).observe(lag)

    async def _delivery_outcome(self, event: Event, context: HookContext) -> None:
        meta = event.metadata
        self.metrics.deliveries.labels(str(meta.get("strategy")), str(meta.get("outcome"))).inc()
        meter = self._meter_of(event.room_id)
        if meter is not None:
            meter.delivering = False
