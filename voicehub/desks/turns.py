"""A desk's turn-taking: its `[voice] turn` settings, and what its words say.

`desk_turn_setup` gives the pipeline engine the turn policy's settings and the end-of-turn
model the desk's `[voice]` table asks for (VAD-only, with a warning, where the model cannot
load). `desk_words_open` is the text half of the end of a turn for this desk: the caller's
words end mid-request by the general rules (`voicehub.voice.turns.words.ends_open`), when
one of the desk's scripted agents waits for the subject of a half request ("could you
research"), or when they stop inside one of the desk's knowledge topics ("look into heat").
`desk_words_complete` is the other way round: the words make a whole request one of the
desk's scripted agents answers as it stands (`voicehub.voice.turns.words.makes_request`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from voicehub.agents.scripted import ScriptedLLM
from voicehub.voice.turns.setup import TurnSetup, turn_setup
from voicehub.voice.turns.words import ends_open, makes_request

if TYPE_CHECKING:
    from voicehub.desks.desk import Desk

__all__ = ["desk_turn_setup", "desk_words_complete", "desk_words_open", "scripted_words_complete"]


def desk_turn_setup(desk: Desk) -> TurnSetup:
    """The turn policy's settings and model for `desk`'s calls (see the module)."""
    voice = desk.config.voice
    return turn_setup(voice.turn, voice.max_turn_silence, owner=f"desk {desk.name!r}")


def desk_words_open(desk: Desk) -> Callable[[str], bool]:
    """Whether a caller's words so far end mid-request on `desk` (see the module)."""
    scripted = [llm for a in desk.agents.values() if (llm := _scripted(a.llm)) is not None]
    topics = tuple(desk.knowledge.topics) if desk.knowledge is not None else ()

    def awaits_more(text: str) -> bool:
        return any(llm.awaits_more(text) for llm in scripted)

    def words_open(text: str) -> bool:
        return ends_open(text, awaits_more, topics)

    return words_open


def desk_words_complete(desk: Desk) -> Callable[[str], bool]:
    """Whether a caller's words make a whole request on `desk` (see the module)."""
    return scripted_words_complete(
        [llm for a in desk.agents.values() if (llm := _scripted(a.llm)) is not None]
    )


def scripted_words_complete(scripted: Sequence[ScriptedLLM]) -> Callable[[str], bool]:
    """Whether a caller's words make a whole request one of `scripted` answers."""

    def takes(text: str) -> bool:
        return any(llm.takes(text) for llm in scripted)

    def words_complete(text: str) -> bool:
        return makes_request(text, takes)

    return words_complete


def _scripted(llm: object) -> ScriptedLLM | None:
    """The scripted model inside `llm` (a wrapper keeps it as `.llm`), if it is one."""
    for _ in range(4):
        if isinstance(llm, ScriptedLLM):
            return llm
        llm = getattr(llm, "llm", None)
    return None
