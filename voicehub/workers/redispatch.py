"""Taking up a LiveKit room whose job died: another worker is dispatched to it.

LiveKit ends the jobs of a worker whose process dies, and nobody comes back to the room: the
caller waits in silence. Every voicehub process on the store sweeps for lost instances
(`voicehub.orchestration.instances`); for each LiveKit call a lost instance (a job process)
still carried, one survivor (it claims the call record first, compare-and-set) asks
LiveKit's API whether the caller is still in the room and, if so, creates an explicit
dispatch of the desk's agent to that room. The job that starts there serves the caller on
the same conversation: it takes the call up as a fail-over (the caller hears they were lost
for a moment), and the results the lost job's workers finish (taken over by the sweep too)
are spoken there.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from voicehub.core.store.base import CallRecord, CallState
from voicehub.core.trusted import replace
from voicehub.voice.providers import vendor_import

with vendor_import("livekit-agents"):
    from livekit import api

if TYPE_CHECKING:
    from voicehub.core.store.base import Store

__all__ = ["LINE_AGENT", "LINE_IDENTITY", "LINE_METADATA", "LINE_ROOM", "RoomRedispatch"]

log = logging.getLogger("voicehub.workers")

# The call record's `line` ids of a LiveKit call.
LINE_ROOM = "livekit_room"
LINE_AGENT = "agent_name"
LINE_METADATA = "job_metadata"
LINE_IDENTITY = "identity"


class RoomRedispatch:
    """Dispatches the desk's agent again to the rooms of lost jobs whose caller stayed.

    `owner` is this instance (it claims a call record before acting on it); `url`,
    `api_key`, `api_secret` reach LiveKit's server API."""

    def __init__(
        self,
        store: Store,
        owner: str,
        *,
        url: str,
        api_key: str,
        api_secret: str,
        wall: Callable[[], float],
    ) -> None:
        self.store = store
        self.owner = owner
        self.url, self.api_key, self.api_secret = url, api_key, api_secret
        self.wall = wall
        self.dispatched: list[str] = []  # room names, in order

    async def instance_lost(self, instance_id: str) -> None:
        """`instance_id` was lost (heartbeat sweep): take up its LiveKit calls."""
        for record in await self.store.list_calls(owner=instance_id):
            if record.transport == "livekit":
                await self.take_up(record)

    async def take_up(self, record: CallRecord) -> bool:
        """Claim `record`'s call and dispatch an agent to its room if the caller is there;
        False if another instance changed the record first."""
        room = record.line.get(LINE_ROOM, "")
        claimed = replace(
            record,
            owner=self.owner,
            fence=record.fence + 1,
            updated_at=self.wall(),
            line={**record.line, "redispatched_by": self.owner},
        )
        if not await self.store.swap_call(claimed, expected_fence=record.fence):
            return False
        identity = record.line.get(LINE_IDENTITY, "")
        if not room or not await self._present(room, identity):
            log.info("room %s: the caller %r left; the call is over", room, identity)
            ended = replace(claimed, state=CallState.ENDED, fence=claimed.fence + 1)
            await self.store.swap_call(ended, expected_fence=claimed.fence)
            return True
        await self._dispatch(
            room, record.line.get(LINE_AGENT, ""), record.line.get(LINE_METADATA, "")
        )
        self.dispatched.append(room)
        log.info("room %s: its job was lost; dispatched the agent again", room)
        return True

    async def _present(self, room: str, identity: str) -> bool:
        async with self._api() as lkapi:
            found = await lkapi.room.list_participants(api.ListParticipantsRequest(room=room))
        return any(p.identity == identity for p in found.participants)

    async def _dispatch(self, room: str, agent_name: str, metadata: str) -> None:
        request = api.CreateAgentDispatchRequest(
            agent_name=agent_name, room=room, metadata=metadata
        )
        async with self._api() as lkapi:
            await lkapi.agent_dispatch.create_dispatch(request)

    def _api(self) -> api.LiveKitAPI:
        url = self.url.replace("ws://", "http://", 1).replace("wss://", "https://", 1)
        return api.LiveKitAPI(url, self.api_key, self.api_secret, failover=False)
