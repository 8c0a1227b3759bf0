"""A call's words and the agent's state in a LiveKit room, published the way RoomIO does.

LiveKit's playground and client SDKs show a conversation from text streams on the topic
`lk.transcription`: one stream per transcript segment, sent on behalf of whoever spoke
(`sender_identity`), with the attributes `lk.segment_id` (the segment), `lk.transcription_final`
("true" once the words are settled) and `lk.transcribed_track_id` (the speaker's microphone
track). They show the agent's state from its participant attribute `lk.agent.state`.

livekit-agents' `RoomIO` publishes these for an `AgentSession` it drives; our sessions own
their audio I/O (see `voicehub.transports.livekit`), so this module publishes the same from
the call's events, as RoomIO's transcription outputs do (read from livekit-agents 1.8,
`voice/room_io/_output.py`):

- the caller (RoomIO's non-delta user output): each interim result is a stream of its own
  with the whole text so far, `final` "false"; the final result is a stream with `final`
  "true"; all of one utterance share a segment id, the next utterance gets a new one.
- the agent (RoomIO's delta output): one stream per reply, opened with `final` "false",
  the text written, closed with the trailer attributes `final` "true" and the track id.

RoomIO also sends a final result's text once more as an interim stream first; clients show
the same thing without it, so it is not repeated here.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from typing import Protocol

from voicehub.voice.events import AgentState, ServerEvent, Transcript

__all__ = [
    "ATTRIBUTE_AGENT_STATE",
    "ATTRIBUTE_FINAL",
    "ATTRIBUTE_SEGMENT_ID",
    "ATTRIBUTE_TRACK_ID",
    "TOPIC_TRANSCRIPTION",
    "RoomTranscripts",
    "TextStreams",
]

log = logging.getLogger("voicehub.transports")

# livekit-agents' names (`livekit.agents.types`), the wire contract with LiveKit's clients
TOPIC_TRANSCRIPTION = "lk.transcription"
ATTRIBUTE_SEGMENT_ID = "lk.segment_id"
ATTRIBUTE_TRACK_ID = "lk.transcribed_track_id"
ATTRIBUTE_FINAL = "lk.transcription_final"
ATTRIBUTE_AGENT_STATE = "lk.agent.state"


class TextStreamWriter(Protocol):
    """An open text stream (`rtc.TextStreamWriter` fits)."""

    async def write(self, text: str) -> None: ...

    async def aclose(
        self, *, reason: str = "", attributes: dict[str, str] | None = None
    ) -> None: ...


class TextStreams(Protocol):
    """What publishing needs of the agent's participant (`rtc.LocalParticipant` fits)."""

    async def stream_text(
        self,
        *,
        topic: str = "",
        attributes: dict[str, str] | None = None,
        sender_identity: str | None = None,
    ) -> TextStreamWriter: ...

    async def set_attributes(self, attributes: dict[str, str]) -> None: ...


def _segment_id() -> str:
    return f"SG_{uuid.uuid4().hex[:12]}"  # RoomIO's form


class RoomTranscripts:
    """Publishes a call's transcripts and agent state into the room through `streams`.

    `caller` / `agent` are the participants' identities; `caller_track` / `agent_track`
    give their microphone tracks' ids when known (a track may be published after the call
    starts, so they are asked at each segment)."""

    def __init__(
        self,
        streams: TextStreams,
        *,
        caller: str,
        agent: str,
        caller_track: Callable[[], str | None],
        agent_track: Callable[[], str | None],
    ) -> None:
        self._streams = streams
        self._caller, self._agent = caller, agent
        self._caller_track, self._agent_track = caller_track, agent_track
        self._caller_segment = _segment_id()
        self._lock = asyncio.Lock()  # segments keep their order even if events overlap

    async def publish(self, event: ServerEvent) -> None:
        """Publish `event` if the room shows it (transcripts, agent state); others pass."""
        async with self._lock:
            match event:
                case Transcript(role="user", text=text, final=final):
                    await self._caller_words(text, final)
                case Transcript(role="assistant", text=text):
                    await self._agent_words(text)
                case AgentState(state=state):
                    await self._streams.set_attributes({ATTRIBUTE_AGENT_STATE: state})

    async def _caller_words(self, text: str, final: bool) -> None:
        attributes = self._attributes(self._caller_segment, self._caller_track(), final=final)
        writer = await self._streams.stream_text(
            topic=TOPIC_TRANSCRIPTION, attributes=attributes, sender_identity=self._caller
        )
        await writer.write(text)
        await writer.aclose()
        if final:
            self._caller_segment = _segment_id()

    async def _agent_words(self, text: str) -> None:
        track = self._agent_track()
        writer = await self._streams.stream_text(
            topic=TOPIC_TRANSCRIPTION,
            attributes=self._attributes(_segment_id(), track, final=False),
            sender_identity=self._agent,
        )
        await writer.write(text)
        trailer = {ATTRIBUTE_FINAL: "true"}
        if track:
            trailer[ATTRIBUTE_TRACK_ID] = track
        await writer.aclose(attributes=trailer)

    @staticmethod
    def _attributes(segment: str, track: str | None, *, final: bool) -> dict[str, str]:
        attributes = {ATTRIBUTE_FINAL: "true" if final else "false", ATTRIBUTE_SEGMENT_ID: segment}
        if track:
            attributes[ATTRIBUTE_TRACK_ID] = track
        return attributes
