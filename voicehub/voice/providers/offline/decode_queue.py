"""Decoding work of every call, run on worker threads most urgent first: :class:`DecodeQueue`.

Whisper's decoding (CTranslate2) releases the GIL, so it runs on threads beside the event
loop without holding it. The machine's cores are shared by the loop and the decoders, so
the queue has few workers (one by default) and orders their work: a final transcript a
caller waits for (`Urgency.FINAL`) first, then decodings at a pause that will likely be
one (`PAUSE`), then partial transcripts (`INTERIM`). A call's new job replaces its queued
non-final ones (they describe audio the new one covers), so under load partials are shed
before anything a caller waits for. The queue's counters (`DecodeStats`) say how loaded the
recognizer is: the share of the workers' time spent decoding, and how long finals waited.

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

__all__ = ["DECODER_NICE", "DecodeJob", "DecodeQueue", "DecodeStats", "Urgency", "lower_priority"]

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


Done = Callable[[Any, BaseException | None], None]


class DecodeJob:
    """One piece of work: `run()` on a worker, then `done(result, error)` on that worker."""

    __slots__ = ("done", "owner", "run", "since", "state", "urgency")

    def __init__(self, owner: object, urgency: Urgency, run: Callable[[], Any], done: Done) -> None:
        self.owner = owner
        self.urgency = urgency
        self.run = run
        self.done = done
        self.state = "queued"  # queued, running, finished, cancelled
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


class DecodeQueue:
    """Runs jobs on `workers` threads (started on the first job), most urgent first, first
    come first within an urgency."""

    def __init__(self, workers: int = 1, *, name: str = "decode", nice: int = DECODER_NICE) -> None:
        if workers < 1:
            raise ValueError(f"a decode queue needs at least one worker, got {workers}")
        self.workers = workers
        self.nice = nice
        self.name = name
        self._heap: list[tuple[int, int, DecodeJob]] = []
        self._order = itertools.count()
        self._latest: dict[int, DecodeJob] = {}  # id(owner) -> its newest queued non-final
        self._condition = threading.Condition()
        self._threads: list[threading.Thread] = []
        self._running = 0
        self._busy = 0.0
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
            if urgency != Urgency.FINAL:
                self._latest[id(owner)] = job
            heapq.heappush(self._heap, (urgency, next(self._order), job))
            self._start_workers()
            self._condition.notify()
        return job

    def promote(self, job: DecodeJob) -> None:
        """Make a queued job a final (a flush found it covers the final window)."""
        with self._condition:
            if job.state != "queued" or job.urgency == Urgency.FINAL:
                return
            if self._latest.get(id(job.owner)) is job:
                del self._latest[id(job.owner)]
            job.urgency = Urgency.FINAL
            job.since = time.monotonic()
            heapq.heappush(self._heap, (Urgency.FINAL, next(self._order), job))
            self._condition.notify()

    def cancel(self, job: DecodeJob) -> None:
        """Drop a queued job (a running one finishes; `done` is then still called)."""
        with self._condition:
            if job.state == "queued":
                job.state = "cancelled"
                if self._latest.get(id(job.owner)) is job:
                    del self._latest[id(job.owner)]

    def stats(self) -> DecodeStats:
        """The counters now."""
        now = time.monotonic()
        with self._condition:
            live = [job for _, _, job in self._heap if job.state == "queued"]
            finals = [job for job in live if job.urgency == Urgency.FINAL]
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
            )

    def _start_workers(self) -> None:
        """Under the lock: the worker threads, once."""
        while len(self._threads) < self.workers:
            thread = threading.Thread(
                target=self._work, name=f"{self.name}-{len(self._threads)}", daemon=True
            )
            self._threads.append(thread)
            thread.start()

    def _next(self) -> DecodeJob:
        with self._condition:
            while True:
                while self._heap:
                    urgency, _, job = heapq.heappop(self._heap)
                    if job.state != "queued" or job.urgency != urgency:
                        continue  # cancelled, or promoted (its newer entry comes first)
                    if self._latest.get(id(job.owner)) is job:
                        del self._latest[id(job.owner)]
                    job.state = "running"
                    self._running += 1
                    if job.urgency == Urgency.FINAL:
                        self._final_waits.append(time.monotonic() - job.since)
                    return job
                self._condition.wait()

    def _work(self) -> None:
        lower_priority(self.nice)
        while True:
            job = self._next()
            started = time.monotonic()
            result: Any = None
            error: BaseException | None = None
            try:
                result = job.run()
            except Exception as exc:  # handed to the job's owner, the worker goes on
                error = exc
            with self._condition:
                self._running -= 1
                self._busy += time.monotonic() - started
                self._jobs += 1
                job.state = "finished"
            try:
                job.done(result, error)
            except Exception:
                log.exception("a %s job's completion failed", self.name)
