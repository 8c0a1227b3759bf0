"""`RoomTranscripts`: the segments RoomIO's transcription outputs would send, on the stand-in
agent participant (which behaves like `rtc.LocalParticipant` for text streams)."""

from __future__ import annotations

from livekit import rtc

from voicehub.transports.livekit import RoomAudioTransport
from voicehub.transports.livekit_transcripts import RoomTranscripts
from voicehub.voice.events import AgentState, Transcript, UserState
from voicehub_dev.fakes.livekit_room import Changes, StandInLocalParticipant, StandInTextStream


def transcripts_for(agent: StandInLocalParticipant, caller_track: str | None) -> RoomTranscripts:
    return RoomTranscripts(
        agent,
        caller="bob",
        agent=agent.identity,
        caller_track=lambda: caller_track,
        agent_track=lambda: None,  # not published yet
    )


def segment(stream: StandInTextStream) -> str:
    return stream.attributes["lk.segment_id"]


async def test_each_utterance_of_the_caller_is_one_segment_ending_final() -> None:
    agent = StandInLocalParticipant("agent-1", Changes())
    transcripts = transcripts_for(agent, "TR_bob")
    for text, final in [("heat", False), ("heat pumps", False), ("heat pumps please", True)]:
        await transcripts.publish(Transcript(role="user", text=text, final=final))
    await transcripts.publish(Transcript(role="user", text="thanks", final=True))
    first, second, third, fourth = agent.transcripts("bob")
    assert [s.text for s in (first, second, third)] == ["heat", "heat pumps", "heat pumps please"]
    assert segment(first) == segment(second) == segment(third) != segment(fourth)
    assert [s.attributes["lk.transcription_final"] for s in (first, second, third, fourth)] == [
        "false",
        "false",
        "true",
        "true",
    ]
    assert all(s.attributes["lk.transcribed_track_id"] == "TR_bob" for s in agent.streams)


async def test_an_agent_segment_without_a_published_track_has_no_track_id() -> None:
    agent = StandInLocalParticipant("agent-1", Changes())
    transcripts = transcripts_for(agent, None)
    await transcripts.publish(Transcript(role="assistant", text="Hello.", final=True))
    [stream] = agent.transcripts("agent-1")
    assert stream.header == {"lk.transcription_final": "false", "lk.segment_id": segment(stream)}
    assert stream.trailer == {"lk.transcription_final": "true"}


async def test_agent_states_are_an_attribute_and_other_events_publish_nothing() -> None:
    agent = StandInLocalParticipant("agent-1", Changes())
    transcripts = transcripts_for(agent, None)
    await transcripts.publish(AgentState(state="thinking"))
    await transcripts.publish(UserState(state="speaking"))
    assert agent.attributes == {"lk.agent.state": "thinking"} and agent.streams == []


async def test_a_room_that_refuses_streams_does_not_break_the_call() -> None:
    class GoneParticipant(StandInLocalParticipant):
        async def stream_text(self, **options: object) -> StandInTextStream:
            raise ConnectionError("room closed")  # what livekit's StreamError derives from

    sent: list[bytes] = []

    async def publish(payload: bytes) -> None:
        sent.append(payload)

    source = rtc.AudioSource(16000, 1)
    agent = GoneParticipant("agent-1", Changes())
    transport = RoomAudioTransport(
        source, publish_event=publish, transcripts=transcripts_for(agent, None)
    )
    event = Transcript(role="assistant", text="hello", final=True)
    await transport.send_event(event)  # the stream fails inside: logged, not propagated
    assert sent == [event.to_wire().encode()]  # the data packet went out first
    await transport.send_audio(bytes(640))
    await transport.aclose()
    await source.aclose()
