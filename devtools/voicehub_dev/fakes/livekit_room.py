"""A stand-in for a LiveKit room as `voicehub.workers.job.CallRoom` sees it.

`FakeAudioSink` behaves like `rtc.AudioSource` where the transport relies on it: captured
frames queue up, `wait_for_playout` returns at once on an empty queue and otherwise when
the queue has played (here: when the test calls `play_all`, standing for the listener's
clock), and `clear_queue` drops the queue and releases the waiters. `StandInRoom` has
participants join and leave, each with a microphone stream the test speaks into.
`StandInLocalParticipant` is the agent's participant as `rtc.LocalParticipant` behaves for
text streams and attributes: a stream is opened with its header attributes, written, and
closed once (optionally with trailer attributes, which receivers merge into the header's);
writing after the close or closing twice raises, as livekit's writer does.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from livekit import rtc

from voicehub.transports.livekit import RoomAudioTransport
from voicehub.transports.livekit_transcripts import RoomTranscripts
from voicehub.workers.job import Caller


class Changes:
    """Waits on a predicate over state that changes in callbacks (no polling, no sleeps)."""

    def __init__(self) -> None:
        self._condition = asyncio.Condition()

    def changed(self) -> None:
        async def notify() -> None:
            async with self._condition:
                self._condition.notify_all()

        asyncio.get_running_loop().create_task(notify())

    async def wait_for(self, predicate: Callable[[], Any], timeout: float = 10.0) -> None:
        async def wait() -> None:
            async with self._condition:
                await self._condition.wait_for(predicate)

        await asyncio.wait_for(wait(), timeout)


class FakeAudioSink:
    """The agent's track: `played` is what the listener heard, `queued` what is still
    buffered, `cleared` how many times a barge-in dropped the queue."""

    def __init__(self, changes: Changes) -> None:
        self.changes = changes
        self.queued = bytearray()
        self.played = bytearray()
        self.cleared = 0
        self._drained: asyncio.Future[None] | None = None

    async def capture_frame(self, frame: rtc.AudioFrame) -> None:
        self.queued += frame.data.tobytes()
        self.changes.changed()

    async def wait_for_playout(self) -> None:
        if self.queued:
            if self._drained is None:
                self._drained = asyncio.get_running_loop().create_future()
            await asyncio.shield(self._drained)
        # the waiter acts on the playout in this step: re-check the tests' predicates after it
        asyncio.get_running_loop().call_soon(self.changes.changed)

    def clear_queue(self) -> None:
        self.queued.clear()
        self.cleared += 1
        self._release()

    def play_all(self) -> None:
        """The listener has heard everything queued so far."""
        self.played += self.queued
        self.queued.clear()
        self._release()

    def _release(self) -> None:
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)
        self._drained = None
        self.changes.changed()


class StandInTextStream:
    """One text stream as a receiver sees it: who sent it, on which topic, with which
    attributes (header merged with the trailer), and its text."""

    def __init__(
        self, changes: Changes, topic: str, attributes: dict[str, str], sender_identity: str
    ) -> None:
        self._changes = changes
        self.topic, self.header, self.sender_identity = topic, dict(attributes), sender_identity
        self.trailer: dict[str, str] = {}
        self.chunks: list[str] = []
        self.closed = False

    @property
    def text(self) -> str:
        return "".join(self.chunks)

    @property
    def attributes(self) -> dict[str, str]:
        return {**self.header, **self.trailer}

    async def write(self, text: str) -> None:
        if self.closed:
            raise RuntimeError("Cannot write after stream is closed")
        self.chunks.append(text)

    async def aclose(self, *, reason: str = "", attributes: dict[str, str] | None = None) -> None:
        if self.closed:
            raise RuntimeError("Stream already closed")
        self.closed = True
        self.trailer = dict(attributes or {})
        self._changes.changed()


class StandInLocalParticipant:
    """The agent's participant: text streams sent and attributes set, in order."""

    def __init__(self, identity: str, changes: Changes) -> None:
        self.identity = identity
        self._changes = changes
        self.streams: list[StandInTextStream] = []
        self.attributes: dict[str, str] = {}
        self.attribute_changes: list[dict[str, str]] = []

    async def stream_text(
        self,
        *,
        topic: str = "",
        attributes: dict[str, str] | None = None,
        sender_identity: str | None = None,
    ) -> StandInTextStream:
        stream = StandInTextStream(
            self._changes, topic, attributes or {}, sender_identity or self.identity
        )
        self.streams.append(stream)
        return stream

    async def set_attributes(self, attributes: dict[str, str]) -> None:
        self.attributes.update(attributes)
        self.attribute_changes.append(dict(attributes))
        self._changes.changed()

    def transcripts(self, sender: str) -> list[StandInTextStream]:
        """The closed `lk.transcription` streams sent on behalf of `sender`."""
        return [
            s
            for s in self.streams
            if s.topic == "lk.transcription" and s.sender_identity == sender and s.closed
        ]


AGENT_TRACK = "TR_agent_microphone"


def microphone_track(identity: str) -> str:
    """The track id of a stand-in participant's microphone."""
    return f"TR_mic_{identity}"


class StandInAudio:
    """A caller's microphone (frames the test pushes) and the agent's track."""

    def __init__(self, room: StandInRoom, caller: Caller) -> None:
        self.caller = caller
        self.sink = FakeAudioSink(room.changes)
        self.events: list[dict[str, Any]] = room.events
        self._mic: asyncio.Queue[rtc.AudioFrameEvent | None] = asyncio.Queue()
        agent = room.local_participant
        transcripts = RoomTranscripts(
            agent,
            caller=caller.identity,
            agent=agent.identity,
            caller_track=lambda: microphone_track(caller.identity),
            agent_track=lambda: AGENT_TRACK,
        )
        self.transport = RoomAudioTransport(
            self.sink, publish_event=self._publish, transcripts=transcripts
        )
        self.closed = False
        self._changes = room.changes

    def speak(self, pcm16: bytes, rate: int = 16000) -> None:
        frame = rtc.AudioFrame(pcm16, rate, 1, len(pcm16) // 2)
        self._mic.put_nowait(rtc.AudioFrameEvent(frame=frame))

    def hang_up_microphone(self) -> None:
        self._mic.put_nowait(None)

    async def frames(self) -> AsyncIterator[rtc.AudioFrameEvent]:
        while True:
            self._changes.changed()  # the frame before this one has been taken in
            event = await self._mic.get()
            if event is None:
                return
            yield event

    async def aclose(self) -> None:
        await self.transport.aclose()
        self.closed = True
        self._changes.changed()

    async def _publish(self, payload: bytes) -> None:
        self.events.append({"to": self.caller.identity, **json.loads(payload)})
        self._changes.changed()


class StandInRoom:
    """Participants join (`join`) and leave (`leave`); the job serves them in order."""

    def __init__(self, agent_identity: str = "voicehub-research-job-1") -> None:
        self.changes = Changes()
        self.local_participant = StandInLocalParticipant(agent_identity, self.changes)
        self.events: list[dict[str, Any]] = []
        self.audio: list[StandInAudio] = []
        self._arrivals: asyncio.Queue[Caller] = asyncio.Queue()
        self._gone: dict[str, asyncio.Event] = {}

    def join(
        self, identity: str, kind: str = "standard", attributes: dict[str, str] | None = None
    ) -> None:
        self._gone[identity] = asyncio.Event()
        self._arrivals.put_nowait(Caller.of(identity, kind, attributes or {}))

    def leave(self, identity: str) -> None:
        self._gone[identity].set()

    async def next_caller(self) -> Caller:
        return await self._arrivals.get()

    async def open_audio(self, caller: Caller) -> StandInAudio:
        audio = StandInAudio(self, caller)
        self.audio.append(audio)
        self.changes.changed()
        return audio

    async def left(self, caller: Caller) -> None:
        await self._gone[caller.identity].wait()


class StandInJobContext:
    """What `DeskEntrypoint` uses of livekit's `JobContext`: the job (a real
    `livekit.protocol.agent.Job`) and the shutdown callbacks, which `shutdown` runs in order
    as livekit does when the job ends."""

    def __init__(self, job_id: str, room_name: str, metadata: str = "") -> None:
        from livekit.protocol import agent, models

        self.job = agent.Job(id=job_id, room=models.Room(name=room_name), metadata=metadata)
        self._shutdown: list[Callable[[str], Awaitable[None]]] = []

    def add_shutdown_callback(self, callback: Callable[[str], Awaitable[None]]) -> None:
        self._shutdown.append(callback)

    async def shutdown(self, reason: str = "room closed") -> None:
        for callback in self._shutdown:
            await callback(reason)
