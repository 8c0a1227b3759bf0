"""Desk files: the examples load, and every broken file names the file and the field."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from voicehub.delivery.policy import Immediate, Queued, WaitForIdle
from voicehub.desks.loading import DeskConfig, load_desk_file, load_desk_folder
from voicehub.errors import ConfigError

CHANNELS = Path(__file__).resolve().parents[2] / "channels"

# A small valid desk; each error test breaks one thing in it.
VALID = """\
name = "mini"
title = "Mini desk"

[delivery]
strategy = "wait_for_idle"
buffer = 0.5

[knowledge]
file = "kb.toml"

[[agents]]
id = "desk"
tools = ["search_knowledge"]

[agents.scripted]
fallback = "Pardon?"

[[agents.scripted.rules]]
regex = 'research (?P<topic>.+)'
say = "On it: {topic}."
tool = "delegate_workers"
arguments = { task = "{topic}" }
reply = "{result.message}"

[[agents]]
id = "worker"
tools = ["search_knowledge"]

[[agents.scripted.rules]]
match = "*"
tool = "search_knowledge"
arguments = { query = "{message}" }

[supervisor]
agent = "desk"
workers = ["worker"]
"""

KNOWLEDGE = """\
[[entries]]
topic = "tea"
keywords = ["green tea"]
text = "Tea is brewed from leaves."
"""


def write_desk(folder: Path, text: str, name: str = "mini.toml") -> Path:
    (folder / "kb.toml").write_text(KNOWLEDGE)
    path = folder / name
    path.write_text(text)
    return path


def error_of(folder: Path, text: str) -> str:
    path = write_desk(folder, text)
    with pytest.raises(ConfigError) as caught:
        load_desk_file(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: "), message
    return message


# -- valid desks -------------------------------------------------------------------------


def test_the_example_desks_load() -> None:
    desks = load_desk_folder(CHANNELS)
    assert sorted(desks) == [
        "drafting",
        "frontdesk",
        "report",
        "research",
        "research-cloud",
        "research-realtime",
        "swarm",
        "tickets",
        "triage",
    ]
    realtime = desks["research-realtime"].voice
    assert (realtime.engine, realtime.realtime_model.turn_detection) == (
        "openai-realtime",
        "semantic_vad",
    )

    research = desks["research"]
    assert research.source == CHANNELS / "research.toml"
    assert research.front_agent_id == "desk"
    assert research.greeting
    assert research.supervisor is not None
    assert research.supervisor.workers == ("analyst-a", "analyst-b")
    assert research.delivery.to_strategy() == WaitForIdle(1.0)
    assert research.delivery.mode == "say"
    assert research.voice.stt == "auto"  # Whisper where its model loads

    drafting = desks["drafting"]
    assert drafting.loop is not None
    assert drafting.loop.reviewers == ("editor", "fact-checker")
    assert drafting.loop.strategy == "parallel"
    assert drafting.orchestration_tools("editor") == ["submit_verdict"]
    assert drafting.orchestration_tools("desk") == ["delegate_loop", "check_tasks", "cancel_task"]

    triage = desks["triage"]
    assert triage.pipeline is not None and [s.agent for s in triage.pipeline.stages] == [
        "triage",
        "handler",
        "resolver",
    ]
    assert (triage.front_agent_id, triage.entry_agent_id) == ("triage", "triage")
    assert triage.handoff_targets("resolver") == ["handler"]  # can_return_to
    assert triage.orchestration_tools("handler") == ["handoff_conversation", "ask_user"]
    assert triage.agent("handler").voice == "espeak"

    swarm = desks["swarm"]
    assert swarm.swarm is not None and swarm.entry_agent_id == "sales"
    assert swarm.handoff_targets("billing") == ["sales", "support"]
    assert swarm.orchestration_tools("sales") == ["handoff_conversation"]

    frontdesk = desks["frontdesk"]
    assert frontdesk.manager is not None and frontdesk.manager_agent_id == "desk"
    assert frontdesk.manager.desks == ("research",) and frontdesk.manager.mode == "background"
    assert frontdesk.orchestration_tools("desk") == [
        "ask_user",
        "list_agents",
        "list_workflows",
        "delegate",
        "check_tasks",
        "cancel_task",
    ]

    report = desks["report"]
    assert report.blackboard is not None and report.blackboard_agent_id == "desk"
    assert report.blackboard.specialists == {
        "researcher": "researcher",
        "planner": "outliner",
        "writer": "writer",
    }
    assert report.agent("researcher").kind == "plan_and_execute"
    assert report.orchestration_tools("researcher") == ["submit_thought", "submit_analysis"]
    assert "start_report" in report.orchestration_tools("desk")
    assert report.orchestration_tools("coordinator")[:3] == [
        "create_target",
        "mark_target_complete",
        "finish_session",
    ]


def test_a_minimal_desk_gets_defaults(tmp_path: Path) -> None:
    path = write_desk(tmp_path, 'name = "tiny"\n[[agents]]\nid = "solo"\n')
    config = load_desk_file(path)
    assert config.front_agent_id == "solo"
    assert config.voice.vad == "silero" and config.voice.tts == "piper"
    assert config.delivery.to_strategy() == WaitForIdle(1.0)
    assert config.agents[0].llm.provider == "scripted"


@pytest.mark.parametrize(
    ("table", "strategy"),
    [
        ('strategy = "immediate"', Immediate()),
        ('strategy = "queued"\nbuffer = 3', Queued(3.0)),
        ('strategy = "wait_for_idle"\nbuffer = 2\nmax_wait = 10', WaitForIdle(2.0, 10.0)),
    ],
)
def test_delivery_tables_become_strategies(tmp_path: Path, table: str, strategy: object) -> None:
    text = VALID.replace('strategy = "wait_for_idle"\nbuffer = 0.5', table)
    assert load_desk_file(write_desk(tmp_path, text)).delivery.to_strategy() == strategy


def test_a_desk_with_supervisor_and_loop_gives_the_front_both(tmp_path: Path) -> None:
    text = VALID + '\n[[agents]]\nid = "writer"\n[[agents]]\nid = "editor"\n'
    text += '[loop]\nproducer = "writer"\nreviewers = ["editor"]\n'
    config = load_desk_file(write_desk(tmp_path, text))
    assert config.orchestration_tools("desk") == [
        "delegate_workers",
        "delegate_loop",
        "check_tasks",
        "cancel_task",
    ]


PIPELINE = (
    "[pipeline]\nstages = [\n"
    '  { phase = "intake", agent = "desk", next = "work" },\n'
    '  { phase = "work", agent = "worker", can_return_to = ["intake"] },\n]\n'
)
SWARM = '[swarm]\nagents = ["desk", "worker"]\nentry = "worker"\n'


def test_pipeline_and_swarm_sections_give_handoff_targets(tmp_path: Path) -> None:
    config = load_desk_file(write_desk(tmp_path, VALID + PIPELINE))
    assert config.pipeline is not None and config.pipeline.stages[1].can_return_to == ("intake",)
    assert config.handoff_targets("desk") == ["worker"]
    assert config.handoff_targets("worker") == ["desk"]
    assert config.conversation_agent_ids == ["desk", "worker"]
    assert config.orchestration_tools("desk") == [
        "delegate_workers",
        "check_tasks",
        "cancel_task",
        "handoff_conversation",
    ]

    config = load_desk_file(write_desk(tmp_path, VALID + SWARM))
    assert config.swarm is not None and config.entry_agent_id == "worker"
    assert config.front_agent_id == "desk"  # the supervisor's agent still delegates
    assert config.handoff_targets("worker") == ["desk"]


def test_a_desk_runs_a_pipeline_or_a_swarm_not_both(tmp_path: Path) -> None:
    message = error_of(tmp_path, VALID + PIPELINE + SWARM)
    assert "swarm: a desk runs [pipeline] or [swarm], not both" in message


def test_rules_may_use_handoff_and_ask_user_where_the_desk_gives_them(tmp_path: Path) -> None:
    handoff = (
        '\n[[agents.scripted.rules]]\nmatch = "bill"\ntool = "handoff_conversation"\n'
        'arguments = { target = "worker" }\n'
    )
    asks = '\n[[agents.scripted.rules]]\nmatch = "pick"\ntool = "ask_user"\n'
    rules = VALID.replace(
        '\n[[agents]]\nid = "worker"', handoff + asks + '\n[[agents]]\nid = "worker"'
    )
    message = error_of(tmp_path, rules)
    assert "tool 'handoff_conversation' is not available to agent 'desk'" in message
    message = error_of(tmp_path, rules + PIPELINE)
    assert "rules[2].tool: tool 'ask_user' is not available to agent 'desk'" in message
    config = load_desk_file(
        write_desk(tmp_path, rules + PIPELINE + '[ask_user]\nagents = ["desk"]\n')
    )
    assert config.ask_user is not None and config.ask_user.timeout == 60.0
    assert config.orchestration_tools("desk")[-2:] == ["handoff_conversation", "ask_user"]


def test_ask_user_agents_must_talk_with_the_caller(tmp_path: Path) -> None:
    message = error_of(tmp_path, VALID + '[ask_user]\nagents = ["worker"]\n')
    assert "ask_user.agents[0]: 'worker' never talks with the caller" in message
    assert "(agents on the call: desk)" in message
    message = error_of(tmp_path, VALID + '[ask_user]\nagents = ["ghost"]\n')
    assert "ask_user.agents[0]: unknown agent 'ghost'" in message


def test_section_tools_and_voices_are_checked(tmp_path: Path) -> None:
    for name, section in [("ask_user", "[ask_user]"), ("handoff_conversation", "[pipeline]")]:
        text = VALID.replace('tools = ["search_knowledge"]', f'tools = ["{name}"]', 1)
        message = error_of(tmp_path, text)
        assert f"agents[0].tools[0]: '{name}' is not listed in tools" in message
        assert section in message
    message = error_of(tmp_path, VALID.replace('id = "worker"', 'id = "worker"\nvoice = "robot"'))
    assert "agents[1].voice: Input should be 'piper' or 'espeak'" in message


# -- errors name the file and the field ----------------------------------------------------


def test_toml_syntax_error_names_the_line(tmp_path: Path) -> None:
    message = error_of(tmp_path, 'name = "mini"\ntitle = "Mini\n')
    assert "TOML syntax error" in message
    assert re.search(r"line 2, column \d+", message), message


def test_unknown_field_is_named_with_a_suggestion(tmp_path: Path) -> None:
    message = error_of(tmp_path, VALID.replace("[delivery]", '[voice]\nvda = "silero"\n[delivery]'))
    assert "voice.vda: unknown field 'vda' (did you mean 'vad'?)" in message
    assert (
        "allowed here: deepgram, denoise, engine, idle_hang_up_after, idle_prompt_after, "
        "max_turn_silence, realtime, sounds, stack, stt, stt_fallback, tts, turn, vad" in message
    )


def test_unknown_field_in_a_rule(tmp_path: Path) -> None:
    message = error_of(tmp_path, VALID.replace('say = "On it', 'sya = "On it'))
    assert "agents[0].scripted.rules[0].sya: unknown field 'sya' (did you mean 'say'?)" in message


def test_bad_regex_names_the_rule(tmp_path: Path) -> None:
    text = VALID.replace('match = "*"', "regex = '('")
    message = error_of(tmp_path, text)
    assert "agents[1].scripted.rules[0].regex: regex '(' is invalid:" in message


def test_unknown_agent_in_supervisor_workers(tmp_path: Path) -> None:
    message = error_of(
        tmp_path, VALID.replace('workers = ["worker"]', 'workers = ["worker", "ghost"]')
    )
    assert (
        "supervisor.workers[1]: unknown agent 'ghost'; agents in this desk: desk, worker" in message
    )


@pytest.mark.parametrize(
    ("section", "path"),
    [
        ('[loop]\nagent = "desk"\nproducer = "nobody"\nreviewers = ["worker"]', "loop.producer"),
        ('[swarm]\nagents = ["desk", "x"]\nentry = "desk"', "swarm.agents[1]"),
        ('[pipeline]\nstages = [{ phase = "a", agent = "zed" }]', "pipeline.stages[0].agent"),
    ],
)
def test_unknown_agents_in_other_sections(tmp_path: Path, section: str, path: str) -> None:
    message = error_of(tmp_path, VALID + section + "\n")
    assert f"{path}: unknown agent" in message


def test_unknown_builtin_tool_lists_the_known_ones(tmp_path: Path) -> None:
    message = error_of(
        tmp_path, VALID.replace('tools = ["search_knowledge"]', 'tools = ["web"]', 1)
    )
    assert (
        "agents[0].tools[0]: unknown builtin tool 'web'; known builtin tools: search_knowledge"
    ) in message


def test_orchestration_tools_are_not_listed_as_builtins(tmp_path: Path) -> None:
    text = VALID.replace('tools = ["search_knowledge"]', 'tools = ["delegate_workers"]', 1)
    message = error_of(tmp_path, text)
    assert "agents[0].tools[0]: 'delegate_workers' is not listed in tools" in message
    assert "[supervisor]" in message


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        (
            'strategy = "wait_for_idle"',
            'strategy = "eventually"',
            "delivery.strategy: Input should be",
        ),
        (
            "[supervisor]",
            '[supervisor]\nstrategy = "random"',
            "supervisor.strategy: Input should be",
        ),
        (
            "[supervisor]",
            '[supervisor]\non_instance_loss = "ignore"',
            "supervisor.on_instance_loss: Input should be 'retry' or 'fail'",
        ),
        (
            "[supervisor]",
            '[supervisor]\non_instance_los = "fail"',
            "did you mean 'on_instance_loss'?",
        ),
        (
            'strategy = "wait_for_idle"\nbuffer = 0.5',
            'strategy = "immediate"\nbuffer = 1',
            "delivery.buffer: strategy 'immediate' speaks at once",
        ),
        ("buffer = 0.5", "buffer = -1", "delivery.buffer: Input should be greater than or equal"),
        (
            'strategy = "wait_for_idle"',
            'strategy = "queued"\nmax_wait = 3',
            "delivery.max_wait: only strategy 'wait_for_idle'",
        ),
    ],
)
def test_bad_delivery_and_orchestration_strategies(
    tmp_path: Path, old: str, new: str, expected: str
) -> None:
    message = error_of(tmp_path, VALID.replace(old, new))
    assert expected in message
    if "eventually" in new:
        assert "'immediate', 'wait_for_idle' or 'queued' (got 'eventually')" in message


def test_on_instance_loss_defaults_to_retry_and_reads_fail(tmp_path: Path) -> None:
    default = load_desk_file(write_desk(tmp_path, VALID))
    assert default.supervisor is not None and default.supervisor.on_instance_loss == "retry"
    failing = VALID.replace("[supervisor]", '[supervisor]\non_instance_loss = "fail"')
    config = load_desk_file(write_desk(tmp_path, failing))
    assert config.supervisor is not None and config.supervisor.on_instance_loss == "fail"


def test_a_realtime_model_is_an_engine_not_a_recognizer(tmp_path: Path) -> None:
    message = error_of(tmp_path, VALID + '[voice]\nstt = "openai-realtime"\n')
    assert "voice.stt: a speech-to-speech model replaces the pipeline: use engine" in message


def test_deepgram_voice_settings(tmp_path: Path) -> None:
    table = '[voice]\nstt = "deepgram"\ntts = "deepgram"\nstt_fallback = "pocketsphinx"\n'
    table += '[voice.deepgram]\nmodel = "nova-3"\nendpointing = false\nkeyterms = ["solar"]\n'
    voice = load_desk_file(write_desk(tmp_path, VALID + table)).voice
    assert (voice.stt, voice.tts, voice.stt_fallback) == ("deepgram", "deepgram", "pocketsphinx")
    assert voice.deepgram is not None
    assert (voice.deepgram.endpointing, voice.deepgram.keyterms) == (False, ("solar",))
    assert voice.deepgram.voice == "aura-2-thalia-en"  # the defaults fill the rest

    for bad, expected in [
        ('[voice]\nstt_fallback = "pocketsphinx"\n', "voice.stt_fallback: only used with stt"),
        ('[voice.deepgram]\nmodel = "nova-3"\n', "voice.deepgram: only used with stt or tts"),
        ('[voice]\ntts = "deepgram"\n[voice.deepgram]\nvoise = "x"\n', "did you mean 'voice'"),
        ('[voice]\nstt = "deepgram"\n[voice.deepgram]\nendpointing = 5\n', "greater than"),
    ]:
        assert expected in error_of(tmp_path, VALID + bad)


def test_rule_tool_must_be_available_to_the_agent(tmp_path: Path) -> None:
    message = error_of(
        tmp_path, VALID.replace('tool = "delegate_workers"', 'tool = "delegate_loop"')
    )
    assert "agents[0].scripted.rules[0].tool: tool 'delegate_loop' is not available" in message
    assert "delegate_workers" in message  # lists what the agent has


def test_placeholders_must_exist(tmp_path: Path) -> None:
    message = error_of(tmp_path, VALID.replace('"{result.message}"', '"Done with {topic}"'))
    # Regex groups do not reach `reply`, which renders after the tool result.
    assert "agents[0].scripted.rules[0].reply: unknown placeholder {topic}" in message
    message = error_of(tmp_path, VALID.replace('task = "{topic}"', 'task = "{topci}"'))
    assert "agents[0].scripted.rules[0].arguments.task: unknown placeholder {topci}" in message


def test_knowledge_tool_needs_a_knowledge_table(tmp_path: Path) -> None:
    message = error_of(tmp_path, VALID.replace('[knowledge]\nfile = "kb.toml"\n', ""))
    assert "agents[0].tools[0]: tool 'search_knowledge' needs a knowledge base" in message


def test_missing_or_broken_knowledge_file(tmp_path: Path) -> None:
    message = error_of(tmp_path, VALID.replace("kb.toml", "missing.toml"))
    assert "knowledge.file:" in message and "missing.toml: knowledge file not found" in message
    (tmp_path / "bad.toml").write_text('[[entries]]\ntopic = "x"\n')
    message = error_of(tmp_path, VALID.replace("kb.toml", "bad.toml"))
    assert "bad.toml: entries[0].text: required field is missing" in message


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ('name = "mini"', 'name = "Mini Desk"', "name: 'Mini Desk' is not a valid slug"),
        ('id = "worker"', 'id = "desk"', "agents[1].id: agent id 'desk' is used twice"),
        (
            'workers = ["worker"]',
            'workers = ["desk", "worker"]',
            "supervisor.workers: 'desk' is the front agent; it cannot be a worker",
        ),
        (
            'id = "worker"',
            'id = "worker"\nllm = { provider = "openai" }',
            "agents[1].llm.model: provider 'openai' needs a model name",
        ),
        (
            'id = "desk"',
            'id = "desk"\nllm = { provider = "openai", model = "m" }',
            "agents[0].scripted: rules are only used with llm = 'scripted'",
        ),
        ('title = "Mini desk"', "", None),
    ],
)
def test_more_field_errors(tmp_path: Path, old: str, new: str, expected: str | None) -> None:
    text = VALID.replace(old, new, 1)
    if expected is None:
        load_desk_file(write_desk(tmp_path, text))  # title is optional
        return
    assert expected in error_of(tmp_path, text)


def test_loop_without_supervisor_needs_a_front_agent(tmp_path: Path) -> None:
    text = 'name = "solo"\n[[agents]]\nid = "w"\n[[agents]]\nid = "r"\n'
    text += '[loop]\nproducer = "w"\nreviewers = ["r"]\n'
    assert "loop.agent: name the front agent" in error_of(tmp_path, text)


def test_missing_required_fields(tmp_path: Path) -> None:
    message = error_of(tmp_path, 'title = "x"\n')
    assert f"{tmp_path / 'mini.toml'}: name: required field is missing" in message
    assert "agents: required field is missing" in message


def test_duplicate_desk_names_in_a_folder(tmp_path: Path) -> None:
    write_desk(tmp_path, VALID, "a.toml")
    write_desk(tmp_path, VALID, "b.toml")
    with pytest.raises(ConfigError) as caught:
        load_desk_folder(tmp_path)
    assert str(caught.value) == (
        f"{tmp_path / 'b.toml'}: name: desk name 'mini' is already used by "
        f"{tmp_path / 'a.toml'}; desk names must be unique"
    )


def test_missing_file_and_folder(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="desk file not found"):
        load_desk_file(tmp_path / "nope.toml")
    with pytest.raises(ConfigError, match="no such desk folder"):
        load_desk_folder(tmp_path / "nope")


def test_desk_config_is_immutable(tmp_path: Path) -> None:
    config = load_desk_file(write_desk(tmp_path, VALID))
    with pytest.raises(ValueError):
        config.name = "other"  # type: ignore[misc]
    assert isinstance(config, DeskConfig)


# -- [manager], [blackboard] and plan-and-execute workers ------------------------------------

MANAGER = '\n[manager]\nagent = "desk"\n'
BOARD = """
[[agents]]
id = "boss"
[[agents]]
id = "finder"
[[agents]]
id = "outliner"
[[agents]]
id = "scribe"

[blackboard]
orchestrator = "boss"
researcher = "finder"
planner = "outliner"
writer = "scribe"
"""
PLANNER = """
[[agents]]
id = "thinker"
kind = "plan_and_execute"
tools = ["search_knowledge"]

[[agents.scripted.rules]]
on = "instruction"
regex = "Make a plan"
tool = "submit_thought"
arguments = { reasoning = "r", criticism = "c", plan = [{ tool_name = "search_knowledge", \
parameters = { query = "{last_user}" } }] }
"""


def test_manager_blackboard_and_planner_sections_load(tmp_path: Path) -> None:
    config = load_desk_file(write_desk(tmp_path, VALID + MANAGER + BOARD + PLANNER))
    assert config.manager_agent_id == config.blackboard_agent_id == "desk"
    assert config.orchestration_tools("desk") == [
        "delegate_workers",
        "check_tasks",
        "cancel_task",
        "list_agents",
        "list_workflows",
        "delegate",
        "start_report",
    ]
    assert config.agent("thinker").kind == "plan_and_execute"


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ('\n[manager]\nagent = "ghost"\n', "manager.agent: unknown agent 'ghost'"),
        (MANAGER + 'agents = ["worker", "nobody"]\n', "manager.agents[1]: unknown agent 'nobody'"),
        (MANAGER + 'agents = ["desk"]\n', "manager.agents[0]: 'desk' is the manager"),
        (
            '\n[manager]\nagent = "worker"\n',
            "manager.agent: 'worker' never talks with the caller, so it cannot route",
        ),
        (MANAGER + 'mode = "quick"\n', "manager.mode: Input should be 'background' or 'answer'"),
        (
            MANAGER + 'mode = "answer"\ndelegation_message = "x"\n',
            "manager.delegation_message: mode 'answer' speaks the result itself",
        ),
        (MANAGER + 'desks = ["mini"]\n', "manager.desks[0]: this desk's own agents"),
        (MANAGER + "wokflows = []\n", "manager.wokflows: unknown field 'wokflows' (did you mean"),
        (
            BOARD.replace('writer = "scribe"', 'writer = "ghost"'),
            "blackboard.writer: unknown agent",
        ),
        (
            BOARD.replace('planner = "outliner"', 'planner = "finder"'),
            "blackboard.planner: 'finder' is already the researcher",
        ),
        (
            BOARD.replace('orchestrator = "boss"', 'orchestrator = "desk"'),
            "blackboard.orchestrator: 'desk' talks with the caller",
        ),
        (BOARD.replace('writer = "scribe"', ""), "blackboard.writer: required field is missing"),
        (BOARD + "max_steps = 0\n", "blackboard.max_steps: Input should be greater than"),
        (
            PLANNER.replace('id = "thinker"', 'id = "thinker"\nmax_revisions = -1'),
            "agents[2].max_revisions: Input should be greater than or equal to 0",
        ),
        (
            PLANNER.replace('kind = "plan_and_execute"', 'kind = "planner"'),
            "agents[2].kind: Input should be 'agent' or 'plan_and_execute'",
        ),
        (
            '\n[[agents]]\nid = "x"\nmax_revisions = 1\n',
            "agents[2].max_revisions: only used with kind = 'plan_and_execute'",
        ),
        (
            PLANNER.replace('tool_name = "search_knowledge"', 'tool_name = "teleport"'),
            "agents[2].scripted.rules[0].arguments.plan[0].tool_name: 'thinker' cannot plan "
            "with 'teleport' (its tools: search_knowledge)",
        ),
        (
            PLANNER.replace('{ tool_name = "search_knowledge", ', "{ "),
            "agents[2].scripted.rules[0].arguments.plan[0].tool_name: not a valid plan",
        ),
        (
            PLANNER.replace('criticism = "c", ', ""),
            "agents[2].scripted.rules[0].arguments.criticism: not a valid plan: Field required",
        ),
        (
            PLANNER.replace("{last_user}", "{topic}"),
            "agents[2].scripted.rules[0].arguments.plan[0].parameters.query: unknown "
            "placeholder {topic}",
        ),
        (
            PLANNER.replace('tool = "submit_thought"', 'tool = "submit_verdict"'),
            "agents[2].scripted.rules[0].tool: tool 'submit_verdict' is not available to agent "
            "'thinker' (it has search_knowledge, submit_thought, submit_analysis)",
        ),
    ],
)
def test_bad_coordination_sections_name_the_field(
    tmp_path: Path, extra: str, expected: str
) -> None:
    assert expected in error_of(tmp_path, VALID + extra)


def test_a_plan_and_execute_agent_only_works_on_tasks(tmp_path: Path) -> None:
    worker = VALID.replace('id = "worker"', 'id = "worker"\nkind = "plan_and_execute"')
    # Fine as a supervisor's worker; not as the agent on the call.
    load_desk_file(write_desk(tmp_path, worker))
    front = VALID.replace('id = "desk"', 'id = "desk"\nkind = "plan_and_execute"')
    message = error_of(tmp_path, front)
    assert "agents[0].kind: 'desk' is kind 'plan_and_execute', a worker" in message
    assert "it cannot be an agent that talks with the caller" in message
    reviewer = VALID + '[loop]\nproducer = "worker"\nreviewers = ["rev"]\n'
    reviewer += '[[agents]]\nid = "rev"\nkind = "plan_and_execute"\n'
    assert "loop.reviewers[0]: 'rev' is kind 'plan_and_execute'" in error_of(tmp_path, reviewer)
    board = VALID + BOARD.replace('id = "boss"', 'id = "boss"\nkind = "plan_and_execute"')
    assert "blackboard.orchestrator: 'boss' is kind 'plan_and_execute'" in error_of(tmp_path, board)


def test_section_tools_are_not_builtins(tmp_path: Path) -> None:
    text = VALID.replace(
        'id = "worker"\ntools = ["search_knowledge"]', 'id = "worker"\ntools = ["delegate"]'
    )
    assert "agents[1].tools[0]: 'delegate' is not listed in tools: the desk's [manager]" in (
        error_of(tmp_path, text)
    )


def test_realtime_engine_and_its_table(tmp_path: Path) -> None:
    realtime = '[voice]\nengine = "openai-realtime"\n[voice.realtime]\nvoice = "cedar"\n'
    realtime += 'turn_detection = "semantic_vad"\ninjection_role = "user"\n[delivery]'
    path = write_desk(tmp_path, VALID.replace("[delivery]", realtime), "rt.toml")
    voice = load_desk_file(path).voice
    assert voice.engine == "openai-realtime"
    settings = voice.realtime_model
    assert (settings.voice, settings.turn_detection, settings.injection_role) == (
        "cedar",
        "semantic_vad",
        "user",
    )
    message = error_of(
        tmp_path, VALID.replace("[delivery]", '[voice]\nvad = "openai-realtime"\n[delivery]')
    )
    assert "use engine" in message
    message = error_of(
        tmp_path, VALID.replace("[delivery]", '[voice.realtime]\nvoice = "cedar"\n[delivery]')
    )
    assert "voice.realtime: only used with engine = 'openai-realtime'" in message
    bad_voice = realtime.replace('"cedar"', '"piper"')
    assert "voice.realtime.voice" in error_of(tmp_path, VALID.replace("[delivery]", bad_voice))
