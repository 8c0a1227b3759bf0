"""A desk's turn-taking, as its `[voice]` table chooses: the policy's settings and model.

`turn = "model"` (the default) uses Smart Turn wherever it loads; where it cannot (the
package missing, the file altered) the desk falls back to VAD-only turns, with a warning
naming why, and its calls go on. `turn = "vad"` ends turns on silence alone.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from voicehub.voice.turns.model import EndOfTurnModel
from voicehub.voice.turns.policy import TurnMode, TurnSettings
from voicehub.voice.turns.smart_turn import (
    TurnModelError,
    shared_turn_model,
    turn_model_unavailable,
)

__all__ = ["TurnSetup", "turn_setup"]

log = logging.getLogger("voicehub.voice")


@dataclass(frozen=True, slots=True)
class TurnSetup:
    """The turn policy's settings, and the end-of-turn model when `settings.mode` is
    "model" (None in mode "vad")."""

    settings: TurnSettings
    model: EndOfTurnModel | None


def turn_setup(mode: TurnMode, max_turn_silence: float, *, owner: str) -> TurnSetup:
    """The turn-taking of `owner` (a desk's name, for the warning): `mode` and the ceiling
    `max_turn_silence` as its `[voice]` table says; VAD-only, with a warning, when the
    model cannot load. Loads the model once per process."""
    if mode == "model":
        problem = turn_model_unavailable()
        if problem is None:
            try:
                model = shared_turn_model()
            except TurnModelError as exc:
                problem = str(exc)
            else:
                return TurnSetup(TurnSettings("model", max_silence=max_turn_silence), model)
        log.warning("%s: turn 'model' falls back to VAD-only turns: %s", owner, problem)
    return TurnSetup(TurnSettings("vad", max_silence=max_turn_silence), None)
