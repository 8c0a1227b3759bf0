"""`CallRoom` on livekit's `JobContext`: participants, their microphone, the agent's track,
and the call's transcripts and agent state as LiveKit's clients show them.

Needs a LiveKit server to run (the job's room is joined over WebRTC), so it stays thin:
everything it decides is in `voicehub.workers.job`, tested against a stand-in room.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterable
from typing import TYPE_CHECKING

from voicehub.telephony.livekit_sip import TRANSFER_IDENTITY
from voicehub.transports.livekit import EVENTS_TOPIC, RoomAudioTransport
from voicehub.transports.livekit_transcripts import RoomTranscripts
from voicehub.voice.events import SAMPLE_RATE
from voicehub.voice.providers import vendor_import
from voicehub.workers.job import Caller

with vendor_import("livekit-agents"):
    from livekit import rtc

if TYPE_CHECKING:
    from livekit.agents import JobContext

__all__ = ["LiveKitCallRoom"]

# Callers are people and phones; other agents and egress/ingress bots are not served.
_CALLER_KINDS = {
    rtc.ParticipantKind.PARTICIPANT_KIND_STANDARD: "standard",
    rtc.ParticipantKind.PARTICIPANT_KIND_SIP: "sip",
}
_QUEUE_MS = 200  # the agent's audio buffered in the source: what a barge-in can cut


class _TrackAudio:
    """The agent's published track and the caller's microphone stream."""

    def __init__(
        self, room: rtc.Room, participant: rtc.RemoteParticipant, source: rtc.AudioSource
    ) -> None:
        self._room, self._source = room, source
        self._stream = rtc.AudioStream.from_participant(
            participant=participant,
            track_source=rtc.TrackSource.SOURCE_MICROPHONE,
            sample_rate=SAMPLE_RATE,
            num_channels=1,
        )
        identity = participant.identity

        async def publish(payload: bytes) -> None:
            await room.local_participant.publish_data(
                payload, reliable=True, topic=EVENTS_TOPIC, destination_identities=[identity]
            )

        def caller_track() -> str | None:
            return next(
                (
                    sid
                    for sid, publication in participant.track_publications.items()
                    if publication.source == rtc.TrackSource.SOURCE_MICROPHONE
                ),
                None,
            )

        def agent_track() -> str | None:
            return self.publication.sid if self.publication is not None else None

        transcripts = RoomTranscripts(
            room.local_participant,
            caller=identity,
            agent=room.local_participant.identity,
            caller_track=caller_track,
            agent_track=agent_track,
        )
        self.transport = RoomAudioTransport(source, publish_event=publish, transcripts=transcripts)
        self.publication: rtc.LocalTrackPublication | None = None

    def frames(self) -> AsyncIterable[rtc.AudioFrameEvent]:
        return self._stream

    async def aclose(self) -> None:
        await self.transport.aclose()
        await self._stream.aclose()
        if self.publication is not None and self._room.isconnected():
            await self._room.local_participant.unpublish_track(self.publication.sid)
        await self._source.aclose()


def _caller(identity: str) -> bool:
    """A person a warm transfer called into the room is the caller's, not the desk's."""
    return not identity.startswith(TRANSFER_IDENTITY)


class LiveKitCallRoom:
    """The job's room: connects with audio-only subscriptions on first use."""

    def __init__(self, ctx: JobContext) -> None:
        self._ctx = ctx
        self._served: set[str] = set()

    async def next_caller(self) -> Caller:
        from livekit.agents import AutoSubscribe

        await self._ctx.connect(auto_subscribe=AutoSubscribe.AUDIO_ONLY)
        room = self._ctx.room
        present = [
            p
            for p in room.remote_participants.values()
            if p.kind in _CALLER_KINDS and p.identity not in self._served and _caller(p.identity)
        ]
        participant = present[0] if present else await self._next_joining(room)
        self._served.add(participant.identity)
        kind = _CALLER_KINDS.get(participant.kind, "standard")
        return Caller.of(participant.identity, kind, participant.attributes)

    @staticmethod
    async def _next_joining(room: rtc.Room) -> rtc.RemoteParticipant:
        """The next caller to join (a person or phone, not one a transfer called in)."""
        joined: asyncio.Future[rtc.RemoteParticipant] = asyncio.get_running_loop().create_future()

        def on_connected(participant: rtc.RemoteParticipant) -> None:
            wanted = participant.kind in _CALLER_KINDS and _caller(participant.identity)
            if wanted and not joined.done():
                joined.set_result(participant)

        room.on("participant_connected", on_connected)
        try:
            return await joined
        finally:
            room.off("participant_connected", on_connected)

    async def open_audio(self, caller: Caller) -> _TrackAudio:
        room = self._ctx.room
        participant = room.remote_participants[caller.identity]
        source = rtc.AudioSource(SAMPLE_RATE, 1, queue_size_ms=_QUEUE_MS)
        audio = _TrackAudio(room, participant, source)
        track = rtc.LocalAudioTrack.create_audio_track("voicehub-agent", source)
        options = rtc.TrackPublishOptions(source=rtc.TrackSource.SOURCE_MICROPHONE)
        audio.publication = await room.local_participant.publish_track(track, options)
        return audio

    async def left(self, caller: Caller) -> None:
        room = self._ctx.room
        gone = asyncio.get_running_loop().create_future()

        def on_disconnected(participant: rtc.RemoteParticipant) -> None:
            if participant.identity == caller.identity and not gone.done():
                gone.set_result(None)

        room.on("participant_disconnected", on_disconnected)
        try:
            if caller.identity in room.remote_participants:
                await gone
        finally:
            room.off("participant_disconnected", on_disconnected)
            self._served.discard(caller.identity)  # a rejoin is a new call
