"""How a pipeline call takes turns and speaks: the engine's settings, grouped."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from voicehub.errors import ConfigError
from voicehub.voice.engine.turn_engine import TurnEngineSettings

__all__ = ["DeliveryMode", "EngineOptions"]

DeliveryMode = Literal["say", "generate"]


@dataclass(frozen=True)
class EngineOptions:
    """How a pipeline call takes turns and speaks.

    `turn`: when turns end and when the caller takes the floor (`TurnEngineSettings`).
    `delivery_mode`: results verbatim ("say") or worded by the model ("generate").
    `history_messages`: how much of the conversation the model reads.
    `floor_wait`: the longest the agent's speech waits for a caller who holds the floor.
    `eot_audio_seconds`: the caller audio kept for the end-of-turn model.
    `idle_prompt_after`, `idle_hang_up_after`: a quiet caller is checked on, then the call
    ended (seconds; 0: never; see `engine.idle`).
    """

    turn: TurnEngineSettings = field(default_factory=TurnEngineSettings)
    delivery_mode: DeliveryMode = "say"
    history_messages: int = 60
    floor_wait: float = 3.0
    eot_audio_seconds: float = 8.0
    idle_prompt_after: float = 0.0
    idle_hang_up_after: float = 0.0

    def __post_init__(self) -> None:
        if self.delivery_mode not in ("say", "generate"):
            raise ConfigError(f"delivery_mode {self.delivery_mode!r}: expected 'say' or 'generate'")
