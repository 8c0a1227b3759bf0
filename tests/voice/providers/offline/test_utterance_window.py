"""The utterance window of a whole-utterance recognizer: which audio is decoded, and when a
decoding can start before the flush (sans-I/O, no audio models)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from voicehub.voice.providers.offline.utterance_window import (
    Interim,
    Pause,
    UtteranceWindow,
    window_of,
)

SPEECH, QUIET = True, False


def frame(index: int) -> bytes:
    return index.to_bytes(4, "big")  # each frame tells where it was in the stream


def feed(window: UtteranceWindow, pattern: str, first: int = 0) -> list[object]:
    """Push one frame per character: "s" speech, "." silence; return the actions."""
    actions = []
    for offset, mark in enumerate(pattern):
        action = window.push(frame(first + offset), mark == "s")
        if action is not None:
            actions.append(action)
    return actions


def indexes(audio: bytes) -> list[int]:
    return [int.from_bytes(audio[i : i + 4], "big") for i in range(0, len(audio), 4)]


def test_the_window_runs_from_the_pre_roll_to_the_tail_after_the_last_speech() -> None:
    window = UtteranceWindow(pre_roll=0.1, tail=0.06, min_speech=0.04, interim_every=None)
    feed(window, ".........ssss....ss........")
    final = window.flush()
    assert final is not None
    # 5 frames of pre-roll before the speech that opened it (at 9), a tail of 3 after the
    # last speech frame (18)
    assert (final.start, final.end) == (4, 22)
    assert indexes(final.audio) == list(range(4, 22))


def test_a_pause_decodes_exactly_the_window_the_flush_will_ask_for() -> None:
    window = UtteranceWindow(pre_roll=0.1, tail=0.06, interim_every=None)
    actions = feed(window, "....ssssssss..........")
    pauses = [a for a in actions if isinstance(a, Pause)]
    assert len(pauses) == 1
    final = window.flush()
    assert final is not None and pauses[0].window == final
    assert pauses[0].window.key == final.key


def test_speech_after_a_pause_makes_the_earlier_decoding_an_interim_only() -> None:
    window = UtteranceWindow(pre_roll=0.1, tail=0.06, interim_every=None)
    first = feed(window, "..ssss....")
    second = feed(window, "sss.....", first=10)
    final = window.flush()
    assert final is not None
    assert [type(a) for a in first + second] == [Pause, Pause]
    assert first[0].window.key != final.key  # type: ignore[attr-defined]
    assert second[0].window.key == final.key  # type: ignore[attr-defined]
    assert final.start == first[0].window.start  # type: ignore[attr-defined]


def test_a_flush_before_the_tail_has_passed_cuts_the_window_at_the_flush() -> None:
    window = UtteranceWindow(tail=0.2, interim_every=None)
    feed(window, "ssssss..")
    final = window.flush()
    assert final is not None and final.end == 8


def test_interims_come_every_so_much_speech() -> None:
    window = UtteranceWindow(pre_roll=0.02, tail=0.06, interim_every=0.1, min_speech=0.02)
    actions = feed(window, "sssssssssssss")
    interims = [a for a in actions if isinstance(a, Interim)]
    assert [a.window.end for a in interims] == [5, 10]


def test_no_speech_no_window_and_blips_shorter_than_min_speech_open_nothing() -> None:
    window = UtteranceWindow(min_speech=0.06)
    assert feed(window, "....s...ss....") == []
    assert window.flush() is None
    assert not window.open


def test_each_flush_starts_a_new_utterance() -> None:
    window = UtteranceWindow(interim_every=None, pre_roll=0.04, tail=0.04)
    feed(window, "..sss...")
    one = window.flush()
    feed(window, "..ssss..", first=8)
    two = window.flush()
    assert one is not None and two is not None
    assert (one.utterance, two.utterance) == (0, 1)
    assert two.start == 8 and indexes(two.audio)[0] == 8


def test_a_stretch_nobody_flushed_is_forgotten_when_speech_starts_long_after() -> None:
    window = UtteranceWindow(forget_after=0.2, pre_roll=0.04, tail=0.04, interim_every=None)
    feed(window, "ssss" + "." * 20)  # noise the session's VAD did not take for speech
    feed(window, "ssss..", first=24)
    final = window.flush()
    assert final is not None and final.start == 22  # the new speech and its pre-roll only


def test_the_window_keeps_at_most_max_seconds() -> None:
    window = UtteranceWindow(max_seconds=0.2, pre_roll=0.02, tail=0.02, interim_every=None)
    feed(window, "s" * 50)
    final = window.flush()
    assert final is not None and final.end - final.start == 10 and final.end == 50


@given(st.lists(st.booleans(), min_size=1, max_size=300))
def test_the_final_window_does_not_depend_on_when_decodings_ran(pattern: list[bool]) -> None:
    frames = [frame(i) for i in range(len(pattern))]
    final = window_of(frames, pattern, interim_every=0.2)
    window = UtteranceWindow(interim_every=0.2)
    pauses = []
    for data, speech in zip(frames, pattern, strict=True):
        action = window.push(data, speech)
        if isinstance(action, Pause):
            pauses.append(action.window)
    assert window.flush() == final
    if final is not None:
        assert final.end <= len(pattern) and final.start >= 0
        assert indexes(final.audio) == list(range(final.start, final.end))
        # a pause decoding is reusable exactly when nothing was heard after it
        if pauses and pattern[pauses[-1].end - 1 :].count(SPEECH) == 0:
            assert pauses[-1] == final


@pytest.mark.parametrize("quiet_before", [0, 130])  # 130: the replay log restarted twice
def test_a_late_flush_ends_the_utterance_where_the_vad_decided_not_where_the_stream_is(
    quiet_before: int,
) -> None:
    window = UtteranceWindow(pre_roll=0.04, tail=0.04, interim_every=None, min_speech=0.04)
    feed(window, "." * quiet_before)
    q = quiet_before
    # "find out about", a pause, "wind turbines": the VAD's end (frame 12) is known late
    feed(window, "..ssssss......ssss", first=q)
    late, ahead = window.flush_at(q + 12)
    assert late is not None and (late.start, late.end) == (q, q + 10)
    assert ahead == []  # the words after the pause are still going
    feed(window, "ss...", first=q + 18)
    after = window.flush()
    assert after is not None and indexes(after.audio) == list(range(q + 12, q + 22))
    assert after.utterance == late.utterance + 1


@given(
    st.lists(st.booleans(), min_size=1, max_size=300),
    st.integers(min_value=0, max_value=320),
    st.lists(st.booleans(), max_size=60),
)
def test_a_late_flush_gives_what_a_flush_in_time_would_have(
    pattern: list[bool], at: int, more: list[bool]
) -> None:
    frames = [frame(i) for i in range(len(pattern) + len(more))]
    late = UtteranceWindow(interim_every=0.2)
    for data, speech in zip(frames, pattern, strict=False):
        late.push(data, speech)
    window, actions = late.flush_at(at)
    actions += [
        a for d, s in zip(frames[len(pattern) :], more, strict=True) if (a := late.push(d, s))
    ]

    cut = min(at, len(pattern))
    timely = UtteranceWindow(interim_every=0.2)
    for data, speech in zip(frames[:cut], pattern[:cut], strict=True):
        timely.push(data, speech)
    expected = timely.flush()
    rest = list(zip(frames[cut:], pattern[cut:] + more, strict=True))
    expected_actions = [a for d, s in rest if (a := timely.push(d, s))]
    assert window == expected
    assert actions == expected_actions
    assert late.flush() == timely.flush()
