"""A process's part in instance loss: its heartbeat, and how a lost instance's work is
picked up here with the right desk (`voicehub.orchestration.instances` and `.recovery`).

A conversation's room is `<desk>:<conversation>`; the desk's `[supervisor] on_instance_loss`
says whether its lost workers run again here ("retry", the default) or are reported failed.
A room re-run here is loaded with the desk's call orchestration (its agents) and unloaded
again afterwards unless a call holds it here; the report is delivered like any result, so a
caller on a call here hears it, a caller on another instance hears it there, and one who
hung up hears it when they call back.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from voicehub.errors import VoicehubError
from voicehub.orchestration.instances import InstanceHeartbeat
from voicehub.orchestration.recovery import (
    DEFAULT_ON_INSTANCE_LOSS,
    OnInstanceLoss,
    TaskRecovery,
)

if TYPE_CHECKING:
    from voicehub.desks.call_lifecycle import CallLifecycle
    from voicehub.desks.desk import Desk
    from voicehub.desks.runtime_settings import RuntimeSettings
    from voicehub.hub import Hub

__all__ = ["DeskRooms", "desk_heartbeat"]


class DeskRooms:
    """`LossHandling` over a process's desks and live calls."""

    def __init__(self, hub: Hub, desks: Mapping[str, Desk], calls: CallLifecycle) -> None:
        self.hub = hub
        self.desks = desks
        self.calls = calls

    def desk_of(self, room_id: str) -> Desk | None:
        return self.desks.get(room_id.split(":", 1)[0])

    def on_instance_loss(self, room_id: str) -> OnInstanceLoss:
        desk = self.desk_of(room_id)
        if desk is None or desk.config.supervisor is None:
            return DEFAULT_ON_INSTANCE_LOSS
        return desk.config.supervisor.on_instance_loss

    async def open_room(self, room_id: str) -> None:
        if room_id in self.hub.rooms:
            return
        desk = self.desk_of(room_id)
        if desk is None:
            known = ", ".join(sorted(self.desks)) or "none"
            raise VoicehubError(
                f"cannot take over room {room_id!r}: its desk is not served here ({known})"
            )
        await self.hub.create_room(room_id, orchestration=desk.call_orchestration())

    async def release_room(self, room_id: str) -> None:
        if room_id not in self.calls.calls:
            await self.hub.release_room(room_id)


def desk_heartbeat(
    hub: Hub, desks: Mapping[str, Desk], calls: CallLifecycle, settings: RuntimeSettings
) -> InstanceHeartbeat:
    """This instance's heartbeat, whose sweeps for lost instances take their work over
    here with the right desk (start it with `start`)."""
    recovery = TaskRecovery(
        hub, DeskRooms(hub, desks, calls), instance_id=hub.instance_id, wall=hub.wall
    )
    heartbeat = InstanceHeartbeat(
        hub,
        recovery,
        interval=settings.heartbeat_interval,
        timeout=settings.instance_timeout,
    )
    return heartbeat
