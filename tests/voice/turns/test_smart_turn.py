"""Smart Turn v3.2 run locally: hash-checked, batched, and the turn policy's decision on its
answer for complete and cut-off requests (committed speech; the model's quality is the
`turns.model` bench's figures)."""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from tests.support.speech import floats, spoken
from voicehub.voice.turns import setup
from voicehub.voice.turns.log_mel import WINDOW_SAMPLES, fit_window, log_mel_batch
from voicehub.voice.turns.policy import (
    Commit,
    TurnDecision,
    TurnEvidence,
    TurnSettings,
    WakeAt,
    decide,
)
from voicehub.voice.turns.smart_turn import (
    SmartTurnModel,
    TurnModelError,
    check_model_file,
    model_file,
)

RATE = 16000


def then_silence(audio: np.ndarray, seconds: float = 0.2) -> np.ndarray:
    return np.concatenate([audio, np.zeros(round(seconds * RATE), dtype=np.float32)])


@pytest.fixture(scope="module")
def model() -> SmartTurnModel:
    return SmartTurnModel.load()


# Requests said with a comma where a caller might hesitate: the words before it are a half
# request (with the voice's continuing intonation), the whole is a complete one.
HESITATIONS = (
    "I would like you to, um, research electric cars",
    "I want to know more about, heat pumps",
    "so what I really want is, a report on heat pumps",
)


@pytest.fixture(scope="module")
def utterances() -> list[tuple[np.ndarray, np.ndarray]]:
    """(the words before the comma, the whole request) of each hesitation, each then 0.2 s
    of silence (the policy's `model_silence`)."""
    return [
        (
            then_silence(floats(spoken(text, form="before_comma"))),
            then_silence(floats(spoken(text))),
        )
        for text in HESITATIONS
    ]


def turn_after(probability: float) -> TurnDecision:
    """What the turn policy decides with the model's answer in, the words not open."""
    evidence = TurnEvidence(
        speech_ended_at=0.0, words_open=False, asked=True, probability=probability
    )
    return decide(evidence, TurnSettings(), now=TurnSettings().model_silence)


def test_a_cut_off_request_waits_and_a_complete_one_ends_the_turn(
    model: SmartTurnModel, utterances: list[tuple[np.ndarray, np.ndarray]]
) -> None:
    cut = model.probabilities([c for c, _ in utterances])
    whole = model.probabilities([w for _, w in utterances])
    for text, p_cut, p_whole in zip(HESITATIONS, cut, whole, strict=True):
        assert isinstance(turn_after(p_cut), WakeAt), (text, p_cut)
        assert turn_after(p_whole) == Commit("model"), (text, p_whole)


def test_asked_early_in_the_silence_the_model_decides_as_at_the_end_of_speech(
    model: SmartTurnModel,
) -> None:
    # `EarlyAsk` starts the model at `model_early` (0.1 s) of silence; the policy asks at
    # `model_silence` (0.2 s): the early answer stands for the later one
    early = TurnSettings().model_early
    assert early is not None and early < TurnSettings().model_silence
    for text in HESITATIONS:
        for form in ("before_comma", None):
            speech = floats(spoken(text, form=form)) if form else floats(spoken(text))
            at_early, at_end = model.probabilities(
                [then_silence(speech, early), then_silence(speech)]
            )
            assert turn_after(at_early) == turn_after(at_end), (text, form, at_early, at_end)


@pytest.mark.slow
async def test_requests_of_many_calls_share_one_batch_off_the_loop(
    model: SmartTurnModel, utterances: list[tuple[np.ndarray, np.ndarray]]
) -> None:
    audio = [a for pair in utterances for a in pair]
    alone = model.probabilities(audio[:1])
    before = model.stats.batches
    # one request first (it runs at once on an idle model), then the rest arrive while it
    # runs: they wait and go through together
    answers = await asyncio.gather(*(model.completion_probability(a) for a in audio))
    batches = model.stats.batches - before
    assert batches == 2  # the first alone, the others in one run
    assert model.stats.sizes[-2:] == [1, len(audio) - 1]
    expected = model.probabilities(audio)
    assert np.allclose(answers, expected, atol=1e-4)
    assert answers[0] == pytest.approx(alone[0], abs=1e-4)


async def test_bad_audio_is_refused_with_a_clear_error(model: SmartTurnModel) -> None:
    with pytest.raises(ValueError, match="one-dimensional"):
        await model.completion_probability(np.zeros((2, 160), dtype=np.float32))
    with pytest.raises(ValueError, match="float32"):
        await model.completion_probability(np.zeros(160, dtype=np.int16))  # type: ignore[arg-type]


def test_the_model_file_is_checked_against_its_hash(tmp_path: Path) -> None:
    assert check_model_file(model_file()) == model_file()
    altered = tmp_path / "smart-turn-v3.2-cpu.onnx"
    altered.write_bytes(model_file().read_bytes()[:-1] + b"\x00")
    with pytest.raises(TurnModelError, match="does not match the pinned hash") as error:
        SmartTurnModel.load(altered)
    assert str(altered) in str(error.value)
    with pytest.raises(TurnModelError, match="is missing"):
        check_model_file(tmp_path / "gone.onnx")


def test_a_desk_falls_back_to_vad_turns_with_a_warning_when_the_model_cannot_load(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(setup, "turn_model_unavailable", lambda: "pipecat-ai is not installed")
    with caplog.at_level(logging.WARNING, logger="voicehub.voice"):
        chosen = setup.turn_setup("model", 1.5, owner="desk 'research'")
    assert chosen.model is None
    assert chosen.settings.mode == "vad" and chosen.settings.max_silence == 1.5
    assert "desk 'research': turn 'model' falls back to VAD-only turns" in caplog.text
    assert "pipecat-ai is not installed" in caplog.text
    assert setup.turn_setup("vad", 2.0, owner="x").model is None


def test_features_match_faster_whispers_extractor() -> None:
    """The batched features are Whisper's: faster-whisper's extractor on the same 8 s
    (scaled first, as Smart Turn's training did), for a short padded utterance and for
    audio longer than the window."""
    from faster_whisper.feature_extractor import FeatureExtractor

    extractor = FeatureExtractor(feature_size=80)
    short = floats(spoken("could you research heat pumps"))
    noise = np.random.default_rng(1).standard_normal(9 * RATE).astype(np.float32) * 0.1
    windows = np.stack([fit_window(short), fit_window(noise)])
    ours = log_mel_batch(windows)
    assert ours.shape == (2, 80, 800)
    for row, window in enumerate(windows):
        scaled = (window - window.mean()) / np.sqrt(window.var() + 1e-7)
        reference = extractor(scaled, padding=0)[:, :800]
        assert np.abs(ours[row] - reference).max() < 1e-4
    assert np.array_equal(log_mel_batch(windows[:1])[0], ours[0])  # rows do not mix
    with pytest.raises(ValueError, match=str(WINDOW_SAMPLES)):
        log_mel_batch(np.zeros((1, 100), dtype=np.float32))
