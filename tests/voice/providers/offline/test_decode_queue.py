"""The decoding queue: most urgent first, a call's stale partials replaced, finals never
dropped, and its counters (jobs gated by events, no sleeps)."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from voicehub.voice.providers.offline.decode_queue import DecodeQueue, Urgency


class Recorder:
    """Collects what ran and what completed; `gate` holds the first job until released."""

    def __init__(self) -> None:
        self.ran: list[str] = []
        self.completed: list[tuple[str, Any, BaseException | None]] = []
        self.gate = threading.Event()
        self.started = threading.Event()
        self.all_done = threading.Event()
        self.expected = 0

    def blocker(self) -> Any:
        def run() -> str:
            self.started.set()
            self.gate.wait(10)
            self.ran.append("blocker")
            return "blocker"

        return run

    def job(self, name: str, fail: bool = False) -> Any:
        def run() -> str:
            self.ran.append(name)
            if fail:
                raise ValueError(f"{name} failed")
            return name

        return run

    def done(self, name: str) -> Any:
        def record(result: Any, error: BaseException | None) -> None:
            self.completed.append((name, result, error))
            if len(self.completed) >= self.expected:
                self.all_done.set()

        return record


def test_work_runs_most_urgent_first_then_in_order() -> None:
    queue, seen = DecodeQueue(1), Recorder()
    owners = [object() for _ in range(5)]
    queue.submit(owners[0], Urgency.FINAL, seen.blocker(), seen.done("blocker"))
    assert seen.started.wait(10)  # the worker is busy: the rest queue
    queue.submit(owners[1], Urgency.INTERIM, seen.job("interim"), seen.done("interim"))
    queue.submit(owners[2], Urgency.PAUSE, seen.job("pause"), seen.done("pause"))
    queue.submit(owners[3], Urgency.FINAL, seen.job("final-1"), seen.done("final-1"))
    queue.submit(owners[4], Urgency.FINAL, seen.job("final-2"), seen.done("final-2"))
    assert queue.stats().finals_queued == 2
    seen.expected = 5
    seen.gate.set()
    assert seen.all_done.wait(10)
    assert seen.ran == ["blocker", "final-1", "final-2", "pause", "interim"]
    stats = queue.stats()
    assert (stats.jobs, stats.queued, stats.running) == (5, 0, 0)
    assert stats.busy_seconds > 0


def test_a_calls_new_job_replaces_its_queued_partial_but_never_a_final() -> None:
    queue, seen = DecodeQueue(1), Recorder()
    call, other = object(), object()
    queue.submit(other, Urgency.FINAL, seen.blocker(), seen.done("blocker"))
    assert seen.started.wait(10)
    queue.submit(call, Urgency.INTERIM, seen.job("stale interim"), seen.done("stale interim"))
    queue.submit(call, Urgency.PAUSE, seen.job("stale pause"), seen.done("stale pause"))
    queue.submit(call, Urgency.FINAL, seen.job("final"), seen.done("final"))
    queue.submit(call, Urgency.INTERIM, seen.job("next interim"), seen.done("next interim"))
    assert queue.stats().superseded == 2
    seen.expected = 3
    seen.gate.set()
    assert seen.all_done.wait(10)
    assert seen.ran == ["blocker", "final", "next interim"]
    assert [name for name, _, _ in seen.completed] == ["blocker", "final", "next interim"]


def test_a_promoted_pause_decoding_goes_before_other_calls_partials() -> None:
    queue, seen = DecodeQueue(1), Recorder()
    call, other = object(), object()
    queue.submit(other, Urgency.FINAL, seen.blocker(), seen.done("blocker"))
    assert seen.started.wait(10)
    queue.submit(other, Urgency.PAUSE, seen.job("other pause"), seen.done("other pause"))
    pause = queue.submit(call, Urgency.PAUSE, seen.job("pause"), seen.done("pause"))
    queue.promote(pause)  # the flush found it decodes the final window
    queue.submit(call, Urgency.INTERIM, seen.job("next interim"), seen.done("next interim"))
    seen.expected = 4
    seen.gate.set()
    assert seen.all_done.wait(10)
    assert seen.ran == ["blocker", "pause", "other pause", "next interim"]


def test_a_failing_job_hands_its_error_to_its_owner_and_the_worker_goes_on() -> None:
    queue, seen = DecodeQueue(1), Recorder()
    seen.expected = 2
    queue.submit(object(), Urgency.FINAL, seen.job("bad", fail=True), seen.done("bad"))
    queue.submit(object(), Urgency.FINAL, seen.job("good"), seen.done("good"))
    assert seen.all_done.wait(10)
    (_, _, error), (good, result, none) = seen.completed
    assert isinstance(error, ValueError) and str(error) == "bad failed"
    assert (good, result, none) == ("good", "good", None)


def test_a_cancelled_job_never_runs() -> None:
    queue, seen = DecodeQueue(1), Recorder()
    queue.submit(object(), Urgency.FINAL, seen.blocker(), seen.done("blocker"))
    assert seen.started.wait(10)
    dropped = queue.submit(object(), Urgency.FINAL, seen.job("dropped"), seen.done("dropped"))
    queue.cancel(dropped)
    seen.expected = 2
    queue.submit(object(), Urgency.FINAL, seen.job("kept"), seen.done("kept"))
    seen.gate.set()
    assert seen.all_done.wait(10)
    assert seen.ran == ["blocker", "kept"]


def test_two_workers_run_two_jobs_at_once() -> None:
    queue = DecodeQueue(2)
    both = threading.Barrier(2, timeout=10)
    finished = threading.Event()
    results: list[int] = []

    def run() -> int:
        return both.wait()  # only returns once both workers are inside a job

    def done(result: Any, error: BaseException | None) -> None:
        assert error is None
        results.append(result)
        if len(results) == 2:
            finished.set()

    queue.submit(object(), Urgency.FINAL, run, done)
    queue.submit(object(), Urgency.FINAL, run, done)
    assert finished.wait(10)
    assert sorted(results) == [0, 1]


def test_a_queue_needs_a_worker() -> None:
    with pytest.raises(ValueError, match="at least one worker"):
        DecodeQueue(0)
