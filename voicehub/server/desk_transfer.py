"""Transfers for callers without a phone line (browser, WebSocket, WebRTC): a handoff to
another desk of this server, the conversation kept.

Once the agent has said so (its reply played), the target desk's room for the same
conversation (`<desk>:<conversation>`) is prepared: the last turns of the conversation are
carried over (so the new desk's agent starts with the history), a system event says where
the caller came from and why, and the new desk's greeting waits to be spoken as soon as the
caller connects. The caller gets a `transfer` event naming the desk and its call URL, and
this call ends (close 1000); `voicehub call` follows it, and any client may.
"""

from __future__ import annotations

import logging
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any

from voicehub.core.events import ChannelType, Event, EventKind
from voicehub.core.jobs import TaskSet
from voicehub.delivery.policy import Immediate
from voicehub.desks.agent_quiet import until_agent_quiet
from voicehub.desks.held_results import NOTICE_KIND
from voicehub.desks.room_notes import record_transfer
from voicehub.tools.call_control import CallControlError, TransferRequest
from voicehub.voice.events import CallTransferred

if TYPE_CHECKING:
    from voicehub.core.clock import Clock
    from voicehub.desks.desk import Desk
    from voicehub.server.calls import LiveCall, Switchboard

__all__ = ["DeskTransferControl", "carry_conversation"]

log = logging.getLogger("voicehub.server")

_CARRIED = 20  # turns carried over to the new desk
_TURNS = (EventKind.TRANSCRIPT, EventKind.MESSAGE)


class DeskTransferControl:
    """`CallControl` for a call without a phone line: transfers go to a desk."""

    kind = "browser"

    def __init__(self, board: Switchboard, call: LiveCall, clock: Clock) -> None:
        self.board, self.call, self.clock = board, call, clock
        self._jobs = TaskSet("a desk transfer")

    async def transfer(self, request: TransferRequest) -> str:
        target = request.target
        if target.desk is None:
            raise CallControlError(
                f"{target.name} can only be reached by phone, and this call is not on a phone line."
            )
        desk = self.board.desks.get(target.desk)
        if desk is None:
            raise CallControlError(f"the {target.desk} desk is not served here.")
        if desk.name == self.call.desk.name:
            raise CallControlError(f"you are already talking to the {desk.title}.")
        self._spawn(self._hand_over(desk, request))
        return f"I'm transferring you to the {desk.title} now."

    async def send_digits(self, digits: str) -> str:
        raise CallControlError("this call is not on a phone line, so it has no keypad tones.")

    def _spawn(self, job: Coroutine[Any, Any, None]) -> None:
        self._jobs.start(job, name="desk transfer")

    async def _hand_over(self, desk: Desk, request: TransferRequest) -> None:
        call, board = self.call, self.board
        session = call.session
        if session is not None:
            await until_agent_quiet(session.activity, self.clock)
        room_id = f"{desk.name}:{call.conversation}"
        live = lambda rid: rid in board.calls  # noqa: E731
        try:
            await carry_conversation(board, call.room_id, desk, room_id, request.summary)
        except Exception:
            log.exception("room %s: could not prepare desk %s", call.room_id, desk.name)
            return
        await record_transfer(
            board.hub, call.desk, call.room_id, request, "handed over", live=live, to_desk=desk.name
        )
        url = f"/desks/{desk.name}/call?conversation={call.conversation}"
        call.send(
            CallTransferred(
                desk=desk.name, title=desk.title, conversation=call.conversation, url=url
            )
        )
        call.end(1000, f"transferred to desk {desk.name}")
        log.info("room %s: handed to desk %s", call.room_id, desk.name)


async def carry_conversation(
    board: Switchboard, from_room: str, desk: Desk, room_id: str, summary: str
) -> None:
    """Prepare `desk`'s room `room_id` for a caller coming from `from_room`: the last turns,
    a note of the transfer, and the desk's greeting waiting for the caller."""
    hub, store = board.hub, board.hub.store
    turns = [
        e
        for e in await store.recent_events(from_room, 4 * _CARRIED)
        if e.kind in _TURNS and e.role in ("user", "assistant") and e.text
    ][-_CARRIED:]
    opened = room_id not in hub.rooms
    room = await hub.create_room(room_id, orchestration=desk.call_orchestration())
    try:
        for turn in turns:
            carried = turn.model_copy(
                update={
                    "id": f"{turn.id}-carried",
                    "seq": 0,
                    "metadata": {**turn.metadata, "carried_from": from_room},
                }
            )
            await hub.post(room_id, carried)
        why = f" {summary}" if summary else ""
        await hub.post(
            room_id,
            Event(
                kind=EventKind.SYSTEM,
                text=f"The caller was transferred here from {from_room.split(':', 1)[0]}.{why}",
                source="transfer_call",
                source_type=ChannelType.SYSTEM,
                role="system",
                metadata={"transferred_from": from_room},
            ),
        )
        await room.set_metadata(transferred_from=from_room)
        welcome = desk.greeting or f"You are through to the {desk.title}. How can I help?"
        await hub.delivery.deliver(
            room_id, welcome, strategy=Immediate(), metadata={"kind": NOTICE_KIND}
        )
    finally:
        if opened and room_id not in board.calls:
            await hub.release_room(room_id)
