"""The tables of a desk file, as pydantic models (the desk itself is `desk_file.DeskConfig`).

Errors raised inside a table carry their own path below it (`field_error`), so a message can
name `agents[1].scripted.rules[0].regex` rather than just the rule.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterator
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from voicehub.agents.scripted import ScriptedRule
from voicehub.delivery.policy import DeliveryStrategy, Immediate, Queued, WaitForIdle
from voicehub.tools.registry import BUILTIN_TOOLS, unknown_tool_message

DEFAULT_FALLBACK = "Sorry, I can't help with that yet."
_PLACEHOLDER = re.compile(r"\{([A-Za-z_][\w.]*)\}")
_REPLY_NAMES = frozenset({"result", "message", "last_user"})


def field_error(path: str, message: str) -> PydanticCustomError:
    """An error at `path` below the model raising it (pydantic only knows the model's loc)."""
    return PydanticCustomError("desk_field", "{message}", {"path": path, "message": message})


def reject_unknown_keys(model: type[BaseModel], data: Any) -> Any:
    # Before pydantic's own extra="forbid" check, to list the allowed keys and the likely one.
    if isinstance(data, dict):
        for key in data:
            if key not in model.model_fields:
                allowed = sorted(model.model_fields)
                close = difflib.get_close_matches(str(key), allowed, n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                message = f"unknown field {key!r}{hint}; allowed here: {', '.join(allowed)}"
                raise field_error(str(key), message)
    return data


def _pattern(regex: str, what: str) -> AfterValidator:
    compiled = re.compile(regex)

    def check(value: str) -> str:
        if not compiled.fullmatch(value):
            raise ValueError(f"{value!r} is not a valid {what}")
        return value

    return AfterValidator(check)


# Tools a desk section gives agents; naming one in `tools` points to the section instead.
SECTION_TOOLS = {
    "handoff_conversation": "[pipeline] or [swarm]",
    "ask_user": "[ask_user]",
    "list_agents": "[manager]",
    "list_workflows": "[manager]",
    "delegate": "[manager]",
    "start_report": "[blackboard]",
}


def _builtin_tool(value: str) -> str:
    section = SECTION_TOOLS.get(value)
    if section is not None:
        raise ValueError(f"{value!r} is not listed in tools: the desk's {section} section adds it")
    if value not in BUILTIN_TOOLS:
        raise ValueError(unknown_tool_message(value))
    return value


Slug = Annotated[str, _pattern(r"[a-z0-9]+(?:[-_][a-z0-9]+)*", "slug (a-z, 0-9, - and _)")]
AgentId = Annotated[str, _pattern(r"[A-Za-z0-9][A-Za-z0-9_-]*", "agent id (letters, 0-9, -, _)")]
ToolName = Annotated[str, AfterValidator(_builtin_tool)]
Seconds = Annotated[float, Field(ge=0, allow_inf_nan=False)]
PositiveSeconds = Annotated[float, Field(gt=0, allow_inf_nan=False)]


class StrictModel(BaseModel):
    """Base of desk-file tables: unknown keys are errors, values are frozen."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    @model_validator(mode="before")
    @classmethod
    def _known_keys(cls, data: Any) -> Any:
        return reject_unknown_keys(cls, data)


class DeepgramConfig(StrictModel):
    """`[voice.deepgram]`: Deepgram's recognizer and Aura voice (key from `api_key_env`)."""

    model: str = "nova-3"
    language: str = "en-US"
    voice: str = "aura-2-thalia-en"
    endpointing: Annotated[int, Field(ge=10)] | Literal[False] = 300  # ms of silence; or off
    utterance_end: Annotated[int, Field(ge=1000)] | Literal[False] = 1000  # ms word gap; or off
    keyterms: tuple[str, ...] = ()  # added to the desk's own vocabulary
    api_key_env: str = "DEEPGRAM_API_KEY"
    base_url: str | None = None  # a self-hosted Deepgram


class RealtimeConfig(StrictModel):
    """`[voice.realtime]`: the speech-to-speech model of `engine = "openai-realtime"`.

    The API key comes from the environment variable `api_key_env`, never from the file.
    """

    model: str = Field(default="gpt-realtime", min_length=1)
    voice: Literal[
        "alloy", "ash", "ballad", "coral", "echo", "sage", "shimmer", "verse", "marin", "cedar"
    ] = "marin"
    turn_detection: Literal["server_vad", "semantic_vad"] = "server_vad"
    silence_ms: int = Field(default=500, ge=100, le=5000)  # server_vad
    eagerness: Literal["low", "medium", "high", "auto"] = "auto"  # semantic_vad
    injection_role: Literal["system", "user"] = "system"
    transcription_model: str | None = "gpt-4o-mini-transcribe"
    api_key_env: str = "OPENAI_API_KEY"
    base_url: str | None = None


class VoiceConfig(StrictModel):
    """The voice stack of the desk's calls: the offline pipeline (VAD, STT, TTS), or a
    speech-to-speech model (`engine = "openai-realtime"`, set up in `[voice.realtime]`)."""

    engine: Literal["pipeline", "openai-realtime"] = "pipeline"
    vad: Literal["silero", "webrtc"] = "silero"
    stt: Literal["pocketsphinx", "whisper", "auto", "deepgram"] = "auto"
    tts: Literal["piper", "espeak", "deepgram"] = "piper"
    stt_fallback: Literal["pocketsphinx"] | None = None
    deepgram: DeepgramConfig | None = None
    realtime: RealtimeConfig | None = None

    @model_validator(mode="after")
    def _fits_engine(self) -> VoiceConfig:
        if self.engine == "pipeline" and self.realtime is not None:
            raise field_error("realtime", "only used with engine = 'openai-realtime'")
        return self

    @property
    def realtime_model(self) -> RealtimeConfig:
        """The `[voice.realtime]` table, its defaults when the file leaves it out."""
        return self.realtime if self.realtime is not None else RealtimeConfig()

    @field_validator("vad", "stt", "tts", mode="before")
    @classmethod
    def _not_an_engine(cls, value: Any) -> Any:
        if value == "openai-realtime":
            raise ValueError("a speech-to-speech model replaces the pipeline: use engine")
        return value

    @model_validator(mode="after")
    def _deepgram_settings(self) -> VoiceConfig:
        uses = "deepgram" in (self.stt, self.tts)
        if self.stt_fallback is not None and self.stt != "deepgram":
            raise field_error("stt_fallback", "only used with stt = 'deepgram'")
        if self.deepgram is not None and not uses:
            raise field_error("deepgram", "only used with stt or tts = 'deepgram'")
        if uses and self.deepgram is None:
            return self.model_copy(update={"deepgram": DeepgramConfig()})
        return self


class DeliveryConfig(StrictModel):
    """When and how background results are spoken into the call."""

    strategy: Literal["immediate", "wait_for_idle", "queued"] = "wait_for_idle"
    buffer: Seconds | None = None
    max_wait: Seconds | None = None
    mode: Literal["say", "generate"] = "say"

    @model_validator(mode="after")
    def _fits_strategy(self) -> DeliveryConfig:
        if self.strategy == "immediate" and self.buffer is not None:
            raise field_error("buffer", "strategy 'immediate' speaks at once: remove buffer")
        if self.strategy != "wait_for_idle" and self.max_wait is not None:
            raise field_error("max_wait", "only strategy 'wait_for_idle' takes max_wait")
        return self

    def to_strategy(self) -> DeliveryStrategy:
        """The policy object (`Immediate`, `WaitForIdle` or `Queued`) this table describes."""
        if self.strategy == "immediate":
            return Immediate()
        if self.strategy == "queued":
            return Queued() if self.buffer is None else Queued(self.buffer)
        return WaitForIdle(1.0 if self.buffer is None else self.buffer, self.max_wait)


class KnowledgeConfig(StrictModel):
    """The desk's knowledge base file, relative to the desk file."""

    file: str = Field(min_length=1)


class LLMConfig(StrictModel):
    """The model an agent runs on. `llm = "scripted"` is shorthand for `{provider = ...}`."""

    provider: Literal["scripted", "openai"] = "scripted"
    model: str | None = None
    base_url: str | None = None
    api_key_env: str | None = None  # the variable's name: keys never go in desk files
    temperature: float | None = Field(default=None, ge=0, le=2)

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        return {"provider": data} if isinstance(data, str) else data

    @model_validator(mode="after")
    def _fits_provider(self) -> LLMConfig:
        if self.provider == "openai" and not self.model:
            raise field_error("model", "provider 'openai' needs a model name")
        if self.provider == "scripted":
            for name in ("model", "base_url", "api_key_env", "temperature"):
                if getattr(self, name) is not None:
                    raise field_error(name, "only used with provider 'openai'")
        return self


class RuleConfig(ScriptedRule):
    """A scripted rule as written in a desk file, with errors pinned to their field."""

    @model_validator(mode="before")
    @classmethod
    def _known_keys(cls, data: Any) -> Any:
        return reject_unknown_keys(cls, data)

    @field_validator("match", mode="before")
    @classmethod
    def _one_phrase(cls, value: Any) -> Any:
        return (value,) if isinstance(value, str) else value

    @field_validator("regex")
    @classmethod
    def _compiles(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value)
            except re.error as exc:
                raise ValueError(f"regex {value!r} is invalid: {exc}") from None
        return value

    @model_validator(mode="after")
    def _placeholders_exist(self) -> RuleConfig:
        # Unknown placeholders render empty at run time; catch the typo here instead.
        # Regex groups fill `say` and `arguments`; `reply` renders after the tool, without them.
        groups = set(re.compile(self.regex).groupindex) if self.regex else set()
        spoken = groups | {"message", "last_user"}
        templates = [("say", self.say, spoken), ("reply", self.reply, _REPLY_NAMES)]
        templates += [(path, v, spoken) for path, v in _strings(self.arguments, "arguments")]
        for path, template, known in templates:
            for name in _PLACEHOLDER.findall(template) if isinstance(template, str) else ():
                head = name.split(".")[0]
                if head not in known or (head != "result" and "." in name):
                    usable = ", ".join(sorted(known))
                    raise field_error(path, f"unknown placeholder {{{name}}}; usable: {usable}")
        return self


def _strings(value: Any, path: str) -> Iterator[tuple[str, str]]:
    """(path, string) for every string in nested arguments (`arguments.plan[0].tool_name`)."""
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(item, f"{path}.{key}")
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            yield from _strings(item, f"{path}[{index}]")


class ScriptedConfig(StrictModel):
    """The scripted LLM's rules and fallback lines."""

    fallback: str = DEFAULT_FALLBACK
    instruction_fallback: str | None = None
    rules: tuple[RuleConfig, ...] = ()


class AgentConfig(StrictModel):
    """One `[[agents]]` table."""

    id: AgentId
    role: str = ""
    description: str = ""
    instructions: str = ""
    keywords: tuple[str, ...] = ()
    when_to_use: str = ""
    when_not_to_use: str = ""
    voice: Literal["piper", "espeak"] | None = None  # on a call: this agent's TTS voice
    tools: tuple[ToolName, ...] = ()
    llm: LLMConfig = Field(default_factory=LLMConfig)
    scripted: ScriptedConfig | None = None
    max_steps: int = Field(default=30, ge=1)
    # "plan_and_execute": a worker that plans tool calls, runs them and checks each result
    # (voicehub.orchestration.planner); its model answers through submit_thought/submit_analysis.
    kind: Literal["agent", "plan_and_execute"] = "agent"
    max_revisions: int | None = Field(default=None, ge=0, le=10)

    @model_validator(mode="after")
    def _consistent(self) -> AgentConfig:
        if self.scripted is not None and self.llm.provider != "scripted":
            raise field_error("scripted", "rules are only used with llm = 'scripted'")
        if self.max_revisions is not None and self.kind != "plan_and_execute":
            raise field_error("max_revisions", "only used with kind = 'plan_and_execute'")
        for index, name in enumerate(self.tools):
            if name in self.tools[:index]:
                raise field_error(f"tools[{index}]", f"tool {name!r} is listed twice")
        return self


class SupervisorConfig(StrictModel):
    """The front agent delegates to workers in child rooms (`delegate_workers`).

    `on_instance_loss`: when the instance running the workers is lost (several instances on
    one Redis, or a crashed server), "retry" runs the lost workers again on a live instance
    and "fail" reports them failed; the caller is told either way
    (`voicehub.orchestration.recovery`). Retry is the default: research is safe to redo.
    """

    agent: str
    workers: tuple[str, ...] = Field(min_length=1)
    strategy: Literal["parallel", "sequential"] = "parallel"
    task_timeout: PositiveSeconds | None = None
    delegation_message: str | None = None
    on_instance_loss: Literal["retry", "fail"] = "retry"


class LoopConfig(StrictModel):
    """A producer revised by reviewers until all approve (`delegate_loop`)."""

    agent: str | None = None
    producer: str
    reviewers: tuple[str, ...] = Field(min_length=1)
    max_iterations: int = Field(default=3, ge=1)
    strategy: Literal["sequential", "parallel"] = "sequential"
    task_timeout: PositiveSeconds | None = None
    delegation_message: str | None = None


class PipelineStage(StrictModel):
    """One phase of a pipeline: `agent` has the conversation; it may hand off to the agent
    of the `next` phase, or back to those of `can_return_to`."""

    phase: Slug
    agent: str
    next: str | None = None
    can_return_to: tuple[str, ...] = ()


class PipelineConfig(StrictModel):
    """Phases in order, each run by one agent; the first stage's agent starts.

    `handoff_instruction`: the instruction the agent receiving the conversation answers at
    once (to greet the caller); without it, that agent speaks at the caller's next turn.
    """

    stages: tuple[PipelineStage, ...] = Field(min_length=1)
    handoff_instruction: str | None = None

    @model_validator(mode="after")
    def _phases_exist(self) -> PipelineConfig:
        phases = [stage.phase for stage in self.stages]
        for i, stage in enumerate(self.stages):
            if stage.phase in phases[:i]:
                raise field_error(f"stages[{i}].phase", f"phase {stage.phase!r} is repeated")
            targets = [("next", stage.next)] if stage.next is not None else []
            targets += [(f"can_return_to[{j}]", p) for j, p in enumerate(stage.can_return_to)]
            for path, phase in targets:
                if phase not in phases:
                    known = ", ".join(phases)
                    raise field_error(f"stages[{i}].{path}", f"no phase {phase!r} ({known})")
        return self


class SwarmConfig(StrictModel):
    """Peers that hand the caller to each other, starting at `entry`
    (`handoff_instruction` as in `PipelineConfig`)."""

    agents: tuple[str, ...] = Field(min_length=1)
    entry: str
    handoff_instruction: str | None = None

    @model_validator(mode="after")
    def _entry_is_a_member(self) -> SwarmConfig:
        if self.entry not in self.agents:
            raise field_error("entry", f"{self.entry!r} is not one of the swarm's agents")
        return self


class AskUserConfig(StrictModel):
    """Agents that may ask the caller questions (`ask_user`): yes/no, options, free text.

    In a text room the question is posted; on a call it is spoken and the answer heard.
    `timeout` bounds each wait for an answer; an answer that is not understood is asked
    again at most `max_reasks` times (then the question's default is used).
    """

    agents: tuple[str, ...] = Field(min_length=1)
    timeout: PositiveSeconds = 60.0
    max_reasks: int = Field(default=2, ge=0, le=5)
