"""Desk files ("channel files"): TOML in `channels/` -> validated pydantic models.

One file declares one desk. Every table forbids unknown keys, so a typo is an error that names
the file and the field path (`channels/research.toml: agents[1].scripted.rules[0].regex: ...`).

    name = "research"                 # slug: lowercase letters, digits, - and _; unique per folder
    title = "Research desk"
    description = "Hands research to two analysts while you keep talking."
    greeting = "Hello, research desk here."      # optional, spoken when a call starts

    [voice]                           # the embedded stack; "openai-realtime" is reserved
    vad = "silero"                    # "silero" | "webrtc"
    stt = "auto"                      # "auto" | "moonshine" | "whisper" | "pocketsphinx" |
                                      #   "deepgram"; "auto" (default): Moonshine checked by
                                      #   Whisper where Moonshine runs, else Whisper, else
                                      #   PocketSphinx
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

    [manager]                         # list_agents + list_workflows (run before every model
    agent = "desk"                    #   call), delegate(kind, name, instruction); default:
    agents = ["writer"]               #   the front agent. Own agents it may delegate to
    desks = ["research"]              #   (default: all others); agents of these desk files
    workflows = ["market-brief"]      #   in this folder; workflows/*.toml here (default all)
    mode = "background"               # "background": delegate answers at once and the result
                                      #   is delivered (+ check_tasks, cancel_task); "answer":
    task_timeout = 60.0               #   the tool waits and answers with the result
    delegation_message = "..."        # optional, background only (`{result.message}`)

    [blackboard]                      # `agent` (default: the front agent) gets start_report
    orchestrator = "coordinator"      #   (+ check/cancel): the orchestrator runs a session
    researcher = "researcher"         #   over targets, findings, plans and artifacts in the
    planner = "outliner"              #   background, delegating to the three specialists;
    writer = "writer"                 #   it ends on finish_session or after max_steps, and
    max_steps = 30                    #   the artifacts are delivered. Also task_timeout,
                                      #   delegation_message

    [[agents]]                        # a worker that plans tool calls (submit_thought), runs
    id = "researcher"                 #   them, checks each result (submit_analysis) and
    kind = "plan_and_execute"         #   answers from the history; max_steps bounds the
    tools = ["search_knowledge"]      #   steps, max_revisions (default 2) the re-plans
    max_revisions = 1

Why these choices: a call must never wait on slow work, so by default `delegate` and
`start_report` hand their result to the delivery service, as `delegate_workers` does; mode
"answer" suits quick lookups (and text rooms that want the answer in the tool). Agents of
other desks are listed only when `[manager] desks` names them, so a desk's reach is explicit;
only their workers (not the agents on their calls) are listed, and they run with their own
tools and knowledge but without their desk's sections. Scripted
rules' arguments may nest (a plan's steps); every string in them is a template.

The front agent (the one that delegates) is `supervisor.agent`, else `loop.agent`, else the
entry agent: the first pipeline stage's agent, the swarm's entry, else the first agent. With
[pipeline] or [swarm], the call is with whichever agent has the conversation. An agent's
`voice` ("piper" or "espeak") is its TTS voice on a call. Scripted rules are checked too:
regexes compile, `{placeholders}` name regex groups (or message/last_user; result/result.field
in `reply`), and a rule's `tool` must be one the agent actually gets (its builtins and what
the sections add: see `DeskConfig.orchestration_tools`).

Modules: `sections` and `coordination_sections` (the tables), `config` (`DeskConfig` and the
checks across tables, with `coordination_checks`); this module loads files.
`voicehub.desks.desk.build_desk` turns a `DeskConfig` into a runnable desk.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from voicehub.core.toml_files import invalid_file, read_toml
from voicehub.core.validation import describe_errors
from voicehub.desks.config import DeskConfig
from voicehub.desks.coordination_sections import BlackboardConfig, ManagerConfig
from voicehub.desks.sections import (
    AgentConfig,
    AskUserConfig,
    DeliveryConfig,
    KnowledgeConfig,
    LLMConfig,
    LoopConfig,
    PipelineConfig,
    PipelineStageConfig,
    RuleConfig,
    ScriptedConfig,
    SupervisorConfig,
    SwarmConfig,
    VoiceConfig,
)
from voicehub.desks.transfer import check_transfer_desks
from voicehub.errors import ConfigError
from voicehub.tools.knowledge import KnowledgeBase

__all__ = [
    "AgentConfig",
    "AskUserConfig",
    "BlackboardConfig",
    "DeliveryConfig",
    "DeskConfig",
    "KnowledgeConfig",
    "LLMConfig",
    "LoopConfig",
    "ManagerConfig",
    "PipelineConfig",
    "PipelineStageConfig",
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
    data = read_toml(path, "desk file")
    try:
        config = DeskConfig.model_validate(data)
    except ValidationError as exc:
        raise invalid_file(path, exc) from None
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
    check_transfer_desks(desks)
    return desks
