"""The decoding queue: most urgent first, a call's stale partials replaced, finals never
dropped, and its counters (jobs gated by events, no sleeps)."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from tests.support.waiting import until
from voicehub.voice.providers.offline.decode_queue import DecodeQueue, Then, Urgency


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


async def test_a_final_is_not_held_behind_a_second_opinion_running_on_its_lane() -> None:
    # Three calls at once on one decoding thread: a second opinion (a second of Whisper)
    # took the thread and the other calls' finals waited behind it. On the second lane it
    # runs beside them.
    queue, seen = DecodeQueue(1, second_lane=1), Recorder()
    doubted, other = object(), object()
    seen.expected = 2
    queue.submit(
        doubted,
        Urgency.FINAL,
        lambda: Then(Urgency.SECOND, seen.blocker()),  # heard, doubted: heard again
        seen.done("doubted"),
    )
    assert seen.started.wait(10)  # the second opinion is running, held
    queue.submit(other, Urgency.FINAL, seen.job("other final"), seen.done("other final"))
    queue.submit(other, Urgency.PAUSE, seen.job("other pause"), seen.done("other pause"))
    await until(lambda: len(seen.completed) >= 2, what="the other call's jobs")
    assert [name for name, _, _ in seen.completed] == ["other final", "other pause"]
    assert queue.stats().running == 1  # the second opinion, still held
    seen.all_done.clear()
    seen.expected = 3
    seen.gate.set()
    assert seen.all_done.wait(10)
    assert seen.completed[-1] == ("doubted", "blocker", None)  # its final: the second run's
    stats = queue.stats()
    assert (stats.jobs, stats.second_workers, stats.running) == (4, 1, 0)
    assert stats.second_busy_seconds > 0


def test_without_a_second_lane_a_second_opinion_comes_after_every_other_job() -> None:
    queue, seen = DecodeQueue(1), Recorder()
    owners = [object() for _ in range(3)]
    queue.submit(owners[0], Urgency.FINAL, seen.blocker(), seen.done("blocker"))
    assert seen.started.wait(10)
    queue.submit(
        owners[1],
        Urgency.FINAL,
        lambda: Then(Urgency.SECOND, seen.job("second")),
        seen.done("doubted"),
    )
    queue.submit(owners[2], Urgency.INTERIM, seen.job("interim"), seen.done("interim"))
    seen.expected = 3
    seen.gate.set()
    assert seen.all_done.wait(10)
    assert seen.ran == ["blocker", "interim", "second"]
    assert seen.completed[-1] == ("doubted", "second", None)


def test_the_second_lane_is_behind_when_as_many_wait_as_it_has_threads() -> None:
    queue, seen = DecodeQueue(1, second_lane=1), Recorder()
    assert (queue.lane_workers(Urgency.SECOND), queue.lane_workers(Urgency.FINAL)) == (1, 1)
    queue.submit(object(), Urgency.SECOND, seen.blocker(), seen.done("running"))
    assert seen.started.wait(10)
    assert queue.waiting(Urgency.SECOND) == 0  # one running, none waiting
    queue.submit(object(), Urgency.SECOND, seen.job("waiting"), seen.done("waiting"))
    assert queue.waiting(Urgency.SECOND) == 1
    assert queue.stats().second_queued == 1
    promoted = queue.submit(object(), Urgency.SECOND, seen.job("kept"), seen.done("kept"))
    queue.promote(promoted)  # a second opinion is a final's already: it stays on its lane
    assert queue.waiting(Urgency.SECOND) == 2 and queue.waiting(Urgency.FINAL) == 0
    seen.expected = 3
    seen.gate.set()
    assert seen.all_done.wait(10)
    assert seen.ran == ["blocker", "waiting", "kept"]


async def test_a_job_cancelled_while_running_asks_for_nothing_more() -> None:
    queue, seen = DecodeQueue(1, second_lane=1), Recorder()
    job = queue.submit(
        object(),
        Urgency.FINAL,
        lambda: (seen.blocker()(), Then(Urgency.SECOND, seen.job("second")))[1],
        seen.done("first"),
    )
    assert seen.started.wait(10)
    queue.cancel(job)  # the stream closed while its final was decoding
    seen.expected = 1
    queue.submit(object(), Urgency.FINAL, seen.job("next"), seen.done("next"))
    seen.gate.set()
    assert seen.all_done.wait(10)
    await until(lambda: queue.stats().jobs == 2 and not queue.stats().running, what="both runs")
    assert seen.ran == ["blocker", "next"] and job.state == "cancelled"
    assert [name for name, _, _ in seen.completed] == ["next"]


def test_a_second_lane_needs_zero_workers_or_more() -> None:
    with pytest.raises(ValueError, match="second lane"):
        DecodeQueue(1, second_lane=-1)
