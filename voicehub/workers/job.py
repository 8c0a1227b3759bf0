"""One LiveKit job: a desk answering the participants of one room, one caller at a time.

`DeskJob.run` waits for a participant (a browser, an app, or a phone caller brought in by
LiveKit SIP: all are participants), opens the conversation keyed to their identity in the
hub (room `<desk>:<conversation>`), starts the desk's voice session on their audio, and
serves them until they leave, through the process runtime's call lifecycle (as `voicehub
serve` runs its calls). Then delivery detaches (results that finish later are held in the
store) and the session closes; when the same identity joins again, in this room or a later
one, the session starts on the same conversation and the held results are spoken.

The room is seen through `CallRoom`, implemented on livekit's `JobContext` by
`voicehub.workers.room` and by a stand-in in the tests.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncIterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from voicehub.core.jobs import TaskSet
from voicehub.core.store.number_key import number_conversation
from voicehub.desks.call_lifecycle import LiveCall
from voicehub.tools.call_control import live_calls
from voicehub.transports.livekit import RoomAudioTransport, forward_caller_audio
from voicehub.workers.dispatch import conversation_for

if TYPE_CHECKING:
    from livekit import rtc

    from voicehub.desks.call_lifecycle import CallLifecycle
    from voicehub.desks.desk import Desk
    from voicehub.telephony.livekit_sip import SipControls
    from voicehub.voice.events import ServerEvent
    from voicehub.voice.session import VoiceSession
    from voicehub.workers.load import CallLoad

__all__ = ["CallRoom", "Caller", "CallerTrack", "DeskJob", "RoomLine"]

log = logging.getLogger("voicehub.workers")


# Participant attributes LiveKit SIP sets on a phone caller
SIP_PHONE_NUMBER = "sip.phoneNumber"
SIP_CALL_ID = "sip.callID"


@dataclass(frozen=True, slots=True)
class Caller:
    """A remote participant the desk talks to. `kind` is "standard" or "sip" (phone); a SIP
    caller has `phone_number` (empty when withheld) and `call_id` from LiveKit SIP."""

    identity: str
    kind: str = "standard"
    phone_number: str = ""
    call_id: str = ""

    @classmethod
    def of(cls, identity: str, kind: str, attributes: Mapping[str, str]) -> Caller:
        """A participant as the room shows it: identity, kind and attributes."""
        if kind != "sip":
            return cls(identity, kind)
        return cls(
            identity,
            kind,
            phone_number=attributes.get(SIP_PHONE_NUMBER, ""),
            call_id=attributes.get(SIP_CALL_ID, ""),
        )


class CallerTrack(Protocol):
    """A caller's audio: their microphone frames in, the agent's track out."""

    transport: RoomAudioTransport

    def frames(self) -> AsyncIterable[rtc.AudioFrameEvent]: ...

    async def aclose(self) -> None: ...


class CallRoom(Protocol):
    """What a desk job needs of its LiveKit room."""

    async def next_caller(self) -> Caller:
        """The next participant to serve (one already present first)."""
        ...

    async def open_audio(self, caller: Caller) -> CallerTrack:
        """Subscribe to the caller's microphone and publish the agent's track."""
        ...

    async def left(self, caller: Caller) -> None:
        """Return once `caller` has left the room."""
        ...


class RoomLine:
    """A LiveKit caller's audio as the call lifecycle's `CallLine`: events go out as the
    transport sends them, and `close` (the call replaced, or the process shutting down)
    ends the call like the caller leaving."""

    def __init__(self, transport: RoomAudioTransport) -> None:
        self.transport = transport
        self.closed = asyncio.Event()
        self.close_code = 0
        self._sending = TaskSet("room line: events")

    @property
    def sample_rate(self) -> int:
        return self.transport.sample_rate

    async def send_audio(self, pcm16: bytes) -> None:
        await self.transport.send_audio(pcm16)

    async def mark(self, speech_id: str) -> None:
        await self.transport.mark(speech_id)

    async def clear(self) -> None:
        await self.transport.clear()

    async def send_event(self, event: ServerEvent) -> None:
        await self.transport.send_event(event)

    def send_event_nowait(self, event: ServerEvent) -> None:
        if self.closed.is_set():
            return
        self._sending.start(self.transport.send_event(event), name=event.type)

    def close(self, code: int = 1000, reason: str = "") -> None:
        if not self.closed.is_set():
            self.close_code = code
            self.closed.set()


class DeskJob:
    """Serves `desk` in one LiveKit room through the process's `CallLifecycle`; `load`
    counts its live calls."""

    def __init__(
        self,
        calls: CallLifecycle,
        desk: Desk,
        room: CallRoom,
        load: CallLoad,
        *,
        number_key: bytes,
        line: dict[str, str] | None = None,
        controls: SipControls | None = None,
    ) -> None:
        self.calls, self.hub, self.desk, self.room = calls, calls.hub, desk, room
        self.load = load
        self.line = dict(line or {})  # the job's ids (room, agent, metadata) for call records
        self.number_key = number_key  # the store's secret behind caller-number ids
        self.controls = controls  # transfers and keypad tones (livekit's SIP API)
        self.room_ids: list[str] = []  # the conversations served, in order
        self.session: VoiceSession | None = None
        self.handed_over = False  # a caller was transferred: the agent's part is over

    async def run(self) -> None:
        """Serve callers one after the other until cancelled (the job's shutdown), or until
        a caller is transferred (the room is theirs and the person's then)."""
        while not self.handed_over:
            caller = await self.room.next_caller()
            try:
                await self.serve(caller)
            except Exception:  # one caller's failure must not end the desk for the room
                log.exception("desk %s: the call with %s failed", self.desk.name, caller.identity)

    async def serve(self, caller: Caller) -> None:
        """One call, from the caller's audio to their leaving."""
        conversation = await self.conversation(caller)
        self.room_ids.append(f"{self.desk.name}:{conversation}")
        audio = await self.room.open_audio(caller)
        line = RoomLine(audio.transport)
        ids = {**self.line, "identity": caller.identity}
        call = LiveCall(self.desk, conversation, line, kind="livekit", line=ids)
        counted = False

        async def until_over(session: VoiceSession) -> None:
            nonlocal counted
            self.session = session
            audio.transport.bind(session.playout_confirmed)
            self.load.call_started()
            counted = True
            log.info("room %s: %s caller %s joined", call.room_id, caller.kind, caller.identity)
            waits: list[asyncio.Task[Any]] = [
                asyncio.create_task(forward_caller_audio(audio.frames(), session.push_audio)),
                asyncio.create_task(self.room.left(caller)),
                asyncio.create_task(line.closed.wait()),
            ]
            control = forget = None
            if self.controls is not None:
                control = self.controls.for_caller(
                    self.hub, self.desk, call.room_id, caller, lambda: self.session
                )
                forget = live_calls(self.hub).register(call.room_id, control)
                waits.append(asyncio.create_task(control.handed_over.wait()))
            try:
                await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
                if control is not None and control.handed_over.is_set():
                    self.handed_over = True  # the room is the caller's and the person's
                    call.hang_up("the caller was transferred")
                elif not line.closed.is_set():  # the caller left the room (or their track)
                    call.hang_up("the caller left")
            finally:
                for task in waits:
                    task.cancel()
                await asyncio.gather(*waits, return_exceptions=True)
                if control is not None and forget is not None:
                    forget()
                    await control.aclose()

        try:
            await self.calls.run(call, until_over)
        finally:
            if counted:
                self.load.call_ended()
            self.session = None
            await asyncio.shield(audio.aclose())

    async def conversation(self, caller: Caller) -> str:
        """Which conversation `caller` continues: their identity's, or for a phone caller
        their number's (the id a Twilio call from that number gets), or, for a withheld
        number or a desk set to one conversation per call, one for this call (from
        `sip.callID`), never one shared by all anonymous callers."""
        if caller.kind != "sip":
            return conversation_for(caller.identity)
        by_number = None
        if self.desk.config.phone.conversation == "caller":
            by_number = await number_conversation(
                self.hub.store, self.desk.name, caller.phone_number, self.number_key
            )
        return by_number or conversation_for(f"call-{caller.call_id or uuid.uuid4().hex[:16]}")

    async def wait_for_background_work(self, timeout: float) -> bool:
        """Wait (up to `timeout` s) for the workers and jobs of the conversations served
        here, so their results reach the outbox before the job ends; True if all did."""
        return await self.calls.wait_for_background_work(self.room_ids, timeout)
