"""Builtin tools a desk file can give its agents by name (`tools = ["search_knowledge"]`).

Each builtin is a factory from the desk's resources (its knowledge base, ...) to a `Tool`, so
two desks never share state through a tool. Orchestration tools (`delegate_workers`,
`delegate_loop`, `check_tasks`, `cancel_task`, `submit_verdict`) are not builtins: the desk's
`[supervisor]` and `[loop]` sections add them to the right agents.

The telephony tools act on the live call (`voicehub.tools.telephony`): `transfer_call` needs
the desk's `[transfer]` table and brings `take_message` with it (when nobody answers, the agent
offers to take a message); `send_dtmf` presses keys on the caller's phone line.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from voicehub.agents.tools import Tool
from voicehub.errors import ConfigError
from voicehub.tools.call_control import TransferPlan
from voicehub.tools.knowledge import KnowledgeBase, search_knowledge_tool
from voicehub.tools.telephony import send_dtmf_tool, take_message_tool, transfer_call_tool

ORCHESTRATION_TOOLS: Mapping[str, str] = MappingProxyType(
    {
        "delegate_workers": "[supervisor]",
        "delegate_loop": "[loop]",
        "check_tasks": "[supervisor] or [loop]",
        "cancel_task": "[supervisor] or [loop]",
        "submit_verdict": "[loop] (for its reviewers)",
    }
)


@dataclass(frozen=True)
class DeskResources:
    """What builtin tools of one desk may use."""

    knowledge: KnowledgeBase | None = None
    transfer: TransferPlan | None = None
    external: Mapping[str, Tool] = field(default_factory=dict)
    """Tools from outside voicehub by the name a desk file gives them (its MCP servers'
    `"server.tool"`)."""


@dataclass(frozen=True)
class BuiltinTool:
    """A named tool factory, and what the desk must provide for it. `companions` come
    with it (named in `tools` or not)."""

    name: str
    factory: Callable[[DeskResources], Tool]
    needs_knowledge: bool = False
    needs_transfer: bool = False
    companions: tuple[str, ...] = ()


def _search_knowledge(resources: DeskResources) -> Tool:
    if resources.knowledge is None:
        raise ConfigError(_NEEDS_KNOWLEDGE.format(name="search_knowledge"))
    return search_knowledge_tool(resources.knowledge)


def _transfer_call(resources: DeskResources) -> Tool:
    if resources.transfer is None:
        raise ConfigError(NEEDS_TRANSFER)
    return transfer_call_tool(resources.transfer)


NEEDS_TRANSFER = (
    "tool 'transfer_call' needs a [transfer] table with targets, for example: "
    '[transfer.targets] billing = "+15550100300"'
)

_NEEDS_KNOWLEDGE = (
    'tool {name!r} needs a knowledge base: add `[knowledge] file = "knowledge/<desk>.toml"` '
    "to the desk file"
)

BUILTIN_TOOLS: Mapping[str, BuiltinTool] = MappingProxyType(
    {
        "search_knowledge": BuiltinTool(
            "search_knowledge", _search_knowledge, needs_knowledge=True
        ),
        "transfer_call": BuiltinTool(
            "transfer_call", _transfer_call, needs_transfer=True, companions=("take_message",)
        ),
        "take_message": BuiltinTool("take_message", lambda _: take_message_tool()),
        "send_dtmf": BuiltinTool("send_dtmf", lambda _: send_dtmf_tool()),
    }
)


def builtin_tool_names() -> list[str]:
    """Names a desk file may list in an agent's `tools`."""
    return sorted(BUILTIN_TOOLS)


def unknown_tool_message(name: str) -> str:
    """Why `name` is not a builtin tool, and what to write instead."""
    section = ORCHESTRATION_TOOLS.get(name)
    if section is not None:
        return f"{name!r} is not listed in tools: the desk's {section} section adds it"
    return f"unknown builtin tool {name!r}; known builtin tools: {', '.join(builtin_tool_names())}"


def needs_knowledge_message(name: str) -> str:
    """The error for a knowledge tool on a desk without a `[knowledge]` table."""
    return _NEEDS_KNOWLEDGE.format(name=name)


def with_companions(names: Sequence[str]) -> list[str]:
    """`names` and the tools that come with them, each once, in order."""
    found: list[str] = []
    for name in names:
        builtin = BUILTIN_TOOLS.get(name)
        for each in (name, *(builtin.companions if builtin is not None else ())):
            if each not in found:
                found.append(each)
    return found


def make_tools(names: Sequence[str], resources: DeskResources) -> list[Tool]:
    """The builtin tools `names` and their companions (see `make_tool`)."""
    return [make_tool(name, resources) for name in with_companions(names)]


def make_tool(name: str, resources: DeskResources) -> Tool:
    """Build builtin tool `name` for a desk. Raises ConfigError for unknown names (listing the
    known ones) and for missing resources."""
    external = resources.external.get(name)
    if external is not None:
        return external
    builtin = BUILTIN_TOOLS.get(name)
    if builtin is None:
        raise ConfigError(unknown_tool_message(name))
    return builtin.factory(resources)
