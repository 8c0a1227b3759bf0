"""The directory: agents from desk files, workflows from channels/workflows/."""

from __future__ import annotations

from pathlib import Path

import pytest

from voicehub.agents.agent import Agent
from voicehub.errors import ConfigError
from voicehub.orchestration.directory import (
    AgentSummary,
    Directory,
    Workflow,
    WorkflowStep,
    WorkflowSummary,
)

REPO_CHANNELS = Path(__file__).resolve().parents[2] / "channels"

DESK = """
name = "support"
[[agents]]
id = "triage"
description = "Sorts incoming problems."
keywords = ["support", "triage"]
when_to_use = "Someone reports a problem."
when_not_to_use = "Sales questions."
tools = ["search_knowledge"]          # other fields are the desk loader's business
[agents.scripted]
fallback = "Hm?"

[[agents]]
id = "billing"
description = "Answers invoice questions."
"""

WORKFLOW = """
name = "refund"
description = "Refunds an order."
goal = "The money is back on the card."
keywords = ["refund", "money back"]
when_to_use = "A customer wants a refund."
when_not_to_use = "An exchange."

[[steps]]
agent = "billing"
task = "Refund {instruction}"
"""


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_from_folder_reads_desk_agents_and_workflows(tmp_path: Path) -> None:
    write(tmp_path, "support.toml", DESK)
    path = write(tmp_path, "workflows/refund.toml", WORKFLOW)
    directory = Directory.from_folder(tmp_path)

    assert directory.agent_summaries() == [
        AgentSummary(
            name="triage",
            description="Sorts incoming problems.",
            source="support.toml",
            keywords=("support", "triage"),
            when_to_use="Someone reports a problem.",
            when_not_to_use="Sales questions.",
        ),
        AgentSummary(
            name="billing", description="Answers invoice questions.", source="support.toml"
        ),
    ]
    assert directory.workflow_summaries() == [
        WorkflowSummary(
            name="refund",
            description="Refunds an order.",
            goal="The money is back on the card.",
            path=str(path),
            keywords=("refund", "money back"),
            when_to_use="A customer wants a refund.",
            when_not_to_use="An exchange.",
        )
    ]
    workflow = directory.workflow("refund")
    assert workflow is not None
    assert workflow.steps == (WorkflowStep(agent="billing", task="Refund {instruction}"),)
    agent = directory.agent("triage")
    assert agent is not None and agent.llm is None  # discovery only


def test_workflow_name_defaults_to_the_file_name_and_folder_is_optional(tmp_path: Path) -> None:
    write(tmp_path, "support.toml", DESK)
    assert Directory.from_folder(tmp_path).workflow_names == []
    write(tmp_path, "workflows/quick-check.toml", 'description = "d"\ngoal = "g"\nephemeral = true')
    (summary,) = Directory.from_folder(tmp_path).workflow_summaries()
    assert (summary.name, summary.ephemeral) == ("quick-check", True)


def test_the_first_desk_declaring_an_agent_wins(tmp_path: Path) -> None:
    write(tmp_path, "a.toml", '[[agents]]\nid = "desk"\ndescription = "first"')
    write(tmp_path, "b.toml", '[[agents]]\nid = "desk"\ndescription = "second"')
    (summary,) = Directory.from_folder(tmp_path).agent_summaries()
    assert (summary.description, summary.source) == ("first", "a.toml")


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("desk.toml", "[[agents]]\ndescription = 'no id'", "desk.toml: agents[0].id: required"),
        ("desk.toml", "[[agents]]\nid = 'a b'", "desk.toml: agents[0].id: agent id 'a b'"),
        ("desk.toml", "[[agents]]\nid = 'a'\nkeywords = 'x'", "desk.toml: agents[0].keywords"),
        ("desk.toml", "agents = 3", "desk.toml: agents: must be a list"),
        ("desk.toml", "name = [", "desk.toml: TOML syntax error"),
        ("workflows/w.toml", "description = 'd'", "w.toml: goal: required field is missing"),
        ("workflows/w.toml", "description = 'd'\ngoal = 'g'\ngaol = 1", "w.toml: gaol: unknown"),
        ("workflows/w.toml", "description='d'\ngoal='g'\nname='a b'", "w.toml: name: workflow"),
        (
            "workflows/w.toml",
            "description='d'\ngoal='g'\n[[steps]]\nagent='ghost'",
            "w.toml: steps[0].agent: unknown agent 'ghost'; known agents: billing, triage",
        ),
        (
            "workflows/w.toml",
            "description='d'\ngoal='g'\n[[steps]]\ntask='x'",
            "w.toml: steps[0].agent: required field is missing",
        ),
    ],
)
def test_broken_files_name_the_file_and_field(
    tmp_path: Path, name: str, text: str, message: str
) -> None:
    if name.startswith("workflows/"):
        write(tmp_path, "support.toml", DESK)
    write(tmp_path, name, text)
    with pytest.raises(ConfigError) as raised:
        Directory.from_folder(tmp_path)
    assert message in str(raised.value)


def test_missing_folder_and_duplicate_workflow_names(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such channels folder"):
        Directory.from_folder(tmp_path / "nope")
    write(tmp_path, "workflows/a.toml", "name='same'\ndescription='d'\ngoal='g'")
    write(tmp_path, "workflows/b.toml", "name='same'\ndescription='d'\ngoal='g'")
    with pytest.raises(ConfigError, match=r"b\.toml: name: workflow name 'same' is already used"):
        Directory.from_folder(tmp_path)


def test_directory_from_code_and_close_matches() -> None:
    agents = [(Agent(id="researcher"), "code"), (Agent(id="writer"), "code")]
    flows: list[Workflow | WorkflowSummary] = [
        WorkflowSummary(name="market-brief", goal="g"),
        Workflow(summary=WorkflowSummary(name="weekly"), steps=(WorkflowStep(agent="writer"),)),
    ]
    directory = Directory(agents, flows)
    assert directory.agent_names == ["researcher", "writer"]
    assert directory.workflow_names == ["market-brief", "weekly"]
    assert directory.close_matches("agent", "reserch") == ["researcher"]
    assert directory.close_matches("agent", "Writer") == ["writer"]
    assert directory.close_matches("workflow", "market") == ["market-brief"]
    assert directory.close_matches("agent", "zzz") == []
    with pytest.raises(ConfigError, match=r"workflow 'bad': steps\[0\]\.agent: unknown agent"):
        Directory(
            agents,
            [Workflow(summary=WorkflowSummary(name="bad"), steps=(WorkflowStep(agent="x"),))],
        )


def test_the_example_workflows_load_with_the_example_desks() -> None:
    directory = Directory.from_folder(REPO_CHANNELS)
    assert {"market-brief", "support-escalation"} <= set(directory.workflow_names)
    brief = directory.workflow("market-brief")
    assert brief is not None and [s.agent for s in brief.steps] == ["analyst-a", "analyst-b"]
    assert all(s.source.endswith(".toml") for s in directory.agent_summaries())
