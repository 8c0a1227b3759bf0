"""What callers of a desk are expected to say, for biasing the speech recognizer.

The knowledge base's topics (what callers ask about) come first, then the trigger phrases
of the front agent's scripted rules that call a tool (it is the one on the call), then the
other agents'. Phrases of rules that only say something (greetings, thanks) are left out:
with them in Whisper's prompt, requests it could not make out came back starting "Good
evening" (`voicehub bench --only phone`, wideband tool accuracy 0.973 with them, 0.987
without). Nothing here is tuned to particular sentences: it is read from the desk file.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from voicehub.agents.scripted import ScriptedLLM, example_requests, rule_vocabulary
from voicehub.voice.providers.offline.vocabulary_correction import VocabularyCorrection
from voicehub.voice.providers.offline.whisper_engine import sentences_prompt
from voicehub.voice.providers.offline.whisper_relisten import Relisten

if TYPE_CHECKING:
    from voicehub.desks.desk import Desk

__all__ = ["desk_correction", "desk_relisten", "desk_vocabulary"]


def desk_vocabulary(desk: Desk) -> list[str]:
    """Topics and the trigger phrases of tool-calling rules of `desk`, most important
    first (may repeat)."""
    front = desk.entry_agent
    phrases: list[str] = []
    if desk.knowledge is not None:
        phrases += desk.knowledge.topics
    if isinstance(front.llm, ScriptedLLM):
        phrases += rule_vocabulary(front.llm.rules, tools_only=True)
    for agent in desk.agents.values():
        if agent is not front and isinstance(agent.llm, ScriptedLLM):
            phrases += rule_vocabulary(agent.llm.rules, tools_only=True)
    return phrases


def desk_relisten(desk: Desk) -> Relisten | None:
    """When the recognizer listens to audio again (`whisper_relisten`): when the front
    agent's scripted rules call no tool for what it heard, or call one about none of the
    desk's topics; and the second hearing, decoded with the desk's requests as whole
    sentences for its prompt (`example_requests`), is believed when they do and it names one
    of the desk's knowledge topics. None for a desk
    whose front agent is not scripted (a model's choice of tool cannot be asked in advance)
    or that has no knowledge topics."""
    front = desk.entry_agent
    if not isinstance(front.llm, ScriptedLLM) or desk.knowledge is None:
        return None
    if not desk.knowledge.topics:
        return None
    topics = tuple(desk.knowledge.topics)
    return Relisten(
        is_request=front.llm.calls_tool,
        topics=topics,
        asks_about=front.llm.tool_arguments,
        prompt=sentences_prompt(example_requests(front.llm.rules, topics)),
    )


def desk_correction(desk: Desk) -> VocabularyCorrection | None:
    """Correction of what the recognizer hears to `desk`'s knowledge topics
    (`vocabulary_correction`: "installation" -> "insulation"); None for a desk without
    knowledge topics."""
    if desk.knowledge is None or not desk.knowledge.topics:
        return None
    return VocabularyCorrection(topics=tuple(desk.knowledge.topics))
