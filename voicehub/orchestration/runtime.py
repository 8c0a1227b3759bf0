"""What orchestration needs of the hub: the core runtime plus delegation, delivery and the
agents of a room. `voicehub.hub.Hub` implements it; orchestration never imports the hub."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, cast, runtime_checkable

from voicehub.core.runtime import Runtime
from voicehub.errors import ToolError

if TYPE_CHECKING:
    from voicehub.agents.agent import Agent
    from voicehub.core.room import Room
    from voicehub.delivery.policy import StrategyLike
    from voicehub.orchestration.base import Orchestration
    from voicehub.orchestration.delegation import Delegation, TaskHandle


@runtime_checkable
class OrchestrationRuntime(Runtime, Protocol):
    """The hub as orchestration sees it."""

    @property
    def tasks(self) -> Delegation: ...

    def agents_of(self, room_id: str | None) -> Mapping[str, Agent]:
        """The agents room `room_id` can reach by id: its orchestration's (a child room uses
        its root room's), then those registered on the hub. Two desks may share an id."""
        ...

    def agent(self, agent_id: str, room_id: str | None = None) -> Agent:
        """The agent `agent_id` as seen from `room_id`; raises UnknownAgentError."""
        ...

    def orchestration_of(self, room_id: str) -> Orchestration | None: ...

    async def delegate(
        self,
        agent: Agent | str,
        task: str,
        parent_room: str | Room,
        *,
        share_channels: Sequence[str] | None = None,
        timeout: float | None = None,
        metadata: dict[str, Any] | None = None,
        stop_tools: Sequence[str] = (),
    ) -> TaskHandle: ...

    async def deliver(
        self,
        room_id: str,
        content: str,
        strategy: StrategyLike | None = None,
        *,
        metadata: dict[str, Any] | None = None,
        delivery_id: str | None = None,
    ) -> str: ...


def orchestration_runtime(runtime: Runtime | None, needed_by: str) -> OrchestrationRuntime:
    """The runtime a tool context or room carries, as the full one orchestration needs.

    Tools and rooms hold the narrow core `Runtime`; orchestration tools need delegation and
    delivery too. A plain core runtime (a test double, say) gets a clear error naming the
    tool instead of an AttributeError deep inside it.
    """
    if runtime is None:
        raise ToolError(f"{needed_by} needs a hub; it was called outside one")
    kind = type(runtime)
    if kind in _FULL_RUNTIMES:
        return cast("OrchestrationRuntime", runtime)
    # isinstance on a runtime-checkable protocol inspects every member (about 20 us):
    # a type that passed once passes again
    if not isinstance(runtime, OrchestrationRuntime):
        raise ToolError(
            f"{needed_by} needs a hub that delegates and delivers, not a {type(runtime).__name__}"
        )
    _FULL_RUNTIMES.add(kind)
    return runtime


_FULL_RUNTIMES: set[type] = set()
