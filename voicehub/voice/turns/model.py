"""What the engine asks of an end-of-turn model.

The engine hands the model the caller's current utterance (16 kHz mono float32 in [-1, 1],
the last few seconds up to the present) once the caller has been silent for a short while,
and reads the probability that the utterance is complete. Implementations batch the
requests of many calls and run them off the event loop.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np
import numpy.typing as npt

__all__ = ["EndOfTurnModel"]


class EndOfTurnModel(Protocol):
    """Says how likely an utterance is complete (the caller has finished their turn)."""

    async def completion_probability(self, audio: npt.NDArray[np.float32]) -> float:
        """Probability in [0, 1] that the speech in `audio` (16 kHz mono float32, ending
        now) is a complete turn."""
        ...
