"""The turn policy: a pure decision, property-tested on a virtual clock."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from voicehub.voice.turns.policy import (
    AskModel,
    Commit,
    Listen,
    TurnDecision,
    TurnEvidence,
    TurnSettings,
    WakeAt,
    decide,
)

times = st.floats(min_value=0, max_value=1e6, allow_nan=False, allow_infinity=False)
silences = st.floats(min_value=0, max_value=10, allow_nan=False, allow_infinity=False)
probabilities = st.floats(min_value=0, max_value=1, allow_nan=False)
settings_of = st.builds(
    TurnSettings,
    mode=st.sampled_from(["model", "vad"]),
    vad_silence=st.floats(min_value=0.1, max_value=1.0),
    model_silence=st.floats(min_value=0.05, max_value=0.6),
    threshold=probabilities,
    max_silence=st.floats(min_value=1.0, max_value=5.0),
    complete_silence=st.floats(min_value=0.05, max_value=6.0),
)


def run_turn(
    settings: TurnSettings,
    *,
    words_open: bool | None,
    probability: float,
    latency: float,
    words_at: float = 0.0,
    words_complete: bool = False,
) -> tuple[float, str]:
    """Drive the policy as the engine would, on a virtual clock, for a caller who stopped
    at t=0 and stays silent: the model answers `latency` s after it is asked, the words
    arrive at `words_at` (making a whole request when `words_complete`). Returns when and
    why the turn was committed."""
    now, asked_at, answer = 0.0, None, None
    for _ in range(100):
        known = words_open if now >= words_at else None
        if asked_at is not None and now >= asked_at + latency:
            answer = probability
        evidence = TurnEvidence(
            0.0,
            known,
            asked=asked_at is not None,
            probability=answer,
            words_complete=words_complete and known is False,
        )
        decision = decide(evidence, settings, now)
        if isinstance(decision, Commit):
            return now, decision.reason
        if isinstance(decision, AskModel):
            asked_at = now
            continue
        assert isinstance(decision, WakeAt)
        assert decision.time > now  # every wait moves the clock on
        # new evidence may come before the wake-up: the engine decides again then
        answer_at = asked_at + latency if asked_at is not None else math.inf
        events = [t for t in (words_at, answer_at) if now < t]
        now = min([decision.time, *events])
    raise AssertionError("the policy never committed")


@given(settings=settings_of, now=times, silence=silences)
def test_nothing_is_decided_while_the_caller_speaks(
    settings: TurnSettings, now: float, silence: float
) -> None:
    assert decide(TurnEvidence(None), settings, now) == Listen()
    assert decide(TurnEvidence(None, True, True, 1.0), settings, now) == Listen()


@given(
    settings=settings_of,
    ended=times,
    silence=silences,
    words_open=st.sampled_from([None, True, False]),
    asked=st.booleans(),
    probability=st.none() | probabilities,
)
def test_decisions_depend_only_on_their_arguments_and_respect_the_ceiling(
    settings: TurnSettings,
    ended: float,
    silence: float,
    words_open: bool | None,
    asked: bool,
    probability: float | None,
) -> None:
    evidence = TurnEvidence(ended, words_open, asked, probability)
    now = ended + silence
    decision: TurnDecision = decide(evidence, settings, now)
    assert decide(evidence, settings, now) == decision  # deterministic: no hidden state
    if now >= ended + settings.max_silence:
        assert isinstance(decision, Commit)  # nobody waits past the ceiling
    if isinstance(decision, WakeAt):
        assert now < decision.time <= ended + settings.max_silence
    if settings.mode == "vad":
        assert isinstance(decision, Commit) == (now >= ended + settings.vad_silence)
        assert not isinstance(decision, AskModel)
    early = isinstance(decision, Commit) and now < ended + settings.max_silence
    if early and settings.mode == "model":
        # before the ceiling only the model commits, and only with words that are not open
        assert isinstance(decision, Commit)
        assert decision.reason == "model" and words_open is False
        assert probability is not None and probability >= settings.threshold


@given(
    settings=settings_of,
    ended=times,
    silence=silences,
    words_open=st.sampled_from([None, True, False]),
    asked=st.booleans(),
    probability=st.none() | probabilities,
)
def test_whole_request_words_commit_only_closed_and_not_before_complete_silence(
    settings: TurnSettings,
    ended: float,
    silence: float,
    words_open: bool | None,
    asked: bool,
    probability: float | None,
) -> None:
    evidence = TurnEvidence(ended, words_open, asked, probability, words_complete=True)
    now = ended + silence
    decision = decide(evidence, settings, now)
    without = decide(TurnEvidence(ended, words_open, asked, probability), settings, now)
    if isinstance(decision, Commit) and decision.reason == "words":
        assert settings.mode == "model" and asked and words_open is False
        assert now >= ended + settings.complete_silence
        assert probability is None or probability < settings.threshold
    else:  # where the rule does not commit, it changes nothing but an earlier wake-up
        assert decision == without or (
            isinstance(decision, WakeAt)
            and decision.time == ended + settings.complete_silence
            and without == WakeAt(ended + settings.max_silence)
        )


@given(
    settings=settings_of.filter(lambda s: s.mode == "model"),
    probability=probabilities,
    latency=st.floats(min_value=0, max_value=0.5),
    words_at=st.floats(min_value=0, max_value=3),
    words_open=st.booleans(),
)
def test_every_turn_is_committed_by_the_ceiling_and_open_words_wait_for_it(
    settings: TurnSettings,
    probability: float,
    latency: float,
    words_at: float,
    words_open: bool,
) -> None:
    at, reason = run_turn(
        settings, words_open=words_open, probability=probability, latency=latency,
        words_at=words_at,
    )  # fmt: skip
    assert at <= settings.max_silence
    complete = probability >= settings.threshold
    if words_open or not complete:
        assert (at, reason) == (settings.max_silence, "ceiling")
    else:
        assert reason in ("model", "ceiling")
        expected = max(settings.model_silence + latency, words_at)
        assert at == pytest.approx(min(expected, settings.max_silence))


def test_a_complete_utterance_commits_soon_after_the_model_answers() -> None:
    settings = TurnSettings()  # the defaults
    at, reason = run_turn(settings, words_open=False, probability=0.93, latency=0.06)
    assert reason == "model" and at == pytest.approx(0.26)
    at, reason = run_turn(settings, words_open=False, probability=0.2, latency=0.06)
    assert (at, reason) == (2.0, "ceiling")
    at, reason = run_turn(settings, words_open=True, probability=0.99, latency=0.06)
    assert (at, reason) == (2.0, "ceiling")  # "could you research": the words say wait
    at, reason = run_turn(TurnSettings("vad"), words_open=True, probability=0, latency=0)
    assert (at, reason) == (0.65, "silence")


@pytest.mark.parametrize(
    ("words_open", "words_complete", "probability", "latency", "expected"),
    [
        # "tell me the opening hours of the library," (a comma; the model says unfinished)
        (False, True, 0.2, 0.06, (0.4, "words")),
        (False, True, 0.93, 0.06, (0.26, "model")),  # the model says complete first
        (False, True, 0.9, 1.0, (0.4, "words")),  # a late answer: the words do not wait on it
        (False, False, 0.2, 0.06, (2.0, "ceiling")),  # "my robber,": no request of the desk's
        (True, True, 0.2, 0.06, (2.0, "ceiling")),  # open words win: "research solar ... for"
    ],
)
def test_words_that_make_a_whole_request_wait_for_the_model_only_briefly(
    words_open: bool,
    words_complete: bool,
    probability: float,
    latency: float,
    expected: tuple[float, str],
) -> None:
    at, reason = run_turn(
        TurnSettings(),  # the defaults: the model asked at 0.2 s, complete_silence 0.4 s
        words_open=words_open,
        probability=probability,
        latency=latency,
        words_complete=words_complete,
    )
    assert (round(at, 6), reason) == expected


def test_the_model_is_asked_once_per_silence() -> None:
    settings = TurnSettings()
    assert decide(TurnEvidence(0.0, False), settings, 0.1) == WakeAt(0.2)
    assert decide(TurnEvidence(0.0, False), settings, 0.2) == AskModel()
    assert decide(TurnEvidence(0.0, False, asked=True), settings, 0.25) == WakeAt(2.0)
    assert decide(TurnEvidence(0.0, None, True, 0.9), settings, 0.3) == WakeAt(2.0)
    assert decide(TurnEvidence(0.0, False, True, 0.9), settings, 0.3) == Commit("model")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"mode": "smart"}, "turn mode 'smart'"),
        ({"max_silence": 0}, "max_silence must be a positive number"),
        ({"vad_silence": math.inf}, "vad_silence must be a positive number"),
        ({"threshold": 1.5}, "threshold must be within"),
        ({"model_silence": 3.0}, "model_silence (3.0) must not exceed max_silence"),
        ({"vad_silence": 2.5}, "vad_silence (2.5) must not exceed max_silence"),
        ({"model_early": 0}, "model_early must be None or a positive number"),
        ({"model_early": math.nan}, "model_early must be None or a positive number"),
        ({"complete_silence": -1.0}, "complete_silence must be a positive number"),
    ],
)
def test_settings_are_checked(options: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        TurnSettings(**options)  # type: ignore[arg-type]
