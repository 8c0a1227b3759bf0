"""Admission of calls under overload: each process knows its load and refuses new calls above
a limit, so that every call it admits is answered in time and the rest go elsewhere.

    meter = LoadMeter(calls=lambda: len(lifecycle.calls), max_calls=40)
    meter.observe_lag(0.004)          # each tick of the loop-lag probe
    admission = CallAdmission(meter, max_load=0.8)
    admission.busy()                  # None, or why a new call is refused now

The load is the worst of these shares, each 1.0 when the process is at its limit:

- event-loop lag: the worst lag of the last `window` seconds against `LAG_BUDGET` (a loop
  this late makes every call's audio late);
- CPU: the CPU time the process used over the last `window` seconds, against the CPUs it
  may run on;
- live calls against `max_calls` (when set);
- any other `parts` the process names: the server adds its offline recognizers' busy share
  (`voicehub.voice.providers.offline.recognizer_load`). Their decoders are one thread or
  process each, so they run out of time while the process's CPU share still looks low (one
  busy decoding thread of two CPUs is 0.5), and the calls admitted then go unanswered.

A call admitted counts towards the calls at once, before it has started, so a burst of
callers is not all admitted on the count of an idle moment: in the calls share, and in the
CPU share at what a live call costs now (`pending`; the server counts them in its
recognizers' share too). With only a load limit, 60 callers redialling a server at its
limit were let in by the handful whenever one reading dipped, none of them counted until
it started, and admitted calls went unanswered. A
call coming back (a reconnect, Twilio's redirect after a fail-over) is not a new call: it is
always admitted. What a refusal looks like is each transport's (see `voicehub.server.entry_gate`).
"""

from __future__ import annotations

import os
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence

__all__ = ["LAG_BUDGET", "CallAdmission", "LoadMeter"]

LAG_BUDGET = 0.2
"""Seconds of event-loop lag that count as a full load: a loop this late delays every
call's audio by as much, past what a caller tolerates."""


class LoadMeter:
    """The load of this process, from its loop lag, CPU and live calls (see the module).

    `calls()` counts the live calls; `cpu()` and `now()` are the process's CPU seconds and
    a monotonic clock (injected in tests); `cpus` how many CPUs it may use. `parts` are
    further shares by name, each read when the load is (1.0: that part is at its limit)."""

    def __init__(
        self,
        *,
        calls: Callable[[], int],
        max_calls: int | None = None,
        window: float = 2.0,
        cpu: Callable[[], float] = time.process_time,
        now: Callable[[], float] = time.monotonic,
        cpus: int | None = None,
        parts: Mapping[str, Callable[[], float]] | None = None,
    ) -> None:
        reserved = {"lag", "cpu", "calls"} & set(parts or {})
        if reserved:
            raise ValueError(
                f"load parts {sorted(reserved)} are the meter's own: name them otherwise"
            )
        self.calls = calls
        self.max_calls = max_calls
        self.parts = dict(parts or {})
        self.window = window
        self._cpu, self._now = cpu, now
        self.cpus = cpus or len(os.sched_getaffinity(0))
        self._lags: deque[tuple[float, float]] = deque()  # (when, lag)
        self._cpu_samples: deque[tuple[float, float]] = deque([(now(), cpu())])
        self._admitted: deque[float] = deque()

    def observe_lag(self, lag: float) -> None:
        """A tick of the loop-lag probe (`LoopHealth`) was `lag` seconds late."""
        now = self._now()
        self._lags.append((now, lag))
        self._sample_cpu(now)
        self._forget(now)

    def admitted(self) -> None:
        """A new call was admitted now: it counts as live until it starts (`started`), or
        for `window` seconds if it never does."""
        self._admitted.append(self._now())

    @property
    def pending(self) -> int:
        """Calls admitted that have not started yet (within `window`)."""
        return len(self._admitted)

    def started(self) -> None:
        """A call started (the live count has it now)."""
        if self._admitted:
            self._admitted.popleft()

    def shares(self) -> dict[str, float]:
        """Each part of the load (lag, cpu, calls, then `parts`), 1.0 = at the limit."""
        now = self._now()
        self._sample_cpu(now)
        self._forget(now)
        lag = max((lag for _, lag in self._lags), default=0.0)
        (then, cpu_then), (latest, cpu_now) = self._cpu_samples[0], self._cpu_samples[-1]
        cpu = (cpu_now - cpu_then) / (latest - then) / self.cpus if latest > then else 0.0
        live, pending = self.calls(), len(self._admitted)
        if live > 0:  # the calls about to start, at what a live one costs
            cpu *= (live + pending) / live
        shares = {"lag": lag / LAG_BUDGET, "cpu": cpu}
        if self.max_calls is not None:
            shares["calls"] = (live + pending) / self.max_calls
        for name, part in self.parts.items():
            shares[name] = part()
        return {name: round(value, 3) for name, value in shares.items()}

    def load(self) -> float:
        """The load: the worst of its shares."""
        return max(self.shares().values())

    def _sample_cpu(self, now: float) -> None:
        if now - self._cpu_samples[-1][0] >= 0.1:
            self._cpu_samples.append((now, self._cpu()))

    def _forget(self, now: float) -> None:
        while self._lags and self._lags[0][0] < now - self.window:
            self._lags.popleft()
        while len(self._cpu_samples) > 2 and self._cpu_samples[1][0] <= now - self.window:
            self._cpu_samples.popleft()
        while self._admitted and self._admitted[0] < now - self.window:
            self._admitted.popleft()


class CallAdmission:
    """Whether a new call may start: not above `max_load` (None: no limit on the load; the
    calls share still applies when the meter has `max_calls`), and no `guard` refusing it
    (each says why a new call is refused now, or None: the server's is its memory limit,
    `voicehub.server.admission_memory`)."""

    def __init__(
        self,
        meter: LoadMeter,
        max_load: float | None,
        guards: Sequence[Callable[[], str | None]] = (),
    ) -> None:
        self.meter = meter
        self.max_load = max_load
        self.guards = tuple(guards)

    def busy(self) -> str | None:
        """Why a new call would be refused now (None: it is admitted)."""
        shares = self.meter.shares()
        if self.meter.max_calls is not None and shares["calls"] >= 1.0:
            return f"at its limit of {self.meter.max_calls} calls"
        for guard in self.guards:
            reason = guard()
            if reason is not None:
                return reason
        if self.max_load is None:
            return None
        worst = max(shares, key=lambda name: shares[name])
        if shares[worst] > self.max_load:
            return f"overloaded ({worst} at {shares[worst]:.2f} of its limit)"
        return None

    def admit(self) -> str | None:
        """`busy()`, counting the call as admitted when it is."""
        reason = self.busy()
        if reason is None:
            self.meter.admitted()
        return reason
