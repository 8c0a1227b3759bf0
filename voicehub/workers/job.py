"""One LiveKit job: a desk answering the participants of one room, one caller at a time.

`DeskJob.run` waits for a participant (a browser, an app, or a phone caller brought in by
LiveKit SIP: all are participants), opens the conversation keyed to their identity in the
hub (room `<desk>:<conversation>`), starts the desk's voice session on their audio, and
serves them until they leave. Then delivery detaches (results that finish later are held
in the store) and the session closes; when the same identity joins again, in this room or
a later one, the session starts on the same conversation and the held results are spoken.

The room is seen through `CallRoom`, implemented on livekit's `JobContext` by
`voicehub.workers.room` and by a stand-in in the tests.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import AsyncIterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from voicehub.core.store.number_key import number_conversation
from voicehub.tools.call_control import live_calls
from voicehub.transports.livekit import RoomAudioTransport, forward_caller_audio
from voicehub.workers.dispatch import conversation_for

if TYPE_CHECKING:
    from livekit import rtc

    from voicehub.desks.desk import Desk
    from voicehub.desks.voice_stack import SessionFactory
    from voicehub.hub import Hub
    from voicehub.voice.session import VoiceSession
    from voicehub.workers.load import CallLoad
    from voicehub.workers.sip_control import SipControls

__all__ = ["CallRoom", "Caller", "CallerAudio", "DeskJob"]

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


class CallerAudio(Protocol):
    """A caller's audio: their microphone frames in, the agent's track out."""

    transport: RoomAudioTransport

    def frames(self) -> AsyncIterable[rtc.AudioFrameEvent]: ...

    async def aclose(self) -> None: ...


class CallRoom(Protocol):
    """What a desk job needs of its LiveKit room."""

    async def next_caller(self) -> Caller:
        """The next participant to serve (one already present first)."""
        ...

    async def open_audio(self, caller: Caller) -> CallerAudio:
        """Subscribe to the caller's microphone and publish the agent's track."""
        ...

    async def left(self, caller: Caller) -> None:
        """Return once `caller` has left the room."""
        ...


class DeskJob:
    """Serves `desk` in one LiveKit room on `hub`; `load` counts its live calls."""

    def __init__(
        self,
        hub: Hub,
        desk: Desk,
        room: CallRoom,
        factory: SessionFactory,
        load: CallLoad,
        *,
        number_key: bytes,
        controls: SipControls | None = None,
    ) -> None:
        self.hub, self.desk, self.room = hub, desk, room
        self.factory, self.load = factory, load
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
        room_id = f"{self.desk.name}:{await self.conversation(caller)}"
        self.room_ids.append(room_id)
        audio = await self.room.open_audio(caller)
        session: VoiceSession | None = None
        forward: asyncio.Task[None] | None = None
        try:
            session = await self.factory.start(self.hub, self.desk, room_id, audio.transport)
            self.session = session
            audio.transport.bind(session.playout_confirmed)
            self.load.call_started()
            log.info("room %s: %s caller %s joined", room_id, caller.kind, caller.identity)
            forward = asyncio.create_task(forward_caller_audio(audio.frames(), session.push_audio))
            left = asyncio.create_task(self.room.left(caller))
            ends: set[asyncio.Task[Any]] = {forward, left}
            control = forget = None
            if self.controls is not None:
                control = self.controls.for_caller(
                    self.hub, self.desk, room_id, caller, lambda: self.session
                )
                forget = live_calls(self.hub).register(room_id, control)
                ends.add(asyncio.create_task(control.handed_over.wait()))
            try:
                await asyncio.wait(ends, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for task in ends - {forward}:
                    task.cancel()
                if control is not None and forget is not None:
                    forget()
                    self.handed_over = control.handed_over.is_set()
                    await control.aclose()
        finally:
            if forward is not None:
                forward.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await forward
            await self._end(room_id, session, audio)

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

    async def _end(self, room_id: str, session: VoiceSession | None, audio: CallerAudio) -> None:
        # shielded: a job shutting down while a call ends must still hold its results
        async def end() -> None:
            try:
                if session is not None:
                    await self.hub.delivery.detach(room_id)
                    await session.aclose()
            finally:
                if session is not None:
                    self.load.call_ended()
                self.session = None
                await audio.aclose()
                await self.hub.release_room(room_id)  # stays loaded while workers run
                log.info("room %s: call ended", room_id)

        await asyncio.shield(end())

    async def wait_for_background_work(self, timeout: float) -> bool:
        """Wait (up to `timeout` s) for the workers and jobs of the conversations served
        here, so their results reach the outbox before the job ends; True if all did."""
        pending = [
            *(h.result() for rid in self.room_ids for h in self.hub.tasks.of_room(rid)),
            *(job for rid in self.room_ids for job in self.hub.jobs.of_room(rid)),
        ]
        if not pending:
            return True
        done = asyncio.gather(*pending, return_exceptions=True)
        try:
            await asyncio.wait_for(done, timeout)
        except TimeoutError:
            return False
        return True
