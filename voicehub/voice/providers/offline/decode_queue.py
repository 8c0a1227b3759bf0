"""Decoding work of every call, run on worker threads most urgent first: :class:`DecodeQueue`.

Whisper's decoding (CTranslate2) releases the GIL, so it runs on threads beside the event
loop without holding it. The machine's cores are shared by the loop and the decoders, so
the queue has few workers (one by default) and orders their work: a final transcript a
caller waits for (`Urgency.FINAL`) first, then decodings at a pause that will likely be
one (`PAUSE`), then partial transcripts (`INTERIM`). A call's new job replaces its queued
non-final ones (they describe audio the new one covers), so under load partials are shed
before anything a caller waits for. The queue's counters (`DecodeStats`) say how loaded the
recognizer is: the share of the workers' time spent decoding, and how long finals waited.

A job may end by asking for more work (its run returns `Then`): it is queued again at
that urgency, and its completion waits for the second run. A second opinion on a final
(Moonshine's final heard again by Whisper, about a second of CPU) is such a second run,
at `Urgency.SECOND`. With `second_lane` workers the queue runs those jobs on threads of
their own, and only there: the first lane's workers never start one, so a final another
call waits for is never held behind a second opinion that is running (ordering alone
cannot do that: a job that started runs to its end). Without a second lane, SECOND jobs
come after every other.

The workers run at a lower CPU priority than the event loop (`DECODER_NICE`): when calls
keep every core busy, the loop (every call's audio, turns and replies) goes first and the
decoders take what is left, so decoding more slows decoding, not the calls' loop.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import logging
import os
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

__all__ = [
    "DECODER_NICE",
    "DecodeJob",
    "DecodeQueue",
    "DecodeStats",
    "Then",
    "Urgency",
    "lower_priority",
]

log = logging.getLogger("voicehub.voice.stt")

_RECENT_FINALS = 200  # final waits kept for the percentile
DECODER_NICE = 5
"""The nice value of decoding threads and processes (the event loop's is 0): Linux gives
the loop about three times their share of a contended core. Not more: other programs on the
machine run at 0 too, and decoders starved by them would leave callers waiting."""


def lower_priority(nice: int = DECODER_NICE) -> None:
    """Run the calling thread at `nice` (Linux: per thread; elsewhere nothing). Threads it
    starts afterwards inherit it."""
    if sys.platform != "linux" or nice <= 0:
        return
    with contextlib.suppress(OSError):
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), nice)


class Urgency(IntEnum):
    """Which work goes first (lower first)."""

    FINAL = 0
    PAUSE = 1
    INTERIM = 2
    SECOND = 3  # a second opinion on a decoding already made: the second lane, if any


Done = Callable[[Any, BaseException | None], None]


@dataclass(frozen=True, slots=True)
class Then:
    """What a job's run returns to ask for more work: `run` queued at `urgency` as the
    same job (same owner and completion, which is called once that has run)."""

    urgency: Urgency
    run: Callable[[], Any]


class DecodeJob:
    """One piece of work: `run()` on a worker, then `done(result, error)` on that worker."""

    __slots__ = ("done", "owner", "run", "since", "state", "urgency")

    def __init__(self, owner: object, urgency: Urgency, run: Callable[[], Any], done: Done) -> None:
        self.owner = owner
        self.urgency = urgency
        self.run = run
        self.done = done
        # queued, running, finished, cancelled; cancelling: cancelled while running (its
        # run finishes and `done` is called, but more work it asks for is dropped)
        self.state = "queued"
        self.since = time.monotonic()  # queued since (or promoted to FINAL since)


@dataclass(frozen=True, slots=True)
class DecodeStats:
    """A snapshot of the queue's counters."""

    workers: int
    queued: int
    running: int
    finals_queued: int
    busy_seconds: float  # workers' time spent running jobs, in all
    jobs: int  # jobs run
    superseded: int  # queued jobs replaced by a newer one of the same call
    final_wait_p95: float  # seconds a final waited for a worker (recent finals)
    oldest_final_wait: float  # seconds the oldest queued final has waited now
    second_workers: int = 0  # the second lane's threads (SECOND jobs only)
    second_queued: int = 0  # SECOND jobs waiting
    second_busy_seconds: float = 0.0  # the second lane's time spent running jobs


class DecodeQueue:
    """Runs jobs on `workers` threads (started on the first job), most urgent first, first
    come first within an urgency; SECOND jobs on `second_lane` threads of their own when
    there are any (see the module)."""

    def __init__(
        self,
        workers: int = 1,
        *,
        second_lane: int = 0,
        name: str = "decode",
        nice: int = DECODER_NICE,
    ) -> None:
        if workers < 1:
            raise ValueError(f"a decode queue needs at least one worker, got {workers}")
        if second_lane < 0:
            raise ValueError(f"a second lane has 0 workers or more, got {second_lane}")
        self.workers = workers
        self.second_workers = second_lane
        self.nice = nice
        self.name = name
        self._heap: list[tuple[int, int, DecodeJob]] = []
        self._second_heap: list[tuple[int, int, DecodeJob]] = []  # with a second lane
        self._order = itertools.count()
        self._latest: dict[int, DecodeJob] = {}  # id(owner) -> its newest queued non-final
        lock = threading.Lock()
        self._condition = threading.Condition(lock)  # the first lane's workers wait on it
        self._second_condition = threading.Condition(lock)  # the second lane's
        self._threads: list[threading.Thread] = []
        self._running = 0
        self._busy = 0.0
        self._second_busy = 0.0
        self._jobs = 0
        self._superseded = 0
        self._final_waits: deque[float] = deque(maxlen=_RECENT_FINALS)

    def submit(
        self, owner: object, urgency: Urgency, run: Callable[[], Any], done: Done
    ) -> DecodeJob:
        """Queue `run` for `owner` (a call's stream); its queued non-final jobs are dropped
        (never run, `done` never called)."""
        job = DecodeJob(owner, urgency, run, done)
        with self._condition:
            older = self._latest.pop(id(owner), None)
            if older is not None and older.state == "queued":
                older.state = "cancelled"
                self._superseded += 1
            if urgency not in (Urgency.FINAL, Urgency.SECOND):
                self._latest[id(owner)] = job
            self._push(job)
            self._start_workers()
        return job

    def promote(self, job: DecodeJob) -> None:
        """Make a queued job a final (a flush found it covers the final window); a second
        opinion stays where it is (its job is a final's already)."""
        with self._condition:
            if job.state != "queued" or job.urgency in (Urgency.FINAL, Urgency.SECOND):
                return
            if self._latest.get(id(job.owner)) is job:
                del self._latest[id(job.owner)]
            job.urgency = Urgency.FINAL
            job.since = time.monotonic()
            self._push(job)

    def cancel(self, job: DecodeJob) -> None:
        """Drop a queued job (a running one finishes; `done` is then still called, unless
        its run asked for more work: that is dropped too)."""
        with self._condition:
            if job.state in ("queued", "running"):
                job.state = "cancelled" if job.state == "queued" else "cancelling"
                if self._latest.get(id(job.owner)) is job:
                    del self._latest[id(job.owner)]

    def waiting(self, urgency: Urgency) -> int:
        """Jobs of `urgency` queued and not started (for a second opinion: how far behind
        its lane is)."""
        with self._condition:
            queued = {
                id(job)
                for u, _, job in self._heap_for(urgency)
                if u == urgency and job.urgency == urgency and job.state == "queued"
            }
            return len(queued)

    def lane_workers(self, urgency: Urgency) -> int:
        """The threads that run jobs of `urgency`."""
        if urgency == Urgency.SECOND and self.second_workers:
            return self.second_workers
        return self.workers

    def stats(self) -> DecodeStats:
        """The counters now."""
        now = time.monotonic()
        with self._condition:
            live = [job for _, _, job in self._heap + self._second_heap if job.state == "queued"]
            finals = [job for job in live if job.urgency == Urgency.FINAL]
            seconds = [job for job in live if job.urgency == Urgency.SECOND]
            waits = sorted(self._final_waits)
            return DecodeStats(
                workers=self.workers,
                queued=len({id(job) for job in live}),
                running=self._running,
                finals_queued=len({id(job) for job in finals}),
                busy_seconds=self._busy,
                jobs=self._jobs,
                superseded=self._superseded,
                final_wait_p95=waits[int(0.95 * (len(waits) - 1))] if waits else 0.0,
                oldest_final_wait=max((now - job.since for job in finals), default=0.0),
                second_workers=self.second_workers,
                second_queued=len({id(job) for job in seconds}),
                second_busy_seconds=self._second_busy,
            )

    def _heap_for(self, urgency: Urgency) -> list[tuple[int, int, DecodeJob]]:
        if urgency == Urgency.SECOND and self.second_workers:
            return self._second_heap
        return self._heap

    def _push(self, job: DecodeJob) -> None:
        """Under the lock: `job` queued at its urgency, on its lane, a worker woken."""
        job.state = "queued"
        heapq.heappush(self._heap_for(job.urgency), (job.urgency, next(self._order), job))
        if job.urgency == Urgency.SECOND and self.second_workers:
            self._second_condition.notify()
        else:
            self._condition.notify()

    def _start_workers(self) -> None:
        """Under the lock: the worker threads of both lanes, once."""
        while len(self._threads) < self.workers + self.second_workers:
            second = len(self._threads) >= self.workers
            index = len(self._threads) - (self.workers if second else 0)
            thread = threading.Thread(
                target=self._work,
                args=(second,),
                name=f"{self.name}-{'second-' if second else ''}{index}",
                daemon=True,
            )
            self._threads.append(thread)
            thread.start()

    def _next(self, second: bool) -> DecodeJob:
        heap = self._second_heap if second else self._heap
        condition = self._second_condition if second else self._condition
        with condition:
            while True:
                while heap:
                    urgency, _, job = heapq.heappop(heap)
                    if job.state != "queued" or job.urgency != urgency:
                        continue  # cancelled, or promoted (its newer entry comes first)
                    if self._latest.get(id(job.owner)) is job:
                        del self._latest[id(job.owner)]
                    job.state = "running"
                    self._running += 1
                    if job.urgency == Urgency.FINAL:
                        self._final_waits.append(time.monotonic() - job.since)
                    return job
                condition.wait()

    def _work(self, second: bool) -> None:
        lower_priority(self.nice)
        while True:
            job = self._next(second)
            started = time.monotonic()
            result: Any = None
            error: BaseException | None = None
            try:
                result = job.run()
            except Exception as exc:  # handed to the job's owner, the worker goes on
                error = exc
            with self._condition:
                self._running -= 1
                if second:
                    self._second_busy += time.monotonic() - started
                else:
                    self._busy += time.monotonic() - started
                self._jobs += 1
                if isinstance(result, Then) and error is None:
                    if job.state == "cancelling":  # nobody waits for it any more
                        job.state = "cancelled"
                        continue
                    job.urgency, job.run = result.urgency, result.run
                    job.since = time.monotonic()
                    self._push(job)
                    continue
                job.state = "finished"
            try:
                job.done(result, error)
            except Exception:
                log.exception("a %s job's completion failed", self.name)
