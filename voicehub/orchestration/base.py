"""The orchestration base: a strategy installed in a room."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from voicehub.agents.agent import Agent
    from voicehub.orchestration.runtime import OrchestrationRuntime


class Orchestration(ABC):
    """Subclass to build a strategy: `agents()` lists the agents it uses, `install` wires
    channels, tools, hooks and state into one room."""

    @abstractmethod
    def agents(self) -> list[Agent]:
        """Agents to register with the hub."""

    @abstractmethod
    async def install(self, hub: OrchestrationRuntime, room_id: str) -> None:
        """Wire the strategy into room `room_id`."""
