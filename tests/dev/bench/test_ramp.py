"""The capacity benches' ramp: step up, then halve the gap to the first failing count;
a first step that fails is refined towards zero instead of giving 0."""

from __future__ import annotations

import pytest

from voicehub_dev.bench.ramp import Ramp


def run(ramp: Ramp, capacity: int) -> list[int]:
    """Drive `ramp` on a machine that carries up to `capacity` calls; the counts tried."""
    tried = []
    while (count := ramp.next()) is not None:
        tried.append(count)
        ramp.passed(count, count <= capacity)
    return tried


def test_the_ramp_steps_up_then_halves_the_gap_to_the_first_failure() -> None:
    ramp = Ramp([10, 25, 50, 100, 150], resolution=0.1)
    assert run(ramp, 70) == [10, 25, 50, 100, 75, 62, 68, 71]
    assert ramp.figure == 68  # 71 failed, within 10% of 68 (4 refinements at most)


def test_a_first_step_that_fails_is_refined_towards_zero() -> None:
    # the voice ramp's first step (100 calls) failed on an AVX2-only EPYC: it read 0
    ramp = Ramp([100, 150], refinements=6)
    assert run(ramp, 29) == [100, 50, 25, 37, 31, 28, 29]
    assert ramp.figure == 29


def test_a_machine_that_carries_every_step_is_the_last_step() -> None:
    ramp = Ramp([2, 4, 8])
    assert run(ramp, 1000) == [2, 4, 8] and ramp.figure == 8


def test_refinement_stops_at_the_resolution_and_at_one_call() -> None:
    ramp = Ramp([2, 4, 8], resolution=0.5)
    assert run(ramp, 5) == [2, 4, 8, 6]  # 4 passed, 6 failed: within half of 4
    assert ramp.figure == 4
    assert run(Ramp([1, 2]), 0) == [1] and Ramp([1]).figure == 0


def test_a_count_that_fails_above_one_that_passed_later_bounds_the_figure() -> None:
    ramp = Ramp([10, 20])
    ramp.passed(10, True)
    ramp.passed(20, False)
    ramp.passed(30, True)  # a noisy pass above a failure does not count
    assert ramp.figure == 10


def test_steps_must_rise_from_one_call() -> None:
    with pytest.raises(ValueError, match="must rise"):
        Ramp([10, 5])
    with pytest.raises(ValueError, match="one call or more"):
        Ramp([0, 5])
