"""The end-of-turn model started at a pause inside the caller's speech (`EarlyAsk`): one
inference per pause, dropped when the caller speaks on, taken by the ask at the end."""

from __future__ import annotations

import asyncio

import numpy as np
import numpy.typing as npt
import pytest

from voicehub.voice.turns.early import EarlyAsk


class Model:
    """An end-of-turn model whose answers the test gives (`answer`), counting its asks."""

    def __init__(self) -> None:
        self.asked: list[int] = []  # the length of the audio of each ask
        self.answers: list[asyncio.Future[float]] = []

    async def completion_probability(self, audio: npt.NDArray[np.float32]) -> float:
        self.asked.append(len(audio))
        answer: asyncio.Future[float] = asyncio.get_running_loop().create_future()
        self.answers.append(answer)
        return await answer


class Audio:
    """The caller's audio so far: `seconds` of it at 16 kHz."""

    def __init__(self) -> None:
        self.seconds = 1.0

    def __call__(self) -> npt.NDArray[np.float32]:
        return np.zeros(round(self.seconds * 16000), dtype=np.float32)


async def settle() -> None:
    for _ in range(3):
        await asyncio.sleep(0)


async def test_the_ask_at_the_end_takes_the_inference_started_at_the_pause() -> None:
    model, audio = Model(), Audio()
    early = EarlyAsk(model, audio)
    early.paused(True)
    audio.seconds = 1.1  # the caller stays silent: the VAD ends the speech
    early.paused(True)  # the same pause: no second inference
    await settle()
    assert model.asked == [16000]
    taken = early.take()
    assert taken is not None
    model.answers[0].set_result(0.93)
    assert await taken == 0.93
    assert (early.started, early.used) == (1, 1)
    assert early.take() is None  # taken once


async def test_speech_after_the_pause_drops_it_and_the_next_pause_starts_anew() -> None:
    model, audio = Model(), Audio()
    early = EarlyAsk(model, audio)
    early.paused(True)
    await settle()
    early.paused(False)  # the caller spoke on
    assert early.take() is None  # the end of speech asks the model itself
    await settle()
    assert model.answers[0].cancelled()
    audio.seconds = 2.0
    early.paused(True)
    await settle()
    assert model.asked == [16000, 32000]
    taken = early.take()
    assert taken is not None
    model.answers[1].set_result(0.2)
    assert await taken == 0.2
    assert (early.started, early.used) == (2, 1)


async def test_no_pause_no_inference_and_a_failure_reaches_the_asker() -> None:
    model, audio = Model(), Audio()
    early = EarlyAsk(model, audio)
    assert early.take() is None
    early.paused(True)
    await settle()
    taken = early.take()
    assert taken is not None
    model.answers[0].set_exception(RuntimeError("onnxruntime failed"))
    with pytest.raises(RuntimeError, match="onnxruntime failed"):
        await taken
    early.paused(True)
    await settle()
    early.drop()  # a new utterance started
    await settle()
    assert early.take() is None and model.answers[1].cancelled()


async def test_an_early_complete_answers_the_ask_an_early_unfinished_asks_again() -> None:
    from voicehub.voice.turns.early import completion_probability

    model, audio = Model(), Audio()
    early = EarlyAsk(model, audio)
    early.paused(True)
    await settle()
    model.answers[0].set_result(0.9)
    at_end = np.zeros(17600, dtype=np.float32)  # the audio up to the engine's ask
    assert await completion_probability(early.take(), model, at_end, 0.5) == 0.9
    assert model.asked == [16000]  # no second inference

    early.paused(False)
    early.paused(True)
    await settle()
    model.answers[1].set_result(0.3)  # heard 0.1 s into the silence: sounds unfinished
    asked = asyncio.ensure_future(completion_probability(early.take(), model, at_end, 0.5))
    await settle()
    assert model.asked == [16000, 16000, 17600]  # asked again, on the audio of the ask
    model.answers[2].set_result(0.8)
    assert await asked == 0.8

    asked = asyncio.ensure_future(completion_probability(None, model, at_end, 0.5))
    await settle()
    model.answers[3].set_result(0.1)
    assert await asked == 0.1  # without an early start: the model's answer, whatever it is
