"""Desks whose keys are missing: they load, list and validate, but refuse calls.

A desk naming a cloud model or Deepgram must not stop the server (or `voicehub channels`)
when its key is not exported: the other desks keep serving. The agent gets a
:class:`MissingKeyLLM` that explains itself if used, and :func:`missing_keys` tells the
call factory (and the CLI listing) what is missing.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING

from voicehub.agents.llm import ChatMessage, LLMChunk, ToolChoice, ToolSpec
from voicehub.errors import ConfigError

if TYPE_CHECKING:
    from voicehub.desks.desk import Desk

__all__ = ["MissingKeyLLM", "missing_keys"]


class MissingKeyLLM:
    """Stands in for a model whose key is unset; using it raises ConfigError(`message`)."""

    def __init__(self, message: str) -> None:
        self.message = message

    async def stream(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolSpec] = (),
        *,
        tool_choice: ToolChoice = "auto",
    ) -> AsyncIterator[LLMChunk]:
        raise ConfigError(self.message)
        yield  # an async generator, like every LLM's stream


def missing_keys(desk: Desk) -> list[str]:
    """One message per missing key the desk needs (its agents' models, Deepgram)."""
    from voicehub.desks import deepgram_stack

    problems = [a.llm.message for a in desk.agents.values() if isinstance(a.llm, MissingKeyLLM)]
    if deepgram_stack.uses_deepgram(desk):
        try:
            deepgram_stack.require_key(desk)
        except ConfigError as exc:
            problems.append(str(exc))
    return list(dict.fromkeys(problems))
