"""The load a process sees in itself and the admission of new calls on it: loop lag, CPU and
calls as shares of their limits, calls admitted counting before they start."""

from __future__ import annotations

import pytest

from voicehub.desks.call_admission import LAG_BUDGET, CallAdmission, LoadMeter


class Process:
    """A process's clock and CPU time, moved by hand."""

    def __init__(self) -> None:
        self.now = 100.0
        self.cpu = 5.0
        self.calls = 0

    def meter(self, **options: object) -> LoadMeter:
        return LoadMeter(
            calls=lambda: self.calls,
            cpu=lambda: self.cpu,
            now=lambda: self.now,
            cpus=2,
            **options,  # type: ignore[arg-type]
        )

    def run(self, seconds: float, cpu_seconds: float) -> None:
        self.now += seconds
        self.cpu += cpu_seconds


def test_the_load_is_the_worst_share_and_forgets_what_is_older_than_its_window() -> None:
    process = Process()
    meter = process.meter(window=2.0)
    assert meter.shares() == {"lag": 0.0, "cpu": 0.0}
    process.run(1.0, cpu_seconds=1.0)  # one of two CPUs busy
    meter.observe_lag(LAG_BUDGET / 4)
    assert meter.shares() == {"lag": 0.25, "cpu": 0.5}
    process.run(0.5, cpu_seconds=0.0)
    meter.observe_lag(LAG_BUDGET * 1.5)  # a stall
    assert meter.load() == 1.5
    process.run(2.5, cpu_seconds=0.2)  # quiet since
    meter.observe_lag(0.0)
    assert meter.shares()["lag"] == 0.0 and meter.shares()["cpu"] < 0.1


def test_calls_admitted_count_before_they_start_and_the_limit_refuses_the_next() -> None:
    process = Process()
    admission = CallAdmission(process.meter(max_calls=2), max_load=None)
    assert admission.admit() is None
    assert admission.admit() is None  # two admitted, neither started yet
    assert admission.admit() == "at its limit of 2 calls"
    admission.meter.started()
    process.calls = 1
    assert admission.busy() == "at its limit of 2 calls"  # one live, one starting
    process.calls = 0  # it hung up; the other never came (its admission lapses)
    admission.meter.started()
    assert admission.admit() is None


def test_a_process_above_its_max_load_refuses_new_calls_naming_the_worst_share() -> None:
    process = Process()
    admission = CallAdmission(process.meter(), max_load=0.8)
    process.run(1.0, cpu_seconds=1.9)  # both CPUs nearly full
    admission.meter.observe_lag(0.01)
    assert admission.admit() == "overloaded (cpu at 0.95 of its limit)"
    process.run(2.5, cpu_seconds=0.5)
    admission.meter.observe_lag(0.01)
    assert admission.admit() is None


def test_a_named_part_of_the_load_refuses_calls_when_it_is_past_the_limit() -> None:
    process = Process()
    recognizers = [0.5]
    admission = CallAdmission(
        process.meter(parts={"recognizers": lambda: recognizers[0]}), max_load=0.8
    )
    process.run(1.0, cpu_seconds=0.5)  # the process's CPU share looks low (0.25)
    assert admission.meter.shares() == {"lag": 0.0, "cpu": 0.25, "recognizers": 0.5}
    assert admission.admit() is None
    recognizers[0] = 0.9  # its one decoding thread is nearly never idle
    assert admission.admit() == "overloaded (recognizers at 0.90 of its limit)"


def test_a_part_cannot_take_the_name_of_the_meters_own_shares() -> None:
    with pytest.raises(ValueError, match=r"\['cpu'\] are the meter's own"):
        Process().meter(parts={"cpu": lambda: 0.0})


def test_calls_still_starting_count_in_the_cpu_share_at_what_a_live_call_costs() -> None:
    # With a load limit alone, callers redialling a server at its limit were let in by the
    # handful on one low reading (no call counted until it started): some went unanswered.
    process = Process()
    admission = CallAdmission(process.meter(window=2.0), max_load=0.8)
    process.calls = 10
    process.run(1.0, cpu_seconds=1.2)  # 0.6 of two CPUs for 10 live calls
    assert admission.meter.shares()["cpu"] == 0.6
    admitted = 0
    while admission.admit() is None:
        admitted += 1
        assert admitted < 10, "a burst of callers was let in on one reading"
    assert admitted == 4  # 10 live + 4 starting: 0.84 of the CPUs
    assert admission.meter.pending == 4
    assert admission.busy() == "overloaded (cpu at 0.84 of its limit)"
    for _ in range(4):  # they started: the live count has them, the reading is the same
        admission.meter.started()
    process.calls = 14
    assert admission.meter.shares()["cpu"] == 0.6
    process.calls = 0  # no live call to learn a cost from: the share as measured
    assert admission.meter.shares()["cpu"] == 0.6
