"""Desk files ("channel files"): TOML in `channels/` -> validated pydantic models.

One file declares one desk. Every table forbids unknown keys, so a typo is an error that names
the file and the field path (`channels/research.toml: agents[1].scripted.rules[0].regex: ...`).

    name = "research"                 # slug: lowercase letters, digits, - and _; unique per folder
    title = "Research desk"
    description = "Hands research to two analysts while you keep talking."
    greeting = "Hello, research desk here."      # optional, spoken when a call starts

    [voice]                           # the embedded stack; "openai-realtime" is reserved
    vad = "silero"                    # "silero" | "webrtc"
    stt = "pocketsphinx"              # "pocketsphinx" | "deepgram"
    tts = "piper"                     # "piper" | "espeak" | "deepgram"
    stt_fallback = "pocketsphinx"     # optional, stt "deepgram" only: if Deepgram stays down
    [voice.deepgram]                  # optional with "deepgram" (these are the defaults);
    model = "nova-3"                  #   the key comes from $DEEPGRAM_API_KEY (api_key_env):
    language = "en-US"                #   without it the desk loads but refuses calls
    voice = "aura-2-thalia-en"        # the Aura voice
    endpointing = 300                 # ms of silence ending a phrase (>= 10), or false
    utterance_end = 1000              # ms without words ending the utterance (>= 1000), or false
    keyterms = ["heat pumps"]         # added to the desk's words (rule phrases, keywords)

    [delivery]
    strategy = "wait_for_idle"        # "immediate" | "wait_for_idle" | "queued"
    buffer = 1.0                      # seconds (not for "immediate")
    max_wait = 20.0                   # seconds ("wait_for_idle" only)
    mode = "say"                      # "say": speak results verbatim; "generate": via the model

    [knowledge]
    file = "knowledge/research.toml"  # relative to this file; see voicehub.tools.knowledge

    [[agents]]
    id = "desk"                       # also: role, description, instructions, keywords,
    tools = ["search_knowledge"]      #   when_to_use, when_not_to_use, voice, max_steps
    llm = "scripted"                  # default; or { provider = "openai", model = "gpt-4o-mini",
                                      #   base_url = "...", api_key_env = "OPENAI_API_KEY" }
    [agents.scripted]                 # only with the scripted llm
    fallback = "Sorry, I didn't catch that."
    [[agents.scripted.rules]]         # the fields of voicehub.agents.scripted.ScriptedRule
    regex = 'research (?P<topic>.+)'
    say = "Sure, I'll look into {topic}."
    tool = "delegate_workers"
    arguments = { task = "{topic}" }
    reply = "{result.message}"

    [supervisor]                      # the front agent gets delegate_workers, check_tasks,
    agent = "desk"                    #   cancel_task; results go through [delivery]
    workers = ["analyst-a", "analyst-b"]
    strategy = "parallel"             # or "sequential"
    task_timeout = 60.0               # optional, seconds
    delegation_message = "..."        # optional, the tool's answer (`{result.message}`)

    [loop]                            # the front agent gets delegate_loop (+ check/cancel);
    agent = "desk"                    #   needed only without [supervisor], must match it
    producer = "writer"
    reviewers = ["editor"]            # each gets submit_verdict
    max_iterations = 3
    strategy = "sequential"           # or "parallel"; also task_timeout, delegation_message

    [pipeline]                        # phases in order; each stage's agent gets
    stages = [                        #   handoff_conversation to the agents it can reach
      { phase = "intake", agent = "desk", next = "review" },
      { phase = "review", agent = "writer", can_return_to = ["intake"] },
    ]
    handoff_instruction = "..."       # optional: the new agent answers it at once (a greeting)
    [swarm]                           # or peers handing off to each other (not both)
    agents = ["desk", "writer"]
    entry = "desk"
    handoff_instruction = "..."       # optional, as for [pipeline]

    [ask_user]                        # these agents get ask_user (typed questions; spoken
    agents = ["desk"]                 #   and heard on a call)
    timeout = 60.0                    # seconds per answer
    max_reasks = 2                    # asked again when the answer is not understood

The front agent (the one that delegates) is `supervisor.agent`, else `loop.agent`, else the
entry agent: the first pipeline stage's agent, the swarm's entry, else the first agent. With
[pipeline] or [swarm], the call is with whichever agent has the conversation. An agent's
`voice` ("piper" or "espeak") is its TTS voice on a call. Scripted rules are checked too:
regexes compile, `{placeholders}` name regex groups (or message/last_user; result/result.field
in `reply`), and a rule's `tool` must be one the agent actually gets (its builtins and what
the sections add: see `DeskConfig.orchestration_tools`).

Modules: `models` (the tables), `desk_file` (`DeskConfig` and the checks across tables); this
module loads files. `voicehub.desks.desk.build_desk` turns a `DeskConfig` into a runnable desk.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from pydantic import ValidationError

from voicehub.desks.config import DeskConfig
from voicehub.desks.sections import (
    AgentConfig,
    AskUserConfig,
    DeliveryConfig,
    KnowledgeConfig,
    LLMConfig,
    LoopConfig,
    PipelineConfig,
    PipelineStage,
    RuleConfig,
    ScriptedConfig,
    SupervisorConfig,
    SwarmConfig,
    VoiceConfig,
)
from voicehub.errors import ConfigError
from voicehub.tools.knowledge import KnowledgeBase

__all__ = [
    "AgentConfig",
    "AskUserConfig",
    "DeliveryConfig",
    "DeskConfig",
    "KnowledgeConfig",
    "LLMConfig",
    "LoopConfig",
    "PipelineConfig",
    "PipelineStage",
    "RuleConfig",
    "ScriptedConfig",
    "SupervisorConfig",
    "SwarmConfig",
    "VoiceConfig",
    "describe_errors",
    "load_desk_file",
    "load_desk_folder",
]


def load_desk_file(path: str | Path) -> DeskConfig:
    """Read and validate one desk file (and its knowledge file). Raises ConfigError naming
    the file and the field path of each problem."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{path}: desk file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read the desk file: {exc}") from None
    except tomllib.TOMLDecodeError as exc:  # the message carries line and column
        raise ConfigError(f"{path}: TOML syntax error: {exc}") from None
    try:
        config = DeskConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError("\n".join(f"{path}: {p}" for p in describe_errors(exc))) from None
    config._source = path
    if config.knowledge is not None:
        try:
            KnowledgeBase.from_file(path.parent / config.knowledge.file)
        except ConfigError as exc:
            raise ConfigError(f"{path}: knowledge.file: {exc}") from None
    return config


def load_desk_folder(folder: str | Path) -> dict[str, DeskConfig]:
    """Load every `*.toml` directly in `folder` (subfolders hold knowledge files), by desk
    name. Names must be unique."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ConfigError(f"{folder}: no such desk folder")
    desks: dict[str, DeskConfig] = {}
    for path in sorted(folder.glob("*.toml")):
        config = load_desk_file(path)
        other = desks.get(config.name)
        if other is not None:
            raise ConfigError(
                f"{path}: name: desk name {config.name!r} is already used by {other.source}; "
                "desk names must be unique"
            )
        desks[config.name] = config
    return desks


def describe_errors(exc: ValidationError) -> list[str]:
    """One `field.path: message` line per validation error."""
    lines = []
    for error in exc.errors():
        kind, ctx, value = error["type"], error.get("ctx") or {}, error.get("input")
        where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error["loc"])
        message = error["msg"].removeprefix("Value error, ")
        if kind == "desk_field":
            where, message = f"{where}.{ctx['path']}", str(ctx["message"])
        elif kind == "missing":
            message = "required field is missing"
        elif kind != "value_error" and isinstance(value, str | int | float):
            message += f" (got {value!r:.60})"
        lines.append(f"{where.lstrip('.') or '(top level)'}: {message}")
    return lines
