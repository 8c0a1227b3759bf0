"""Settings of a realtime call and the GA `session` object built from them.

The shapes follow the GA Realtime API (`session.type = "realtime"`, nested `audio.input` /
`audio.output`, flat function tools); see PROTOCOLS.md section 1.3.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from voicehub.errors import ConfigError

if TYPE_CHECKING:
    from voicehub.agents.agent import Agent
    from voicehub.agents.tools import Tool

__all__ = [
    "MODEL_RATE",
    "REALTIME_VOICES",
    "InjectionRole",
    "RealtimeSettings",
    "TurnDetection",
    "function_tools",
    "session_config",
]

MODEL_RATE = 24000
"""`audio/pcm` is PCM16 mono at 24 kHz, the only rate the API takes."""
PCM_FORMAT = {"type": "audio/pcm", "rate": MODEL_RATE}
PCMU_FORMAT = {"type": "audio/pcmu"}
"""G.711 mu-law at 8 kHz, both ways: a phone call's own audio."""

REALTIME_VOICES = (
    "alloy",
    "ash",
    "ballad",
    "coral",
    "echo",
    "sage",
    "shimmer",
    "verse",
    "marin",
    "cedar",
)

TurnDetection = Literal["server_vad", "semantic_vad"]
InjectionRole = Literal["system", "user"]


@dataclass(frozen=True)
class RealtimeSettings:
    """How a realtime call runs: model, voice, turn detection, and how results go in.

    `injection_role` is the role of the conversation item a delivered result becomes in
    "generate" mode. `silence_ms` / `threshold` / `prefix_padding_ms` tune server VAD;
    `eagerness` tunes semantic VAD. `transcription_model` turns on caller transcripts.
    """

    model: str = "gpt-realtime"
    voice: str = "marin"
    turn_detection: TurnDetection = "server_vad"
    threshold: float = 0.5
    prefix_padding_ms: int = 300
    silence_ms: int = 500
    eagerness: Literal["low", "medium", "high", "auto"] = "auto"
    injection_role: InjectionRole = "system"
    transcription_model: str | None = "gpt-4o-mini-transcribe"

    def __post_init__(self) -> None:
        if self.voice not in REALTIME_VOICES:
            raise ConfigError(
                f"realtime voice {self.voice!r} is unknown; use one of {', '.join(REALTIME_VOICES)}"
            )
        if self.turn_detection not in ("server_vad", "semantic_vad"):
            raise ConfigError(
                f"turn_detection {self.turn_detection!r}: expected 'server_vad' or 'semantic_vad'"
            )
        if self.injection_role not in ("system", "user"):
            raise ConfigError(
                f"injection_role {self.injection_role!r}: expected 'system' or 'user'"
            )

    def turn_detection_config(self, *, auto_reply: bool = True) -> dict[str, Any]:
        """The `audio.input.turn_detection` object: the model is interrupted by the caller
        by itself (`interrupt_response`), and answers each turn (`create_response`) unless
        `auto_reply` is off (a turn that answers an `ask_user` question)."""
        common = {"create_response": auto_reply, "interrupt_response": True}
        if self.turn_detection == "semantic_vad":
            return {"type": "semantic_vad", "eagerness": self.eagerness, **common}
        return {
            "type": "server_vad",
            "threshold": self.threshold,
            "prefix_padding_ms": self.prefix_padding_ms,
            "silence_duration_ms": self.silence_ms,
            **common,
        }


def function_tools(tools: Sequence[Tool]) -> list[dict[str, Any]]:
    """GA function tools are flat: type, name, description, parameters."""
    return [
        {
            "type": "function",
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.spec.parameters,
        }
        for tool in tools
    ]


def agent_voice(agent: Agent, settings: RealtimeSettings) -> str:
    """The agent's own voice when it names a realtime voice, else the desk's."""
    return agent.voice if agent.voice in REALTIME_VOICES else settings.voice


def session_config(
    settings: RealtimeSettings,
    agent: Agent,
    tools: Sequence[Tool],
    *,
    full: bool,
    voice: str | None,
    instructions: str | None = None,
    auto_reply: bool = True,
    mulaw: bool = False,
) -> dict[str, Any]:
    """The `session` of a `session.update`: the whole configuration when `full` (at the
    start of a call, or of a restored connection), else only the agent's part
    (instructions, tools, and `voice` unless None: the API refuses a new voice once the
    model has spoken). `instructions` replaces the agent's (a recap added to them). With
    `mulaw`, audio goes both ways as G.711 mu-law (`audio/pcmu`), else 24 kHz PCM16."""
    audio_format = dict(PCMU_FORMAT if mulaw else PCM_FORMAT)
    session: dict[str, Any] = {
        "type": "realtime",
        "instructions": agent.instructions if instructions is None else instructions,
        "tools": function_tools(tools),
        "tool_choice": "auto",
    }
    output: dict[str, Any] = {}
    if voice is not None:
        output["voice"] = voice
    if full:
        session["model"] = settings.model
        session["output_modalities"] = ["audio"]
        audio_input: dict[str, Any] = {
            "format": audio_format,
            "turn_detection": settings.turn_detection_config(auto_reply=auto_reply),
        }
        if settings.transcription_model:
            audio_input["transcription"] = {"model": settings.transcription_model}
        output["format"] = dict(audio_format)
        session["audio"] = {"input": audio_input, "output": output}
    elif output:
        session["audio"] = {"output": output}
    return session
