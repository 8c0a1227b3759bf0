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
from voicehub.desks.durations import Duration
from voicehub.mcp.names import qualified_tool
from voicehub.tools.registry import BUILTIN_TOOLS, unknown_tool_message

DEFAULT_FALLBACK = "Sorry, I can't help with that yet."
_PLACEHOLDER = re.compile(r"\{([A-Za-z_][\w.]*)\}")
_REPLY_NAMES = frozenset({"result", "message", "last_user"})
BUILTIN_STACKS = ("offline", "deepgram", "openai-realtime")
"""The voice stacks voicehub registers itself (`voicehub.desks.voice_stack`)."""


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
    if qualified_tool(value) is not None:  # an MCP tool, "<server>.<tool>": see [[mcp]]
        return value
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

    # The docstring under each field is its meaning: the JSON Schema (`voicehub channels
    # --schema`) and the desk-file reference in docs/ are generated from them.
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    @model_validator(mode="before")
    @classmethod
    def _known_keys(cls, data: Any) -> Any:
        return reject_unknown_keys(cls, data)


class DeepgramConfig(StrictModel):
    """`[voice.deepgram]`: Deepgram's recognizer and Aura voice (key from `api_key_env`)."""

    model: str = "nova-3"
    """Deepgram's recognition model."""
    language: str = "en-US"
    """The language the caller speaks (a BCP-47 tag)."""
    voice: str = "aura-2-thalia-en"
    """The Aura voice the agent speaks with (`tts = "deepgram"`)."""
    endpointing: Annotated[int, Field(ge=10)] | Literal[False] = 300
    """Milliseconds of silence that end a phrase (at least 10), or `false` to leave it to
    Deepgram."""
    utterance_end: Annotated[int, Field(ge=1000)] | Literal[False] = 1000
    """Milliseconds without words that end the utterance (at least 1000), or `false`."""
    keyterms: tuple[str, ...] = ()
    """Words to recognize better, added to the desk's own vocabulary (rule phrases, knowledge
    topics)."""
    api_key_env: str = "DEEPGRAM_API_KEY"
    """The environment variable holding the API key (never the key itself). Without it the desk
    loads but refuses calls."""
    base_url: str | None = None  # a self-hosted Deepgram
    """A self-hosted Deepgram's URL; unset: Deepgram's service."""


class RealtimeConfig(StrictModel):
    """`[voice.realtime]`: the speech-to-speech model of `engine = "openai-realtime"`.

    The API key comes from the environment variable `api_key_env`, never from the file.
    """

    model: str = Field(default="gpt-realtime", min_length=1)
    """The speech-to-speech model."""
    voice: Literal[
        "alloy", "ash", "ballad", "coral", "echo", "sage", "shimmer", "verse", "marin", "cedar"
    ] = "marin"
    """The model's voice."""
    turn_detection: Literal["server_vad", "semantic_vad"] = "server_vad"
    """Who decides the caller finished: `server_vad` (silence) or `semantic_vad` (the model judges
    the words)."""
    silence_ms: int = Field(default=500, ge=100, le=5000)  # server_vad
    """With `server_vad`: milliseconds of silence that end the caller's turn (100-5000)."""
    eagerness: Literal["low", "medium", "high", "auto"] = "auto"  # semantic_vad
    """With `semantic_vad`: how soon the model answers."""
    injection_role: Literal["system", "user"] = "system"
    """The role results are injected with into the model's conversation."""
    transcription_model: str | None = "gpt-4o-mini-transcribe"
    """The model that transcribes the caller for the transcript (unset: no caller transcript)."""
    api_key_env: str = "OPENAI_API_KEY"
    """The environment variable holding the API key (never the key itself)."""
    base_url: str | None = None
    """An OpenAI-compatible realtime endpoint; unset: OpenAI's."""


class SoundsConfig(StrictModel):
    """`[voice.sounds]`: sounds played under the call while the agent works (docs/sounds.md),
    never over speech: each stops the moment the caller speaks or the agent's next speech (a
    reply, a result) is ready, and none counts as agent speech, so no result waits for one."""

    thinking: Literal["off", "soft-pulse", "keys"] = "off"
    """Played after the caller's turn while the reply is not ready (its model or its tools
    run): `soft-pulse` (a quiet two-note pulse), `keys` (typing) or `off`."""
    thinking_after: float = Field(default=1.0, ge=0.2, le=10.0, allow_inf_nan=False)
    """Seconds the reply must be late before the thinking sound starts (0.2 to 10)."""
    hold: Literal["off", "hold-music"] = "off"
    """Played while the desk's workers run for the caller and the call is otherwise quiet,
    and to a Twilio caller on hold while a warm transfer rings (unless the transfer names
    its own `hold_audio`): `hold-music` (a soft chord loop) or `off`."""
    hold_after: float = Field(default=4.0, ge=1.0, le=60.0, allow_inf_nan=False)
    """Seconds of quiet, with work running, before the hold music starts (1 to 60)."""
    filler: tuple[Annotated[str, Field(min_length=1, max_length=80)], ...] = ()
    """Short phrases said while a slow tool runs ("One moment."), at most one per reply, in
    turn; empty: none."""
    filler_after: float = Field(default=1.5, ge=0.3, le=10.0, allow_inf_nan=False)
    """Seconds a reply's tools must have run, with nothing said, before a filler (0.3 to 10)."""
    volume_db: float = Field(default=-12.0, ge=-40.0, le=0.0, allow_inf_nan=False)
    """The sounds' level against their bundled level, in dB (-40 to 0); fillers are speech
    and keep the voice's level."""


class VoiceConfig(StrictModel):
    """The voice stack of the desk's calls: the offline pipeline (VAD, STT, TTS), or a
    speech-to-speech model (`engine = "openai-realtime"`, set up in `[voice.realtime]`)."""

    engine: Literal["pipeline", "openai-realtime"] = "pipeline"
    """`pipeline`: VAD, speech recognition, the agents' model and speech synthesis;
    `openai-realtime`: one speech-to-speech model (`[voice.realtime]`)."""
    stack: str | None = Field(default=None, pattern=r"^[a-z][a-z0-9_-]{0,63}$")
    """The voice stack that runs the desk's calls, by its registered name
    (docs/voice-stacks.md): a stack a Python package adds; unset, the built-in stack
    `engine`, `stt` and `tts` name (`offline`, `deepgram` or `openai-realtime`)."""
    vad: Literal["silero", "webrtc"] = "silero"
    """Voice activity detection: Silero (default) or WebRTC's."""
    stt: Literal["pocketsphinx", "whisper", "moonshine", "auto", "deepgram"] = "auto"
    """Speech recognition: `auto` (the default: Moonshine with Whisper as its second opinion
    where Moonshine's package runs, else Whisper, else PocketSphinx,
    docs/speech-recognition.md), Moonshine, Whisper or PocketSphinx (offline), or Deepgram
    (cloud)."""
    tts: Literal["piper", "espeak", "deepgram"] = "piper"
    """Speech synthesis: Piper (offline), eSpeak NG (offline), or Deepgram Aura (cloud)."""
    stt_fallback: Literal["pocketsphinx"] | None = None
    """With `stt = "deepgram"`: the offline recognizer to use while Deepgram stays unreachable."""
    turn: Literal["model", "vad"] = "model"
    """When the caller's turn ends (docs/turn-taking.md): `model` asks the end-of-turn model
    (Smart Turn) whether they have finished, and weighs their words; where it cannot load it
    falls back to `vad` (silence alone), with a warning."""
    max_turn_silence: float = Field(default=2.0, ge=0.7, le=10.0, allow_inf_nan=False)
    """Seconds of silence after which any turn ends, finished or not (0.7 to 10)."""
    idle_prompt_after: float = Field(default=30.0, ge=0.0, allow_inf_nan=False)
    """Seconds of silence on both sides after which the agent checks in on the caller,
    naming the work still running ("I'm still working on heat pumps"); 0: never."""
    idle_hang_up_after: float = Field(default=300.0, ge=0.0, allow_inf_nan=False)
    """Seconds without a word from the caller after which the agent says goodbye and ends the
    call (results not spoken yet stay held for the next call); 0: never."""
    denoise: Literal["rnnoise", "off"] | None = None
    """Noise suppression of the caller's audio for turn-taking (docs/noise.md): the VAD and
    the speech evidence hear it denoised, so noise neither cuts the agent off nor holds a
    result back; the recognizer hears the caller as sent. `rnnoise` (RNNoise, run on the
    server) or `off`; unset: the default for the call's line (`PHONE_DENOISE` on 8 kHz phone
    lines, `off` elsewhere). Pipeline calls only: a speech-to-speech model hears the caller
    as sent."""
    sounds: SoundsConfig = Field(default_factory=SoundsConfig)
    """What the caller hears while the agent works (docs/sounds.md): `[voice.sounds]`."""
    deepgram: DeepgramConfig | None = None
    """Deepgram's settings, with `stt` or `tts = "deepgram"`: `[voice.deepgram]`."""
    realtime: RealtimeConfig | None = None
    """The speech-to-speech model, with `engine = "openai-realtime"`: `[voice.realtime]`."""

    @model_validator(mode="after")
    def _fits_engine(self) -> VoiceConfig:
        if self.engine == "pipeline" and self.realtime is not None:
            raise field_error("realtime", "only used with engine = 'openai-realtime'")
        if self.engine == "openai-realtime":
            for name in ("denoise", "sounds"):
                if name in self.model_fields_set:
                    raise field_error(
                        name, "only used with engine = 'pipeline' (voicehub's own engine)"
                    )
            for name in ("turn", "max_turn_silence"):
                if name in self.model_fields_set:
                    raise field_error(
                        name,
                        "the realtime model takes its own turns: set turn_detection in "
                        "[voice.realtime]",
                    )
        return self

    @property
    def stack_name(self) -> str:
        """The name of the voice stack that runs the desk's calls: `stack`, else the
        built-in one the other keys name."""
        return self.stack if self.stack is not None else self.builtin_stack

    @property
    def builtin_stack(self) -> str:
        """`openai-realtime` for the speech-to-speech engine, `deepgram` when Deepgram
        recognizes or speaks, else `offline`."""
        if self.engine == "openai-realtime":
            return "openai-realtime"
        return "deepgram" if "deepgram" in (self.stt, self.tts) else "offline"

    @model_validator(mode="after")
    def _stack_agrees(self) -> VoiceConfig:
        if self.stack in BUILTIN_STACKS and self.stack != self.builtin_stack:
            raise field_error(
                "stack",
                f"{self.stack!r} is a built-in stack, which engine, stt and tts choose: "
                f"these keys name {self.builtin_stack!r}; leave stack out",
            )
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
    """When and how background results are spoken into the call, and what becomes of a
    result nobody collects: after `hold_for` (held, the caller gone), the `fallback` sends
    it by SMS to the caller's number, POSTs it to `webhook`, or ("none") lets it expire
    (`voicehub.delivery.followup`)."""

    strategy: Literal["immediate", "wait_for_idle", "queued"] = "wait_for_idle"
    """`wait_for_idle`: speak after `buffer` seconds of quiet; `queued`: batch results arriving
    within `buffer` of each other, then speak at the next quiet moment; `immediate`: speak at
    once (may cut the agent's own speech, never the caller)."""
    buffer: Seconds | None = None
    """Seconds of quiet before a result is spoken (`wait_for_idle`, default 1), or the batching
    window (`queued`). Not with `immediate`."""
    max_wait: Seconds | None = None
    """With `wait_for_idle`: seconds after which a waiting result takes the next gap, however short;
    it never talks over the caller."""
    mode: Literal["say", "generate"] = "say"
    """`say`: results are spoken word for word; `generate`: the front agent's model words them."""
    hold_for: Duration | None = None
    """How long a result may wait, held, for its caller to come back (`24h`, `90m`, seconds);
    then `fallback` sends it. Unset: held until the outbox's time to live."""
    fallback: Literal["sms", "webhook", "none"] = "none"
    """After `hold_for`: `sms` texts a summary to the caller's number, `webhook` POSTs it
    (signed), `none` lets it expire."""
    webhook: str | None = None
    """The https URL results are POSTed to (`fallback = "webhook"`)."""
    webhook_secret_env: str = Field(default="VOICEHUB_WEBHOOK_SECRET", min_length=1)
    """The environment variable holding the webhook's signing secret (16 characters or more)."""

    @model_validator(mode="after")
    def _fits_strategy(self) -> DeliveryConfig:
        if self.strategy == "immediate" and self.buffer is not None:
            raise field_error("buffer", "strategy 'immediate' speaks at once: remove buffer")
        if self.strategy != "wait_for_idle" and self.max_wait is not None:
            raise field_error("max_wait", "only strategy 'wait_for_idle' takes max_wait")
        return self

    @model_validator(mode="after")
    def _fits_fallback(self) -> DeliveryConfig:
        if self.fallback != "none" and self.hold_for is None:
            raise field_error(
                "fallback", f'fallback {self.fallback!r} needs hold_for (such as "24h")'
            )
        if self.fallback == "webhook" and self.webhook is None:
            raise field_error("webhook", "fallback 'webhook' needs the URL to POST results to")
        if self.webhook is not None:
            if self.fallback != "webhook":
                raise field_error("webhook", "only used with fallback = 'webhook'")
            if not re.fullmatch(r"https://[^/?#\s]+(/\S*)?", self.webhook):
                raise field_error(
                    "webhook",
                    f"{self.webhook!r} is not an https URL: results carry what callers asked "
                    "for, so they are only sent encrypted (https://...)",
                )
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
    """The knowledge base's TOML file, relative to the desk file (see
    `channels/knowledge/research.toml`)."""


class LLMConfig(StrictModel):
    """The model an agent runs on. `llm = "scripted"` is shorthand for `{provider = ...}`."""

    provider: Literal["scripted", "openai"] = "scripted"
    """`scripted` (offline rules, `[agents.scripted]`) or `openai` (any OpenAI-compatible chat
    model). `llm = "scripted"` is short for this table."""
    model: str | None = None
    """The chat model's name; needed with `openai`."""
    base_url: str | None = None
    """An OpenAI-compatible server (a local one, say); unset: OpenAI's."""
    api_key_env: str | None = None  # the variable's name: keys never go in desk files
    """The environment variable holding the API key (keys never go in desk files). Without it set
    the desk loads but refuses calls."""
    temperature: float | None = Field(default=None, ge=0, le=2)
    """Sampling temperature (0-2); unset: the model's default."""

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
    """One rule of the scripted model: when the words match (`match` or `regex`), it says a
    line, calls a tool, or both; the first matching rule answers. (As a desk file holds
    it: errors are pinned to their field.)"""

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
        templates.append(("ask", self.ask, {"message", "last_user"}))
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
    """Said when no rule matches the caller's words."""
    instruction_fallback: str | None = None
    """Said when no `on = "instruction"` rule matches an instruction (a delivery in `generate` mode,
    a handoff); unset: the instruction's text is spoken."""
    rules: tuple[RuleConfig, ...] = ()
    """The rules, tried in order; the first that matches answers: `[[agents.scripted.rules]]`."""


class AgentConfig(StrictModel):
    """One `[[agents]]` table."""

    id: AgentId
    """The agent's id: letters, digits, `-` and `_`; unique in the desk. Sections name agents by
    it."""
    role: str = ""
    """A short role ("research desk", "analyst"), shown to managers and in logs."""
    description: str = ""
    """What the agent does; a manager's `list_agents` shows it."""
    instructions: str = ""
    """The system prompt of a model-backed agent."""
    keywords: tuple[str, ...] = ()
    """Words a manager's routing matches requests against."""
    when_to_use: str = ""
    """When a manager should route work to this agent."""
    when_not_to_use: str = ""
    """When a manager should not."""
    voice: Literal["piper", "espeak"] | None = None  # on a call: this agent's TTS voice
    """On a call, this agent's TTS voice (`piper` or `espeak`); unset: the desk's."""
    tools: tuple[ToolName, ...] = ()
    """Built-in tools the agent may call (`search_knowledge`, ...) and tools of the desk's MCP
    servers (`"SERVER.TOOL"`, see `[[mcp]]`); sections add their own (`delegate_workers`,
    `ask_user`, ...)."""
    llm: LLMConfig = Field(default_factory=LLMConfig)
    """The model the agent runs on: `"scripted"` or an `{ provider = "openai", model = ... }`
    table."""
    scripted: ScriptedConfig | None = None
    """The scripted model's rules and fallback (with the scripted llm only): `[agents.scripted]`."""
    max_steps: int = Field(default=30, ge=1)
    """At most this many model calls per turn (tool loops end there)."""
    # "plan_and_execute": a worker that plans tool calls, runs them and checks each result
    # (voicehub.orchestration.planner); its model answers through submit_thought/submit_analysis.
    kind: Literal["agent", "plan_and_execute"] = "agent"
    """`agent`, or `plan_and_execute`: a worker that plans tool calls (`submit_thought`), runs them
    and checks each result (`submit_analysis`)."""
    max_revisions: int | None = Field(default=None, ge=0, le=10)
    """With `plan_and_execute`: at most this many re-plans (0-10; default 2)."""

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
    """The front agent: it talks with the caller and gets `delegate_workers`, `check_tasks` and
    `cancel_task`."""
    workers: tuple[str, ...] = Field(min_length=1)
    """The agents that do the work, each in a child room of its own."""
    strategy: Literal["parallel", "sequential"] = "parallel"
    """`parallel`: all workers at once; `sequential`: one after another, each seeing the previous
    answer."""
    task_timeout: PositiveSeconds | None = None
    """Seconds a worker may take before it is stopped and reported timed out; unset: no limit."""
    delegation_message: str | None = None
    """What `delegate_workers` answers at once (a scripted rule's reply speaks it as
    `{result.message}`)."""
    on_instance_loss: Literal["retry", "fail"] = "retry"
    """When the instance running the workers is lost: `retry` runs them again on a live instance,
    `fail` reports them failed; the caller is told either way."""


class LoopConfig(StrictModel):
    """A producer revised by reviewers until all approve (`delegate_loop`)."""

    agent: str | None = None
    """The front agent that gets `delegate_loop`; needed only without `[supervisor]`, and then the
    same agent."""
    producer: str
    """The agent that writes the draft and revises it on feedback."""
    reviewers: tuple[str, ...] = Field(min_length=1)
    """The agents that review each draft (each gets `submit_verdict`); all must approve."""
    max_iterations: int = Field(default=3, ge=1)
    """At most this many drafts; the last one is delivered even if not approved."""
    strategy: Literal["sequential", "parallel"] = "sequential"
    """`sequential`: reviewers one after another, the first rejection ends the round; `parallel`:
    all review and their feedback is combined."""
    task_timeout: PositiveSeconds | None = None
    """Seconds each step may take; unset: no limit."""
    delegation_message: str | None = None
    """What `delegate_loop` answers at once."""


class PipelineStageConfig(StrictModel):
    """One phase of a pipeline: `agent` has the conversation; it may hand off to the agent
    of the `next` phase, or back to those of `can_return_to`."""

    phase: Slug
    """The phase's name (a slug), unique in the pipeline."""
    agent: str
    """The agent that has the conversation in this phase."""
    next: str | None = None
    """The phase it hands the caller on to."""
    can_return_to: tuple[str, ...] = ()
    """Earlier phases it may send the caller back to."""


class PipelineConfig(StrictModel):
    """Phases in order, each run by one agent; the first stage's agent starts.

    `handoff_instruction`: the instruction the agent receiving the conversation answers at
    once (to greet the caller); without it, that agent speaks at the caller's next turn.
    """

    stages: tuple[PipelineStageConfig, ...] = Field(min_length=1)
    """The phases in order; the first stage's agent starts the conversation."""
    handoff_instruction: str | None = None
    """The instruction the agent taking over answers at once (a greeting); unset: it speaks at the
    caller's next turn."""

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
    """The peers; each may hand the caller to any other."""
    entry: str
    """The agent a new conversation starts with."""
    handoff_instruction: str | None = None
    """As in `[pipeline]`."""

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
    """The agents that get `ask_user` (they must talk with the caller)."""
    timeout: PositiveSeconds = 60.0
    """Seconds to wait for each answer."""
    max_reasks: int = Field(default=2, ge=0, le=5)
    """How often a question is asked again when the answer is not understood (0-5), before its
    default is taken."""
