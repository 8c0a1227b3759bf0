"""When a caller's turn ends: a pure decision on silence, words and the end-of-turn model.

`decide(evidence, settings, now)` answers one question for the engine's state machine: the
caller is silent (or speaking); is the turn over? It returns one `TurnDecision`:

- `Listen()`: the caller is speaking; decide again when they stop.
- `AskModel()`: run the end-of-turn model on the caller's audio up to now, and decide again
  with its probability in `TurnEvidence.probability`.
- `WakeAt(time)`: nothing to do before `time`; decide again then, or on new evidence
  (speech, words, the model's answer), whichever comes first.
- `Commit(reason)`: the turn is over: answer it.

Two modes (`[voice] turn`):

- `"vad"`: the turn ends after `vad_silence` seconds of silence, as with VAD alone.
- `"model"`: after `model_silence` seconds of silence the model is asked once for this
  stretch of silence. The turn ends when the model says complete (`threshold`) and the
  caller's words so far do not end mid-request (`words_open`, see `voicehub.voice.turns.
  words`); words ending mid-request ("could you research", "find out about") wait, and so
  does an utterance the model calls incomplete. Whatever the evidence, `max_silence`
  seconds of silence end the turn (`[voice] max_turn_silence`): nobody waits longer.
  Words that make a whole request the desk answers (`words_complete`: "tell me the
  opening hours of the library", which a recognizer may end with a comma and the model
  may hear as unfinished) hold the turn for the model only up to `complete_silence`.

The model commits only once the words of the turn are known (`words_open` is not None):
the reply needs them anyway, and words ending mid-request overrule the model, which reads
intonation, not words. Decisions depend on nothing but their arguments (times are the
engine's clock): the same evidence at the same time gives the same decision.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, TypeAlias

from voicehub.core.clock import WakeAt

__all__ = [
    "AskModel",
    "Commit",
    "CommitReason",
    "Listen",
    "TurnDecision",
    "TurnEvidence",
    "TurnMode",
    "TurnSettings",
    "WakeAt",
    "decide",
]

TurnMode = Literal["model", "vad"]
CommitReason = Literal["model", "silence", "ceiling", "words"]


@dataclass(frozen=True, slots=True)
class TurnSettings:
    """How turns end (see the module). Seconds of caller silence.

    - `vad_silence`: mode "vad": the silence that ends a turn (VAD 0.35 s plus 0.3 s of
      endpointing, the pipeline's turn before the model).
    - `model_silence`: mode "model": the silence before the model is asked.
    - `threshold`: the model's probability from which an utterance counts as complete.
    - `max_silence`: the ceiling: this much silence ends any turn.
    - `model_early`: mode "model": the silence inside the caller's speech (the VAD still
      holds them speaking) at which the model starts ahead of the VAD's end of speech; its
      answer is the one asked for at `model_silence` when the caller stays silent into the
      end (`voicehub.voice.turns.early`). None: the model starts only when asked.
    - `complete_silence`: mode "model": the silence that ends a turn whose words make a
      whole request (`TurnEvidence.words_complete`) when the model has not said complete
      by then (it says unfinished, or its answer is late): instead of the ceiling (a
      ceiling below it still comes first).
    """

    mode: TurnMode = "model"
    vad_silence: float = 0.65
    model_silence: float = 0.2
    threshold: float = 0.5
    max_silence: float = 2.0
    model_early: float | None = 0.1
    complete_silence: float = 0.4

    def __post_init__(self) -> None:
        if self.mode not in ("model", "vad"):
            raise ValueError(f"turn mode {self.mode!r}: expected 'model' or 'vad'")
        for name in ("vad_silence", "model_silence", "max_silence", "complete_silence"):
            value = getattr(self, name)
            if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be a positive number of seconds, got {value!r}")
        early = self.model_early
        if early is not None and not (
            isinstance(early, int | float) and math.isfinite(early) and early > 0
        ):
            raise ValueError(
                f"model_early must be None or a positive number of seconds, got {early!r}"
            )
        if not 0.0 <= self.threshold <= 1.0:
            raise ValueError(f"threshold must be within [0, 1], got {self.threshold!r}")
        if self.model_silence > self.max_silence:
            raise ValueError(
                f"model_silence ({self.model_silence}) must not exceed max_silence "
                f"({self.max_silence})"
            )
        if self.vad_silence > self.max_silence:
            raise ValueError(
                f"vad_silence ({self.vad_silence}) must not exceed max_silence ({self.max_silence})"
            )


@dataclass(frozen=True, slots=True)
class TurnEvidence:
    """What the engine knows of the caller's current turn.

    - `speech_ended_at`: when the caller's last voiced frame ended; None while they speak.
    - `words_open`: whether the words heard so far end mid-request; None until the
      transcript of all the speech so far is in.
    - `asked`: the model was asked about the audio up to `speech_ended_at`.
    - `probability`: its answer (None: not asked, or not back yet).
    - `words_complete`: those words (known, not open) make a whole request the desk
      answers (`voicehub.voice.turns.words.makes_request`).
    """

    speech_ended_at: float | None
    words_open: bool | None = None
    asked: bool = False
    probability: float | None = None
    words_complete: bool = False


@dataclass(frozen=True, slots=True)
class Listen:
    """The caller is speaking: decide again when they stop."""


@dataclass(frozen=True, slots=True)
class AskModel:
    """Ask the end-of-turn model about the audio up to now."""


@dataclass(frozen=True, slots=True)
class Commit:
    """The turn is over. `reason`: the model said so ("model"), VAD silence in mode "vad"
    ("silence"), the ceiling ("ceiling"), or `complete_silence` after words that make a
    whole request ("words")."""

    reason: CommitReason


TurnDecision: TypeAlias = Listen | AskModel | WakeAt | Commit


def decide(evidence: TurnEvidence, settings: TurnSettings, now: float) -> TurnDecision:
    """Whether the caller's turn is over at `now` (see the module)."""
    ended = evidence.speech_ended_at
    if ended is None:
        return Listen()
    # Deadlines, compared with `now` as they are returned: a WakeAt time is never `now`
    # or earlier (float rounding of `now - ended` could make it so, and a driver loop).
    if settings.mode == "vad":
        silence_over = ended + settings.vad_silence
        return Commit("silence") if now >= silence_over else WakeAt(silence_over)
    ceiling = ended + settings.max_silence
    if now >= ceiling:
        return Commit("ceiling")
    if evidence.words_open:
        return WakeAt(ceiling)  # "could you research": only more words or the ceiling
    if not evidence.asked:
        ask_at = ended + settings.model_silence
        return AskModel() if now >= ask_at else WakeAt(ask_at)
    if evidence.probability is None or evidence.probability < settings.threshold:
        # the answer is on its way, or the utterance sounds unfinished: a whole request
        # by its words waits for the model only up to `complete_silence`
        if evidence.words_complete and evidence.words_open is False:
            complete_at = ended + settings.complete_silence
            return Commit("words") if now >= complete_at else WakeAt(complete_at)
        return WakeAt(ceiling)
    if evidence.words_open is None:
        return WakeAt(ceiling)  # complete by its sound: commit once the words agree
    return Commit("model")
