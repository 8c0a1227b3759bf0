"""Builtin tools a desk file can give its agents by name (`tools = ["search_knowledge"]`).

Each builtin is a factory from the desk's resources (its knowledge base, ...) to a `Tool`, so
two desks never share state through a tool. Orchestration tools (`delegate_workers`,
`delegate_loop`, `check_tasks`, `cancel_task`, `submit_verdict`) are not builtins: the desk's
`[supervisor]` and `[loop]` sections add them to the right agents.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from voicehub.agents.tools import Tool
from voicehub.errors import ConfigError
from voicehub.tools.knowledge import KnowledgeBase, search_knowledge_tool

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


@dataclass(frozen=True)
class BuiltinTool:
    """A named tool factory, and what the desk must provide for it."""

    name: str
    factory: Callable[[DeskResources], Tool]
    needs_knowledge: bool = False


def _search_knowledge(resources: DeskResources) -> Tool:
    if resources.knowledge is None:
        raise ConfigError(_NEEDS_KNOWLEDGE.format(name="search_knowledge"))
    return search_knowledge_tool(resources.knowledge)


_NEEDS_KNOWLEDGE = (
    'tool {name!r} needs a knowledge base: add `[knowledge] file = "knowledge/<desk>.toml"` '
    "to the desk file"
)

BUILTIN_TOOLS: Mapping[str, BuiltinTool] = MappingProxyType(
    {
        "search_knowledge": BuiltinTool(
            "search_knowledge", _search_knowledge, needs_knowledge=True
        ),
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


def make_tool(name: str, resources: DeskResources) -> Tool:
    """Build builtin tool `name` for a desk. Raises ConfigError for unknown names (listing the
    known ones) and for missing resources."""
    builtin = BUILTIN_TOOLS.get(name)
    if builtin is None:
        raise ConfigError(unknown_tool_message(name))
    return builtin.factory(resources)
