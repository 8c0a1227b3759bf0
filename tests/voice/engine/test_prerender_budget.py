"""The pre-render budget: bytes per call and per server, given back when dropped."""

from __future__ import annotations

from voicehub.voice.engine.results import PrerenderBudget


def test_a_call_and_the_server_each_have_a_cap() -> None:
    budget = PrerenderBudget(per_call=100, per_server=150)
    assert budget.take(0, 100)
    assert not budget.take(100, 1)  # this call is full
    assert budget.take(0, 50)  # another call
    assert not budget.take(0, 1)  # the server is full
    budget.give_back(100)
    assert budget.used == 50
    assert budget.take(0, 100)
    budget.give_back(10_000)
    assert budget.used == 0  # never below zero
