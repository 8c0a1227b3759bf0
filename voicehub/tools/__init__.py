"""Builtin tools that desk files give agents by name, and what they need (a knowledge base)."""

from voicehub.tools.knowledge import KnowledgeBase, KnowledgeEntry, search_knowledge_tool
from voicehub.tools.registry import (
    BUILTIN_TOOLS,
    DeskResources,
    builtin_tool_names,
    make_tool,
)

__all__ = [
    "BUILTIN_TOOLS",
    "DeskResources",
    "KnowledgeBase",
    "KnowledgeEntry",
    "builtin_tool_names",
    "make_tool",
    "search_knowledge_tool",
]
