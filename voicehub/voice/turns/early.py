"""The end-of-turn model started before it is asked: :class:`EarlyAsk`.

The turn policy asks the model once the VAD has ended the caller's speech (`model_silence`
after it); the model then costs about 0.1 s of one core, which the recognizer's final,
decoding at the same moment, competes with. A VAD of ours says earlier that the caller, still
speaking by its rules, has gone silent (`PauseWatch`, at `TurnSettings.model_early`): the
model starts then, on the audio up to that moment, and its answer is the one the policy asks
for if the caller stays silent into the end of speech. Speech that comes back first drops
it (the next pause starts another). The answer is the model's on the same stretch of speech,
with less of the silence after it. It is taken when it says complete; when it says
unfinished the engine asks again at the end of speech (heard 0.1 s into the silence, a
finished request sometimes sounds unfinished, and that answer alone would hold the turn
to the ceiling): the early start saves the wait on every turn the model lets end.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from voicehub.voice.turns.model import EndOfTurnModel

__all__ = ["EarlyAsk", "completion_probability"]

log = logging.getLogger("voicehub.voice")


class EarlyAsk:
    """One call's early end-of-turn inference: `paused(True)` when the caller pauses inside
    their speech starts it on `audio()`; `paused(False)` (speech came back) or `drop()` (a new
    utterance started) forgets it; `take()` hands it to the ask that comes at the end of
    speech (None: none is running, ask the model now). `started` counts the inferences begun,
    `used` those taken."""

    def __init__(self, model: EndOfTurnModel, audio: Callable[[], npt.NDArray[np.float32]]) -> None:
        self._model, self._audio = model, audio
        self._pending: asyncio.Future[float] | None = None
        self.started = self.used = 0

    def paused(self, paused: bool) -> None:
        """The VAD's pause watch: the caller went silent inside their speech (True), or spoke
        on after such a pause (False)."""
        if not paused:
            self.drop()
            return
        if self._pending is not None:
            return
        pending = asyncio.ensure_future(self._model.completion_probability(self._audio()))
        pending.add_done_callback(_retrieve)
        self._pending = pending
        self.started += 1

    def drop(self) -> None:
        """Forget the inference running (the caller spoke on)."""
        pending, self._pending = self._pending, None
        if pending is not None and not pending.done():
            pending.cancel()

    def take(self) -> asyncio.Future[float] | None:
        """The inference of the pause the caller is still silent in, if one was started."""
        pending, self._pending = self._pending, None
        if pending is None or pending.cancelled():
            return None
        self.used += 1
        return pending


async def completion_probability(
    early: asyncio.Future[float] | None,
    model: EndOfTurnModel,
    audio: npt.NDArray[np.float32],
    threshold: float,
) -> float:
    """The answer to the engine's ask at the end of speech: the early inference's (`early`,
    from `EarlyAsk.take`) when it says complete (`threshold` or more), else the model's on
    `audio`, the caller's audio up to the ask."""
    if early is not None:
        probability = await early
        if probability >= threshold:
            return probability
    return await model.completion_probability(audio)


def _retrieve(done: asyncio.Future[float]) -> None:
    # an answer nobody took is dropped; its failure is the asker's to log when taken
    if not done.cancelled():
        done.exception()
