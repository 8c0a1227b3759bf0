"""Results lost and spoken twice: what callers heard against what the server stored.

Every delivery the server stored for a soak conversation must end `delivered`, and its
caller must have heard it delivered exactly once across all of that conversation's calls.
Pure: the run collects the callers' logs and the server's records, `account` judges them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["CallLog", "SoakTally", "account"]


@dataclass
class CallLog:
    """What one call of one caller saw."""

    conversation: str
    seconds: float = 0.0  # connected
    talk_seconds: float = 0.0  # the caller's speech sent
    agent_seconds: float = 0.0  # agent audio received
    unanswered: bool = False  # spoke (and stayed), and the agent never answered
    turns: int = 0  # caller utterances sent
    barge_ins: int = 0
    hung_up_early: bool = False
    attempts: int = 0  # delivery attempts announced to the call
    delivered: list[str] = field(default_factory=list)  # ids reported delivered (final)
    talkover_ms: list[float] = field(default_factory=list)
    yield_ms: list[float] = field(default_factory=list)
    error: str = ""
    refused_busy: bool = False  # the server was at its limit: not admitted, not a failure


@dataclass
class SoakTally:
    """The run's accounting (see `account`)."""

    calls: int = 0
    refused_busy: int = 0  # calls the server refused busy (every admitted one must be answered)
    failed_calls: int = 0
    unanswered_calls: int = 0  # the caller spoke and heard no reply at all
    call_seconds: float = 0.0
    caller_talk_seconds: float = 0.0
    agent_talk_seconds: float = 0.0
    turns: int = 0
    barge_ins: int = 0
    hang_ups: int = 0
    delivery_attempts: int = 0
    deliveries: int = 0  # delivered outcomes heard by callers
    results: int = 0  # deliveries the server stored for the soak's conversations
    results_lost: int = 0  # stored, and at the end neither delivered nor held
    results_held: int = 0  # still held at the end: kept for the caller's next call
    results_spoken_twice: int = 0  # heard delivered more than once
    results_unconfirmed: int = 0  # delivered in the store, but no caller heard the outcome
    lost: list[str] = field(default_factory=list)
    held: list[str] = field(default_factory=list)
    twice: list[str] = field(default_factory=list)
    talkover_ms: list[float] = field(default_factory=list)
    yield_ms: list[float] = field(default_factory=list)
    failures: Counter[str] = field(default_factory=Counter)  # failed calls by error


def account(
    logs: Iterable[CallLog], stored: Mapping[str, Sequence[Mapping[str, Any]]]
) -> SoakTally:
    """Tally `logs` (every call of every caller) against `stored`: each conversation's
    delivery records from the server (`/api/deliveries?room=...`), read after the run."""
    tally = SoakTally()
    heard: Counter[str] = Counter()
    for log in logs:
        tally.calls += 1
        tally.refused_busy += log.refused_busy
        tally.failed_calls += bool(log.error)
        if log.error:
            tally.failures[log.error] += 1
        tally.unanswered_calls += log.unanswered
        tally.call_seconds += log.seconds
        tally.caller_talk_seconds += log.talk_seconds
        tally.agent_talk_seconds += log.agent_seconds
        tally.turns += log.turns
        tally.barge_ins += log.barge_ins
        tally.hang_ups += log.hung_up_early
        tally.delivery_attempts += log.attempts
        tally.deliveries += len(log.delivered)
        tally.talkover_ms.extend(log.talkover_ms)
        tally.yield_ms.extend(log.yield_ms)
        heard.update(log.delivered)
    tally.twice = sorted(delivery for delivery, times in heard.items() if times > 1)
    for records in stored.values():
        for record in records:
            tally.results += 1
            delivery_id = str(record["id"])
            if record["status"] == "held":
                # The product's promise for a caller who is not there (or a server that
                # could not serve them): the result waits for their next call, not lost.
                tally.held.append(delivery_id)
            elif record["status"] != "delivered":
                why = f": {record['error']}" if record.get("error") else ""
                tally.lost.append(f"{delivery_id} ({record['status']}{why})")
            elif delivery_id not in heard:
                tally.results_unconfirmed += 1
    tally.results_lost = len(tally.lost)
    tally.results_held = len(tally.held)
    tally.results_spoken_twice = len(tally.twice)
    return tally
