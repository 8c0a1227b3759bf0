"""What callers of a desk are expected to say, for biasing the speech recognizer.

The front agent's words matter most (it is the one on the call): its scripted trigger
phrases, then the knowledge base's topics (what callers ask about), then the other agents'
phrases. Nothing here is tuned to particular sentences: it is read from the desk file.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from voicehub.agents.scripted import ScriptedLLM, rule_vocabulary

if TYPE_CHECKING:
    from voicehub.desks.desk import Desk

__all__ = ["desk_vocabulary"]


def desk_vocabulary(desk: Desk) -> list[str]:
    """Topics and trigger phrases of `desk`, most important first (may repeat)."""
    front = desk.entry_agent
    phrases: list[str] = []
    if desk.knowledge is not None:
        phrases += desk.knowledge.topics
    if isinstance(front.llm, ScriptedLLM):
        phrases += rule_vocabulary(front.llm.rules)
    for agent in desk.agents.values():
        if agent is not front and isinstance(agent.llm, ScriptedLLM):
            phrases += rule_vocabulary(agent.llm.rules)
    return phrases
