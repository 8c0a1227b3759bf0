"""A desk file's `[[agents]]` tables -> runnable `Agent`s (models, builtin tools, kinds).

A `kind = "plan_and_execute"` agent is a worker: its model plans tool calls through
`submit_thought`, each step is checked through `submit_analysis`, and the final answer is the
task's output (`voicehub.orchestration.planner.PlanAndExecute.as_agent`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from voicehub.agents.agent import Agent
from voicehub.agents.llm import LLM
from voicehub.agents.scripted import ScriptedLLM
from voicehub.desks.config import DeskConfig
from voicehub.desks.keys import MissingKeyLLM
from voicehub.desks.sections import AgentConfig
from voicehub.errors import ConfigError
from voicehub.orchestration.planner import PlanAndExecute
from voicehub.tools.knowledge import KnowledgeBase
from voicehub.tools.registry import DeskResources, make_tools


def desk_knowledge(config: DeskConfig, base: Path, where: str) -> KnowledgeBase | None:
    """The desk's knowledge base (None without `[knowledge]`); errors name the file."""
    if config.knowledge is None:
        return None
    try:
        return KnowledgeBase.from_file(base / config.knowledge.file)
    except ConfigError as exc:
        raise ConfigError(f"{where}: knowledge.file: {exc}") from None


def build_agents(config: DeskConfig, where: str, resources: DeskResources) -> dict[str, Agent]:
    """Every agent of `config`, by id, with its own tools (not what the sections add)."""
    return {
        spec.id: build_agent(spec, f"{where}: agents[{index}]", resources, config.name)
        for index, spec in enumerate(config.agents)
    }


def build_agent(spec: AgentConfig, where: str, resources: DeskResources, desk: str) -> Agent:
    """One agent; `where` prefixes errors (`channels/x.toml: agents[1]`)."""
    try:
        tools = tuple(make_tools(spec.tools, resources))
        llm = _build_llm(spec)
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    if isinstance(llm, MissingKeyLLM):
        llm.message = f"{where}: {llm.message}"
    fields: dict[str, Any] = {
        "role": spec.role,
        "keywords": spec.keywords,
        "when_to_use": spec.when_to_use,
        "when_not_to_use": spec.when_not_to_use,
        "voice": spec.voice,
        "metadata": {"desk": desk},
    }
    if spec.kind == "plan_and_execute":
        planner = PlanAndExecute(
            llm,
            tools,
            instructions=spec.instructions,
            max_revisions=2 if spec.max_revisions is None else spec.max_revisions,
            max_steps=spec.max_steps,
        )
        return planner.as_agent(
            spec.id, description=spec.description, instructions=spec.instructions, **fields
        )
    return Agent(
        id=spec.id,
        description=spec.description,
        instructions=spec.instructions,
        llm=llm,
        tools=tools,
        max_steps=spec.max_steps,
        **fields,
    )


def _build_llm(spec: AgentConfig) -> LLM:
    settings = spec.llm
    if settings.provider == "scripted":
        scripted = spec.scripted
        if scripted is None:
            return ScriptedLLM()
        return ScriptedLLM(
            scripted.rules,
            fallback=scripted.fallback,
            instruction_fallback=scripted.instruction_fallback,
        )
    # Imported here: the openai extra is optional and only needed by desks that use it.
    from voicehub.agents.openai import OpenAIChatLLM

    assert settings.model is not None  # the config requires a model for provider "openai"
    key = os.environ.get(settings.api_key_env) if settings.api_key_env else None
    if settings.api_key_env and not key:
        # the desk still loads (other desks keep serving); its calls are refused
        unset = f"environment variable {settings.api_key_env} is unset"
        return MissingKeyLLM(f"llm.api_key_env: {unset}")
    return OpenAIChatLLM(
        settings.model,
        api_key=key,
        base_url=settings.base_url,
        temperature=settings.temperature,
    )
