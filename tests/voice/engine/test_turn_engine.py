"""The turn state machine alone: inputs with times in, decisions out (no asyncio, no audio)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from voicehub.voice.engine.decisions import (
    AskEndOfTurn,
    CallerTurnCommitted,
    CallerTurnDropped,
    CallerTurnStarted,
    CallerWentQuiet,
    Decision,
    DropPreparedReply,
    FlushRecognizer,
    InterruptAgent,
    PauseAgent,
    PrepareReply,
    ResumeAgent,
)
from voicehub.voice.engine.turn_engine import (
    TurnEngine,
    TurnEngineSettings,
    TurnPhase,
    TurnPolicy,
    _Turn,
)
from voicehub.voice.turns.overlap import classify_overlap

VAD = TurnEngineSettings(policy=TurnPolicy("vad", vad_silence=0.65), prepare_replies=False)


def commits(decisions: list[Decision]) -> list[CallerTurnCommitted]:
    return [d for d in decisions if isinstance(d, CallerTurnCommitted)]


def kinds(decisions: list[Decision]) -> list[type]:
    return [type(d) for d in decisions]


def test_a_turn_commits_after_the_endpointing_delay_once_the_recognizer_finalized() -> None:
    engine = TurnEngine(VAD)
    assert kinds(engine.speech_started(1.0)) == [CallerTurnStarted]
    assert engine.transcript("please research", final=False, now=1.4) == []
    quiet = engine.speech_ended(2.0, ended_at=1.65)
    assert kinds(quiet) == [CallerWentQuiet, FlushRecognizer]
    assert engine.next_wake() == 2.0 + 2.0  # waits for the final (or its timeout)
    assert engine.transcript("please research solar panels", final=True, now=2.05) == []
    assert engine.next_wake() == 1.65 + 0.65
    assert engine.tick(2.29) == []
    [turn] = commits(engine.tick(2.31))
    assert (turn.text, turn.spoken, turn.speech_ended_at) == (
        "please research solar panels",
        True,
        1.65,
    )
    assert (turn.final_at, turn.committed_at, turn.continues) == (2.05, 2.31, None)
    assert not engine.caller_has_floor and engine.next_wake() is None


def test_speech_before_the_commit_continues_the_same_turn() -> None:
    engine = TurnEngine(VAD)
    engine.speech_started(0.0)
    engine.speech_ended(1.0)
    engine.transcript("could you research", final=True, now=1.05)
    assert kinds(engine.speech_started(1.2)) == []  # a pause, not a new turn
    engine.speech_ended(2.0)
    engine.transcript("heat pumps for me", final=True, now=2.05)
    [turn] = commits(engine.tick(2.65))
    assert turn.text == "could you research heat pumps for me" and turn.turn == 1


def test_a_turn_waits_for_the_final_of_every_flush_when_a_busy_recognizer_answers_late() -> None:
    engine = TurnEngine(VAD)
    engine.speech_started(0.0)
    engine.speech_ended(1.5, ended_at=1.15)  # a pause: flushed
    engine.speech_started(1.7)  # the caller goes on before the first final came
    engine.speech_ended(2.8, ended_at=2.45)  # flushed again
    # the first flush's final, answered 4 s late: the later words are still owed
    assert commits(engine.transcript("Please find out about.", final=True, now=6.9)) == []
    assert engine.awaiting_final  # (the driver holds its ticks while a final is owed)
    [turn] = commits(engine.transcript("wind turbines", final=True, now=8.0))
    assert turn.text == "Please find out about. wind turbines"


def test_sound_without_words_is_dropped() -> None:
    engine = TurnEngine(VAD)
    engine.speech_started(0.0)
    engine.speech_ended(0.2)
    engine.transcript("", final=True, now=0.25)
    assert kinds(engine.tick(0.86)) == [CallerTurnDropped]
    assert not engine.caller_has_floor


def test_a_recognizer_that_never_finalizes_holds_the_turn_at_most_final_timeout() -> None:
    engine = TurnEngine(TurnEngineSettings(final_timeout=1.5, prepare_replies=False))
    engine.speech_started(0.0)
    engine.transcript("book a table", final=False, now=0.5)
    engine.speech_ended(1.0)
    assert engine.tick(2.4) == []
    [turn] = commits(engine.tick(2.5))
    assert turn.text == "book a table"
    engine.speech_started(3.0)
    engine.speech_ended(3.5)
    assert kinds(engine.tick(5.0)) == [CallerTurnDropped]  # nothing heard at all


def test_words_ahead_of_the_vad_or_missed_by_it_make_a_turn() -> None:
    engine = TurnEngine(VAD)
    assert kinds(engine.transcript("hello", final=False, now=0.1)) == [CallerTurnStarted]
    assert kinds(engine.speech_started(0.2)) == []  # the VAD catches up: the same turn
    engine.speech_ended(1.0)
    engine.transcript("hello there", final=True, now=1.1)
    [turn] = commits(engine.tick(1.65))
    assert (turn.turn, turn.text) == (1, "hello there")
    late = engine.transcript("wait", final=True, now=5.0)  # a final the VAD never heard
    assert kinds(late) == [CallerTurnStarted]
    [turn] = commits(engine.tick(5.65))
    assert turn.text == "wait"


def test_a_typed_turn_commits_at_once_with_what_was_said_before_it() -> None:
    engine = TurnEngine(VAD)
    [turn] = commits(engine.typed("2", 1.0))
    assert (turn.text, turn.spoken, turn.speech_ended_at) == ("2", False, None)
    engine.speech_started(2.0)
    engine.transcript("my account number is", final=False, now=2.5)
    [turn] = commits(engine.typed("1234", 3.0))
    assert turn.text == "my account number is 1234"
    assert not engine.caller_has_floor


def voice(engine: TurnEngine, start: float, seconds: float) -> list[Decision]:
    """The caller's speech-like frames (20 ms each) from `start` for `seconds`."""
    out: list[Decision] = []
    for frame in range(round(seconds / 0.02)):
        out += engine.voiced(start + frame * 0.02)
    return out


def test_caller_speech_over_a_reply_pauses_it_once_voiced_long_enough_and_a_turn_stops_it() -> None:
    engine = TurnEngine(VAD)
    engine.agent_speaking("reply")
    assert voice(engine, 0.9, 0.1) == []  # ahead of the VAD: counted, nothing decided yet
    engine.speech_started(1.0)
    assert voice(engine, 1.0, 0.48) == []  # an acknowledgement's length: still playing
    assert voice(engine, 1.48, 0.04) == [PauseAgent("caller speech")]  # 0.6 s voiced
    # words that are no acknowledgement stop it at once, interim or not
    assert InterruptAgent in kinds(engine.transcript("what about wind", final=False, now=1.6))
    engine.speech_ended(2.0)
    engine.transcript("what about wind", final=True, now=2.05)
    [turn] = commits(engine.tick(2.65))
    assert turn.answer and turn.text == "what about wind"


def test_an_acknowledgement_over_the_agent_leaves_it_playing_and_is_not_answered() -> None:
    engine = TurnEngine(VAD)
    engine.agent_speaking("reply")
    engine.speech_started(1.0)
    assert voice(engine, 1.0, 0.4) == []  # "yeah": shorter than min_interruption
    assert engine.transcript("yeah", final=False, now=1.4) == []
    # the VAD's span runs on through its silence wait: no pause for that
    assert engine.tick(1.7) == [] and not engine.agent_paused
    engine.speech_ended(1.9, ended_at=1.45)
    decisions = engine.transcript("yeah", final=True, now=1.95) + engine.tick(2.2)
    assert kinds(decisions) == [CallerTurnDropped]  # nothing paused: nothing to resume
    assert not commits(decisions) and not engine.caller_has_floor
    # a long "mm-hm" pauses it; once it is known for one, the reply resumes
    engine.agent_speaking("reply")
    engine.speech_started(3.0)
    assert voice(engine, 3.0, 0.8) == [PauseAgent("caller speech")]
    engine.speech_ended(4.1, ended_at=3.8)
    decisions = engine.transcript("mm hmm", final=True, now=4.15) + engine.tick(4.5)
    assert kinds(decisions) == [CallerTurnDropped, ResumeAgent]
    # sounds far apart do not add up to an interruption, nor date a later turn
    engine.agent_speaking("reply")
    assert voice(engine, 5.0, 0.4) + voice(engine, 6.0, 0.4) == []
    engine.speech_started(8.0)  # a quiet voice: the VAD hears it, the evidence does not
    assert engine.next_wake() == 11.0


def test_interim_words_over_the_agent_wait_until_the_caller_spoke_longer_than_a_backchannel() -> (
    None
):
    engine = TurnEngine(VAD)
    engine.agent_speaking("delivery")
    assert voice(engine, 1.0, 0.3) == [PauseAgent("caller voice")]
    engine.speech_started(1.1)
    assert engine.transcript("a hook", final=False, now=1.3) == []  # an "uh-huh" misheard
    engine.speech_ended(1.8, ended_at=1.3)
    decisions = engine.transcript("uh huh", final=True, now=1.85) + engine.tick(2.5)
    assert kinds(decisions) == [CallerTurnDropped, ResumeAgent]  # the result goes on
    # voiced longer, the same kind of interim is a turn at once
    engine.agent_speaking("delivery")
    voice(engine, 3.0, 0.6)
    engine.speech_started(3.1)
    assert InterruptAgent in kinds(engine.transcript("what about wind", final=False, now=3.6))


def test_unsure_words_in_a_short_voice_over_the_agent_are_no_turn() -> None:
    engine = TurnEngine(VAD)
    engine.agent_speaking("reply")
    engine.speech_started(1.0)
    voice(engine, 1.0, 0.3)  # an "uh-huh" that Whisper heard as "you"
    engine.speech_ended(1.7, ended_at=1.3)
    decisions = engine.transcript("You", final=True, now=1.8, confidence=0.23)
    decisions += engine.tick(2.5)
    assert kinds(decisions) == [CallerTurnDropped]  # never paused: it just goes on
    # a hum heard as three words, unsurely: no turn either
    engine.agent_speaking("delivery")
    engine.speech_started(3.0)
    assert voice(engine, 3.0, 0.7) == [PauseAgent("caller voice")]
    engine.speech_ended(4.05, ended_at=3.7)
    decisions = engine.transcript("And the MHCM.", final=True, now=4.2, confidence=0.38)
    decisions += engine.tick(5.0)
    assert kinds(decisions) == [CallerTurnDropped, ResumeAgent]
    # the same words heard surely are a turn
    for words, sure, voiced in (("Why", 0.8, 0.3), ("And the MHCM.", 0.8, 0.7)):
        engine.agent_speaking("reply")
        engine.speech_started(6.0)
        voice(engine, 6.0, voiced)
        engine.speech_ended(6.0 + voiced + 0.4, ended_at=6.0 + voiced)
        heard = engine.transcript(words, final=True, now=6.5 + voiced, confidence=sure)
        assert InterruptAgent in kinds(heard), words
        [turn] = commits(engine.tick(8.0))
        assert turn.text == words and turn.answer


def test_a_stop_over_the_agent_stops_it_and_waits_for_the_caller() -> None:
    engine = TurnEngine(VAD)
    engine.agent_speaking("say")
    engine.speech_started(1.0)
    voice(engine, 1.0, 0.3)  # as short as an acknowledgement: its words decide
    assert InterruptAgent in kinds(engine.transcript("hold on", final=False, now=1.4))
    engine.speech_ended(1.8)
    engine.transcript("hold on", final=True, now=1.85)
    [turn] = commits(engine.tick(2.5))
    assert turn.text == "hold on" and not turn.answer  # recorded, not answered


def test_speech_too_long_for_an_acknowledgement_is_a_turn() -> None:
    engine = TurnEngine(VAD)
    engine.agent_speaking("delivery")
    engine.speech_started(1.0)
    assert voice(engine, 1.0, 1.48)[0] == PauseAgent("caller voice")
    assert kinds(voice(engine, 2.48, 0.02)) == [InterruptAgent]  # voiced 1.5 s: no "mm-hm"
    # a long "mm-hm" whose VAD span runs on (its silence wait, a busy machine) is not
    engine.agent_speaking("delivery")
    engine.speech_started(5.0)
    voice(engine, 5.0, 0.9)
    assert engine.tick(6.9) == []
    # a voice too quiet for the evidence: the VAD holding it 3 s is a turn
    engine = TurnEngine(VAD)
    engine.agent_speaking("reply")
    engine.speech_started(1.0)
    assert engine.next_wake() == 4.0
    assert kinds(engine.tick(4.0)) == [InterruptAgent]


def test_a_result_pauses_at_the_first_voiced_frame_and_resumes_after_a_noise() -> None:
    engine = TurnEngine(VAD)
    engine.agent_speaking("delivery")
    assert engine.voiced(5.0) == [PauseAgent("caller voice")]
    assert engine.voiced(5.02) == []
    assert engine.next_wake() == 5.02 + 0.5  # no speech came of it
    assert kinds(engine.tick(5.52)) == [ResumeAgent]
    # a cough the VAD took for speech: dropped, and the result goes on
    engine.agent_speaking("delivery")
    engine.voiced(7.0)
    engine.speech_started(7.05)
    engine.speech_ended(7.6, ended_at=7.25)
    decisions = engine.transcript("", final=True, now=7.65) + engine.tick(7.9)
    assert kinds(decisions) == [CallerTurnDropped, ResumeAgent]
    # a late final of earlier words cuts nothing until its turn commits
    engine.agent_speaking("delivery")
    late = engine.transcript("wait", final=True, now=9.0)
    assert InterruptAgent not in kinds(late) and PauseAgent not in kinds(late)
    assert InterruptAgent in kinds(engine.tick(9.65))  # a committed turn does


def test_a_reply_is_prepared_for_a_settled_turn_and_used_if_the_words_hold() -> None:
    engine = TurnEngine(TurnEngineSettings(policy=TurnPolicy("vad", vad_silence=0.65)))
    engine.speech_started(0.0)
    engine.speech_ended(1.35, ended_at=1.0)
    decisions = engine.transcript("what is the weather", final=True, now=1.4)
    assert PrepareReply(1, "what is the weather") in decisions
    [turn] = commits(engine.tick(1.65))
    assert turn.prepared
    # a turn that goes on drops what was prepared; its commit is not the prepared one
    engine.speech_started(3.0)
    engine.speech_ended(3.4, ended_at=3.1)
    assert PrepareReply(2, "tell me about") not in engine.transcript(
        "tell me about", final=True, now=3.45
    )  # half a request: nothing to prepare
    engine.speech_started(3.5)
    engine.speech_ended(4.0, ended_at=3.7)
    assert PrepareReply in kinds(engine.transcript("solar panels", final=True, now=4.05))
    assert DropPreparedReply in kinds(engine.speech_started(4.1))
    engine.speech_ended(4.5, ended_at=4.2)
    engine.transcript("please", final=True, now=4.55)
    [turn] = commits(engine.tick(4.9))
    assert turn.text == "tell me about solar panels please"
    assert turn.prepared  # prepared again, for the whole turn, once its words were in


def test_a_turn_committed_before_the_reply_was_heard_continues_that_turn() -> None:
    engine = TurnEngine(VAD)
    engine.speech_started(0.0)
    engine.speech_ended(1.0)
    engine.transcript("could you research", final=True, now=1.0)
    [first] = commits(engine.tick(1.65))
    engine.reply_started(first.turn, first.text)
    engine.speech_started(1.7)
    engine.speech_ended(2.0)
    engine.transcript("heat pumps", final=True, now=2.0)
    [second] = commits(engine.tick(2.65))
    assert (second.continues, second.text) == (first.turn, "could you research heat pumps")
    assert second.own_text == "heat pumps"  # the words said since (recorded as the turn)
    engine.reply_ended(first.turn)
    engine.reply_started(second.turn, second.text)
    engine.reply_heard()
    engine.agent_speaking("reply")
    engine.speech_started(3.0)
    engine.tick(3.3)
    engine.speech_ended(3.5)
    decisions = engine.transcript("thanks and one more thing", final=True, now=3.5)
    decisions += engine.tick(4.2)
    [third] = commits(decisions)
    assert third.continues is None and InterruptAgent in kinds(decisions)
    assert third.own_text == third.text == "thanks and one more thing"


def test_a_final_that_restates_the_interim_a_turn_was_committed_on_is_joined_once() -> None:
    # a recognizer far behind (a burst on a loaded server): the turn commits on its interim
    # after final_timeout, then its final says those words again with the rest
    engine = TurnEngine(
        TurnEngineSettings(policy=VAD.policy, final_timeout=1.0, prepare_replies=False)
    )
    engine.speech_started(0.0)
    engine.transcript("could you research", final=False, now=0.5)
    engine.speech_ended(1.0)
    [first] = commits(engine.tick(2.0))
    assert first.text == "could you research"
    engine.reply_started(first.turn, first.text)
    engine.transcript("could you research heat pumps for me please", final=True, now=2.2)
    [second] = commits(engine.tick(2.2 + 0.65))
    assert second.continues == first.turn
    assert second.text == "could you research heat pumps for me please"
    assert second.own_text == "heat pumps for me please"  # not the restated words again


def test_an_interim_arriving_after_final_timeout_does_not_end_the_turn_under_its_final() -> None:
    # a starved recognizer: nothing for seconds after the flush, then its interims and final
    # all at once. The driver holds ticks while the final is owed; an interim must not
    # commit the turn on the way (its final would then stand as a second turn)
    engine = TurnEngine(
        TurnEngineSettings(policy=VAD.policy, final_timeout=1.0, prepare_replies=False)
    )
    engine.speech_started(0.0)
    engine.speech_ended(1.0)
    assert not commits(engine.transcript("laser", final=False, now=4.0))
    assert not commits(engine.transcript("please research solar", final=False, now=4.0))
    [turn] = commits(engine.transcript("please research solar panels", final=True, now=4.5))
    assert turn.text == "please research solar panels" and turn.continues is None
    # with no final at all, the tick past the deadline commits what was heard
    engine.speech_started(6.0)
    engine.transcript("and wind", final=False, now=6.5)
    engine.speech_ended(7.0)
    [late] = commits(engine.tick(8.0))
    assert late.text == "and wind"


def test_a_reply_whose_tools_ran_is_never_continued() -> None:
    engine = TurnEngine(VAD)
    engine.typed("research solar", 0.0)
    engine.reply_started(1, "research solar")
    engine.reply_used_tools()
    [turn] = commits(engine.typed("and wind", 1.0))
    assert turn.continues is None and turn.text == "and wind"


def test_model_mode_commits_at_once_when_complete_and_waits_when_not() -> None:
    engine = TurnEngine(TurnEngineSettings(policy=TurnPolicy("model", max_silence=2.0)))
    engine.speech_started(0.0)
    quiet = engine.speech_ended(1.35, ended_at=1.0)
    assert AskEndOfTurn(1) in quiet
    engine.transcript("what is the weather", final=True, now=1.4)
    [turn] = commits(engine.end_of_turn(1, 0.9, 1.42))
    assert turn.committed_at == 1.42

    engine.speech_started(5.0)
    engine.speech_ended(6.35, ended_at=6.0)
    engine.transcript("what is the weather in paris", final=True, now=6.4)
    assert commits(engine.end_of_turn(2, 0.1, 6.45)) == []  # incomplete: the caller may go on
    assert engine.next_wake() == 8.0  # the ceiling, from the end of the speech
    [turn] = commits(engine.tick(8.0))
    assert turn.text == "what is the weather in paris"

    engine.speech_started(10.0)
    engine.speech_ended(10.35, ended_at=10.0)
    engine.transcript("I want to know about", final=True, now=10.4)
    assert commits(engine.end_of_turn(3, 0.95, 10.45)) == []  # words stop mid-request
    [turn] = commits(engine.tick(12.0))
    assert turn.text == "I want to know about"


def test_words_that_make_a_whole_request_hold_an_unfinished_sounding_turn_only_briefly() -> None:
    engine = TurnEngine(
        TurnEngineSettings(policy=TurnPolicy("model", max_silence=2.0)),
        words_complete=lambda text: "library" in text.lower(),
    )
    engine.speech_started(0.0)
    assert AskEndOfTurn(1) in engine.speech_ended(1.25, ended_at=1.0)
    engine.transcript("Tell me the opening hours of the library,", final=True, now=1.3)
    assert commits(engine.end_of_turn(1, 0.2, 1.35)) == []  # the model says unfinished
    assert engine.next_wake() == pytest.approx(1.4)  # complete_silence, not the ceiling
    [turn] = commits(engine.tick(1.4))
    assert turn.text == "Tell me the opening hours of the library,"

    engine.speech_started(5.0)  # words no rule takes wait for the ceiling, as before
    engine.speech_ended(6.35, ended_at=6.0)
    engine.transcript("My robber,", final=True, now=6.4)
    assert commits(engine.end_of_turn(2, 0.2, 6.45)) == []
    assert engine.next_wake() == 8.0


def test_settings_are_checked() -> None:
    bad: list[dict[str, Any]] = [
        {"final_timeout": -1},
        {"min_interruption": -0.1},
        {"sure_overlap": -0.5},
    ]
    for fields in bad:
        try:
            TurnEngineSettings(**fields)
        except ValueError as error:
            assert next(iter(fields)) in str(error)
        else:
            raise AssertionError(f"{fields} accepted")


# -- properties -----------------------------------------------------------------------------

WORDS = st.sampled_from(["", "yes", "could you research", "heat pumps", "for me please"])
Step = tuple[str, float, str]
STEPS = st.lists(
    st.tuples(
        st.sampled_from(
            ["start", "end", "interim", "final", "typed", "voiced", "tick", "agent", "quiet"]
        ),
        st.floats(min_value=0.0, max_value=1.5),
        WORDS,
    ),
    max_size=40,
)


def run(steps: list[Step], settings_: TurnEngineSettings, offset: float = 0.0) -> list[Decision]:
    """Feed `steps` (input, time since the previous one, words), then let the caller fall
    silent and time pass until nothing is left to decide."""
    engine = TurnEngine(settings_)
    now = offset
    out: list[Decision] = []
    for name, gap, words in steps:
        now += gap
        wake = engine.next_wake()
        if wake is not None and wake <= now:
            out += engine.tick(wake)
        if name == "start":
            out += engine.speech_started(now)
        elif name == "end":
            out += engine.speech_ended(now)
        elif name == "interim":
            out += engine.transcript(words, final=False, now=now)
        elif name == "final":
            out += engine.transcript(words, final=True, now=now)
        elif name == "typed" and words:
            out += engine.typed(words, now)
        elif name == "voiced":
            out += engine.voiced(now)
        elif name == "agent":
            engine.agent_speaking("delivery" if words else "reply")
        elif name == "quiet":
            engine.agent_speaking(None)
        else:
            out += engine.tick(now)
    out += engine.speech_ended(now + 0.1)
    while (wake := engine.next_wake()) is not None:
        out += engine.tick(wake)
    assert not engine.caller_has_floor, "a turn was left open"
    return out


def _turn_words(steps: list[Step]) -> list[str]:
    """The words every final and typed turn must commit: all of them, except a final heard
    over the agent that is an acknowledgement or a stop phrase ("yes", "okay"), which the
    engine takes as one (`classify_overlap`), not as a turn."""
    agent_speaking = False
    words: list[str] = []
    for name, _, said in steps:
        if name == "agent":
            agent_speaking = True
        elif name == "quiet":
            agent_speaking = False
        elif name == "typed" and said:
            words.append(said)
        elif name == "final" and said:
            over = classify_overlap(said, voiced_seconds=0.0, final=True)
            if not (agent_speaking and over.kind != "turn"):
                words.append(said)
    return words


@settings(max_examples=300, deadline=None)
@given(STEPS, st.sampled_from(["vad", "model"]))
def test_every_word_heard_is_committed_once_in_order(steps: list[Step], mode: str) -> None:
    settings_ = TurnEngineSettings(policy=TurnPolicy(mode))  # type: ignore[arg-type]
    heard = _turn_words(steps)
    committed = " ".join(c.text for c in commits(run(steps, settings_)))
    position = 0
    for words in heard:  # every final and typed turn, in order, within the commits
        found = committed.find(words, position)
        assert found >= 0, (words, committed)
        position = found + len(words)
    assert all(c.text for c in commits(run(steps, settings_)))  # no empty turn committed


@settings(max_examples=200, deadline=None)
@given(STEPS, st.floats(min_value=0.0, max_value=1e6))
def test_decisions_depend_on_the_inputs_not_on_when_they_run(
    steps: list[Step], offset: float
) -> None:
    first = run(steps, TurnEngineSettings())
    shifted = run(steps, TurnEngineSettings(), offset)

    def unshift(decision: Decision) -> Decision:
        if isinstance(decision, CallerTurnCommitted):
            return replace(decision, speech_ended_at=None, final_at=None, committed_at=0.0)
        return decision

    assert [unshift(d) for d in first] == [unshift(d) for d in shifted]
    assert first == run(steps, TurnEngineSettings())  # the same inputs, the same decisions


def test_the_callers_phase_follows_the_turn() -> None:
    engine = TurnEngine(VAD)
    assert engine.caller_phase == "listening"
    engine.speech_started(0.0)
    assert engine.caller_phase == "speaking"
    engine.speech_ended(1.0)
    engine.transcript("hello", final=True, now=1.0)
    assert engine.caller_phase == "quiet"
    engine.speech_started(1.2)  # a pause inside the turn
    assert engine.caller_phase == "speaking"
    engine.speech_ended(1.5)
    engine.transcript("there", final=True, now=1.5)
    assert commits(engine.tick(2.2)) and engine.caller_phase == "listening"


@pytest.mark.parametrize(
    ("start", "to", "allowed"),
    [
        ("speaking", "quiet", True),
        ("speaking", "speaking", True),
        ("speaking", "dropped", True),
        ("speaking", "committed", False),  # a turn is committed once it went quiet
        ("quiet", "speaking", True),
        ("quiet", "committed", True),
        ("quiet", "dropped", True),
        ("quiet", "quiet", False),
        ("committed", "speaking", False),
        ("committed", "dropped", False),
        ("dropped", "quiet", False),
        ("dropped", "committed", False),
    ],
)
def test_a_turns_phases_move_only_as_declared(
    start: TurnPhase, to: TurnPhase, allowed: bool
) -> None:
    turn = _Turn(1, start)
    if allowed:
        turn.move(to)
        assert turn.phase == to
    else:
        with pytest.raises(RuntimeError, match=f"from {start} to {to}"):
            turn.move(to)
