"""What a scenario expected, against what its calls showed: each difference is a `Failure`
saying what was expected and what happened instead.

- A step's `expect_reply` and `expect_handoff` look at its window: from the step until the
  next step on the same call (or the call's end); a reply is what the agent said (its
  final transcripts). `expect_tool` looks from the step to the end of the call, and in the
  room's stored events from the step on: a tool is reported when it finishes, some finish
  turns later (`ask_user`, once its questions are answered) or after a hang-up.
- `delivered_once`: every result stored for the conversation was delivered, and each was
  heard delivered exactly once over all the scenario's calls (a hang-up in between too).
- `held_until_call_back`: a result was spoken on a call-back, never attempted before it.
- `voice_to_voice_p95`: the p95 of end of caller speech to first agent audio over the
  spoken lines (a nearest-rank p95: the turn below which 95% of them fall).
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from voicehub.scenarios.model import ToolExpectation
from voicehub.scenarios.runner import ScenarioRun, StepWindow
from voicehub.voice.events import DeliveryAttempt, DeliveryOutcome, ToolCall, Transcript

__all__ = ["Failure", "check_run", "p95"]


@dataclass(frozen=True)
class Failure:
    """One expectation not met: where, what was expected, what happened."""

    where: str
    expected: str
    got: str

    def __str__(self) -> str:
        return f"{self.where}: expected {self.expected}; got {self.got}"


def check_run(run: ScenarioRun) -> list[Failure]:
    """Every expectation of `run`'s scenario that its calls did not meet."""
    failures: list[Failure] = []
    if run.error is not None:
        failures.append(Failure("scenario", "the calls to run to the end", run.error))
    for window in run.windows:
        failures += _step_failures(run, window)
    expect = run.scenario.expect
    if expect.delivered_once or expect.deliveries is not None:
        failures += _delivery_failures(run)
    if expect.held_until_call_back:
        failures += _held_failures(run)
    if expect.voice_to_voice_p95 is not None:
        failures += _latency_failures(run, expect.voice_to_voice_p95)
    if not run.settled and (expect.delivered_once or expect.held_until_call_back):
        failures.append(
            Failure("scenario", "the conversation to settle", "still busy at the timeout")
        )
    return failures


# -- steps ---------------------------------------------------------------------------------


def _in_window(run: ScenarioRun, window: StepWindow, *, to_call_end: bool = False) -> Iterator[Any]:
    report = run.reports[window.call]
    end = float("inf") if to_call_end else window.end
    for received in report.events:
        if window.start <= received.at < end:
            yield received.event


def _step_failures(run: ScenarioRun, window: StepWindow) -> Iterator[Failure]:
    step = window.step
    where = f"step {window.index + 1} ({step.describe()})"
    events = list(_in_window(run, window))
    later = [
        (c.name, c.arguments)
        for c in _in_window(run, window, to_call_end=True)
        if isinstance(c, ToolCall)
    ]
    # the room's record too: a tool that finished after the caller hung up is no wire event
    later += [(name, args) for at, name, args in run.stored_tools if at >= window.wall_start]
    for expected in step.tools:
        if not any(_tool_matches(expected, name, args) for name, args in later):
            seen = dict.fromkeys(f"{name} {args}" for name, args in later)
            yield Failure(
                where, f"tool {_describe_tool(expected)}", "; ".join(seen) or "no tool call"
            )
    calls = [e for e in events if isinstance(e, ToolCall)]
    said = " ".join(
        e.text for e in events if isinstance(e, Transcript) and e.role == "assistant" and e.final
    )
    reply = step.expect_reply
    if reply is not None:
        heard = _short(said) if said else "silence"
        if reply.contains is not None and reply.contains.casefold() not in said.casefold():
            yield Failure(where, f"a reply containing {reply.contains!r}", heard)
        if reply.matches is not None and re.search(reply.matches, said, re.IGNORECASE) is None:
            yield Failure(where, f"a reply matching /{reply.matches}/", heard)
    if step.expect_handoff is not None:
        targets = [
            _arguments(c.arguments).get("target") for c in calls if c.name == "handoff_conversation"
        ]
        if step.expect_handoff not in targets:
            got = f"handoff to {', '.join(map(str, targets))}" if targets else "no handoff"
            yield Failure(where, f"a handoff to {step.expect_handoff!r}", got)


def _short(text: str, limit: int = 160) -> str:
    return '"{}"'.format(text if len(text) <= limit else text[: limit - 3] + "...")


def _arguments(arguments: str) -> dict[str, Any]:
    try:
        parsed = json.loads(arguments or "{}")
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def _same(expected: Any, actual: Any) -> bool:
    if isinstance(expected, str) and isinstance(actual, str):
        return " ".join(expected.casefold().split()) == " ".join(actual.casefold().split())
    return bool(expected == actual)


def _tool_matches(expected: ToolExpectation, name: str, arguments: str) -> bool:
    if name != expected.name:
        return False
    actual = _arguments(arguments)
    return all(_same(value, actual.get(key)) for key, value in expected.arguments.items())


def _describe_tool(expected: ToolExpectation) -> str:
    if not expected.arguments:
        return expected.name
    return f"{expected.name} {json.dumps(expected.arguments)}"


# -- the whole scenario -------------------------------------------------------------------


def _delivered(run: ScenarioRun) -> Counter[str]:
    """Per delivery id, how often a call heard it delivered."""
    heard: Counter[str] = Counter()
    for report in run.reports:
        for outcome in report.events_of(DeliveryOutcome):
            if outcome.outcome == "delivered" and outcome.delivery_id:
                heard[outcome.delivery_id] += 1
    return heard


def _delivery_failures(run: ScenarioRun) -> Iterator[Failure]:
    expect = run.scenario.expect
    heard = _delivered(run)
    stored = {str(d.get("id")): str(d.get("status")) for d in run.deliveries}
    if expect.deliveries is not None and len(heard) != expect.deliveries:
        yield Failure("scenario", f"{expect.deliveries} results delivered", f"{len(heard)}")
    if not expect.delivered_once:
        return
    if not stored:
        yield Failure("scenario", "results delivered exactly once", "no result was stored")
    for delivery_id, status in stored.items():
        times = heard.get(delivery_id, 0)
        if times != 1 or status != "delivered":
            yield Failure(
                f"result {delivery_id}",
                "delivered exactly once",
                f"heard delivered {times} times, stored as {status}",
            )


def _held_failures(run: ScenarioRun) -> Iterator[Failure]:
    if len(run.reports) < 2:
        yield Failure("scenario", "a result held until the call-back", "no call-back step")
        return
    tried_before: set[str] = set()
    for report in run.reports[:1]:
        tried_before |= {a.delivery_id for a in report.events_of(DeliveryAttempt) if a.delivery_id}
    for report in run.reports[1:]:
        for outcome in report.events_of(DeliveryOutcome):
            if outcome.outcome == "delivered" and outcome.delivery_id not in tried_before:
                return
        tried_before |= {a.delivery_id for a in report.events_of(DeliveryAttempt) if a.delivery_id}
    spoken = [
        f"call {n + 1}: {o.delivery_id} {o.outcome}"
        for n, r in enumerate(run.reports)
        for o in r.events_of(DeliveryOutcome)
    ]
    yield Failure(
        "scenario",
        "a result held after the hang-up and spoken on the call-back",
        "; ".join(spoken) or "no delivery on any call",
    )


def p95(values: list[float]) -> float:
    """The nearest-rank 95th percentile."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]


def _latency_failures(run: ScenarioRun, budget: float) -> Iterator[Failure]:
    latencies = [value for report in run.reports for value in report.latencies()]
    if not latencies:
        yield Failure("scenario", "spoken turns to time", "no spoken line was answered")
        return
    measured = p95(latencies)
    if measured > budget:
        shown = ", ".join(f"{v:.2f}" for v in latencies)
        yield Failure(
            "scenario",
            f"voice-to-voice p95 within {budget:g} s",
            f"{measured:.2f} s (turns: {shown} s)",
        )
