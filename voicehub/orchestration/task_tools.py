"""Tools a caller uses through the supervisor to follow background work:
`check_tasks` ("how is it going?") and `cancel_task` ("never mind")."""

from __future__ import annotations

from voicehub.agents.tools import Tool, ToolContext
from voicehub.errors import ToolError
from voicehub.orchestration.runtime import OrchestrationRuntime, orchestration_runtime


async def check_tasks(context: ToolContext) -> str:
    """Report the background tasks of this conversation: running ones and recent results."""
    hub = _hub(context)
    records = await hub.store.list_tasks(parent_room_id=context.room_id)
    if not records:
        return "No background tasks have been started in this conversation."
    running = [r for r in records if not r.status.finished]
    finished = [r for r in records if r.status.finished]
    parts = []
    if running:
        names = ", ".join(f"{r.agent_id} ({r.status.value})" for r in running)
        parts.append(f"{len(running)} still working: {names}.")
    if finished:
        done = ", ".join(f"{r.agent_id} {r.status.value.replace('_', ' ')}" for r in finished[-5:])
        parts.append(f"{len(finished)} finished: {done}.")
    return " ".join(parts)


async def cancel_task(context: ToolContext, task_id: str = "") -> str:
    """Cancel one background task by id, or every running task of this conversation when no
    id is given."""
    hub = _hub(context)
    if task_id:
        handle = hub.tasks.get(task_id)
        if handle is None or handle.parent_room_id != context.room_id:
            live = ", ".join(h.task_id for h in hub.tasks.of_room(context.room_id)) or "none"
            raise ToolError(f"no running task {task_id!r} here; running tasks: {live}")
        await hub.tasks.cancel(task_id)
        return f"Cancelled {handle.agent_id}."
    handles = hub.tasks.of_room(context.room_id)
    await hub.jobs.cancel_room(context.room_id)
    for handle in handles:
        await hub.tasks.cancel(handle.task_id)
    if not handles:
        return "There was nothing running to cancel."
    return f"Cancelled {len(handles)} running task{'s' if len(handles) != 1 else ''}."


def _hub(context: ToolContext) -> OrchestrationRuntime:
    return orchestration_runtime(context.hub, "this tool")


def task_tools() -> list[Tool]:
    return [Tool(check_tasks), Tool(cancel_task)]
