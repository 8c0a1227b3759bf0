"""Recording the calls of desks with `[record]` (a `CallObserver` of the switchboard).

At a call's start its transport and session are wrapped so the caller's and the agent's
audio and the call's events go on a `CallTape`; the hub's task and delivery hooks add the
background work of the conversation to its transcript. At the end the files are written
sealed, in a worker thread (`RecordingFolder`), and the desk's recordings older than `keep_days`
are pruned (at most hourly per desk).
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from voicehub.core.hooks import HookContext, HookTrigger
from voicehub.core.jobs import TaskSet
from voicehub.recordings.seal import RecordingKeyError
from voicehub.recordings.tape import CallTape
from voicehub.recordings.taps import RecordedSession, RecordedTransport

if TYPE_CHECKING:
    from voicehub.core.events import Event
    from voicehub.hub import Hub
    from voicehub.recordings.folder import RecordingFolder
    from voicehub.server.calls import LiveCall
    from voicehub.voice.session import VoiceSession
    from voicehub.voice.transport import CallTransport

__all__ = ["CallRecordings"]

log = logging.getLogger("voicehub.server")
_PRUNE_EVERY = 3600.0  # seconds between prunes of one desk's recordings


class CallRecordings:
    """Records the calls of desks that ask for it."""

    def __init__(self, hub: Hub, folder: RecordingFolder) -> None:
        self.hub = hub
        self.folder = folder
        self._tapes: dict[str, tuple[LiveCall, CallTape]] = {}  # by room id
        self._writing = TaskSet("call recordings")
        self._pruned: dict[str, float] = {}  # desk -> clock time of its last prune
        hooks = hub.hooks
        for trigger in (HookTrigger.ON_TASK_DELEGATED, HookTrigger.ON_TASK_COMPLETED):
            hooks.add(trigger, self._task, name="recordings")
        for trigger in (HookTrigger.BEFORE_DELIVER, HookTrigger.AFTER_DELIVER):
            hooks.add(trigger, self._delivery, name="recordings")

    # -- CallObserver --------------------------------------------------------------------

    def call_started(self, call: LiveCall, transport: CallTransport) -> CallTransport:
        record = call.desk.config.record
        if not record.enabled:
            return transport
        tape = CallTape(
            self.hub.clock,
            transport.sample_rate,
            audio=record.audio,
            transcript=record.transcript,
        )
        self._tapes[call.room_id] = (call, tape)
        return RecordedTransport(transport, tape)

    def session_started(self, call: LiveCall, session: VoiceSession) -> VoiceSession:
        taped = self._tapes.get(call.room_id)
        if taped is None or taped[0] is not call:
            return session
        return RecordedSession(session, taped[1])

    def call_accepted(self, call: LiveCall) -> None:
        pass

    def call_ended(self, call: LiveCall) -> None:
        taped = self._tapes.get(call.room_id)
        if taped is None or taped[0] is not call:
            return
        del self._tapes[call.room_id]
        self._writing.start(self._write(call, taped[1]), name=f"{call.room_id}: recording")

    async def aclose(self) -> None:
        """Finish writing the recordings of calls that ended."""
        await self._writing.wait()

    # -- writing -------------------------------------------------------------------------

    async def _write(self, call: LiveCall, tape: CallTape) -> None:
        desk = call.desk
        record = desk.config.record
        about: dict[str, Any] = {
            "room_id": call.room_id,
            "desk": desk.name,
            "conversation": call.conversation,
        }
        transcript = tape.transcript(**about) if record.transcript else None
        now = self.hub.clock.now()
        prune = now - self._pruned.get(desk.name, -_PRUNE_EVERY) >= _PRUNE_EVERY
        if prune:
            self._pruned[desk.name] = now
        try:
            stem = await asyncio.to_thread(self._save, call.room_id, tape, transcript)
            if prune:
                await asyncio.to_thread(self.folder.prune, desk.name, record.keep_days)
        except (OSError, RecordingKeyError):
            log.exception("room %s: could not write the call's recording", call.room_id)
            return
        log.info("room %s: recorded as %s", call.room_id, stem)

    def _save(self, room_id: str, tape: CallTape, transcript: str | None) -> str:
        """In a worker thread: the interleave of a long call takes milliseconds."""
        stereo = tape.stereo() if tape.record_audio else None
        return self.folder.save(
            room_id,
            tape.started_wall,
            stereo=stereo,
            sample_rate=tape.sample_rate,
            transcript=transcript,
        )

    # -- background work (hub hooks) ------------------------------------------------------

    def _tape_of(self, room_id: str) -> CallTape | None:
        taped = self._tapes.get(room_id.split("::", 1)[0])
        return taped[1] if taped is not None else None

    async def _task(self, event: Event, context: HookContext) -> None:
        tape = self._tape_of(event.room_id)
        if tape is not None and tape.record_transcript:
            kind = "task_started" if context.trigger is HookTrigger.ON_TASK_DELEGATED else "task"
            meta = event.metadata
            tape.note(
                kind,
                task_id=meta.get("task_id"),
                agent_id=meta.get("agent_id"),
                status=meta.get("status"),
                text=event.text,
            )

    async def _delivery(self, event: Event, context: HookContext) -> None:
        tape = self._tape_of(event.room_id)
        if tape is not None and tape.record_transcript:
            meta = event.metadata
            before = context.trigger is HookTrigger.BEFORE_DELIVER
            tape.note(
                "delivery_attempt" if before else "delivery",
                delivery_id=meta.get("delivery_id"),
                strategy=meta.get("strategy"),
                attempt=meta.get("attempt"),
                outcome=None if before else meta.get("outcome"),
                text=event.text,
            )
