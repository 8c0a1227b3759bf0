"""Fast fake providers and minimal call I/O for the voice bench.

The fakes cost next to nothing per frame, so what the bench measures is the plumbing: the
STT stream answers a fixed transcript when the session flushes it (at the VAD's end of
speech), the TTS returns a fixed stretch of silence, and the livekit LLM streams a fixed
reply. The same fakes serve voicehub's session and a bare livekit `AgentSession`, which
gets the minimal `PushAudioInput` / `SinkAudioOutput` below (what any integration must
write at least). `LoopbackTransport` is voicehub's `CallTransport` in memory: it confirms
playout as soon as a mark arrives (a client with no jitter buffer).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Never

from voicehub.voice.providers import vendor_import

with vendor_import("livekit-agents"):
    from livekit import rtc
    from livekit.agents import Agent, AgentSession, llm, stt, tts, vad
    from livekit.agents.language import LanguageCode
    from livekit.agents.types import (
        DEFAULT_API_CONNECT_OPTIONS,
        NOT_GIVEN,
        APIConnectOptions,
        NotGivenOr,
    )
    from livekit.agents.voice import io

from voicehub.voice.providers.offline.inline_stt import InlineRecognizeStream, InputItem

if TYPE_CHECKING:
    from voicehub.agents.agent import Agent as DeskAgent
    from voicehub.hub import Hub
    from voicehub.voice.engine.session import PipelineVoiceSession
    from voicehub.voice.events import ServerEvent
    from voicehub.voice.session import VoiceSession

__all__ = [
    "CALLER_TEXT",
    "REPLY_TEXT",
    "BareCall",
    "FakeLLM",
    "FakeSTT",
    "FakeTTS",
    "LoopbackTransport",
    "PushAudioInput",
    "SinkAudioOutput",
    "VoicehubCall",
    "pipeline_session",
    "session_options",
]

CALLER_TEXT = "what are your opening hours"
REPLY_TEXT = "We are open from nine to five, Monday to Friday."
_LANGUAGE = LanguageCode("en-US")


def session_options(close_timeout: float) -> dict[str, Any]:
    """The bare `AgentSession`'s options: VAD turns and endpointing as voicehub's engine
    takes them by default, so both do the same work per frame (no end-of-turn model)."""
    return {
        "turn_handling": {
            "turn_detection": "vad",  # unset would load the 240 MB end-of-turn model
            "endpointing": {"min_delay": 0.3, "max_delay": 1.5},
            "interruption": {
                "mode": "vad",
                "min_duration": 0.3,
                "resume_false_interruption": False,
            },
            "preemptive_generation": {"enabled": False},
        },
        "aec_warmup_duration": None,
        "user_away_timeout": None,
        "session_close_transcript_timeout": close_timeout,
    }


# -- providers ----------------------------------------------------------------------------


class FakeSTT(stt.STT[Never]):
    """Streaming STT that hears `text` in every flushed segment that had audio."""

    def __init__(self, text: str = CALLER_TEXT) -> None:
        super().__init__(
            capabilities=stt.STTCapabilities(
                streaming=True, interim_results=False, manual_flush=True
            )
        )
        self.text = text

    async def _recognize_impl(
        self,
        buffer: Any,
        *,
        language: NotGivenOr[str] = NOT_GIVEN,
        conn_options: APIConnectOptions,
    ) -> stt.SpeechEvent:
        return _final(self.text)

    def stream(
        self,
        *,
        language: NotGivenOr[str] = NOT_GIVEN,
        conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS,
    ) -> _FakeSTTStream:
        """A stream that transcribes nothing until flushed."""
        return _FakeSTTStream(stt=self, conn_options=conn_options)


class _FakeSTTStream(InlineRecognizeStream):
    """Takes each frame where it is pushed, as voicehub's offline streaming STT does
    (`InlineRecognizeStream`): no task wakes per frame."""

    def __init__(self, *, stt: FakeSTT, conn_options: APIConnectOptions) -> None:
        super().__init__(stt=stt, conn_options=conn_options)
        self._text = stt.text
        self._heard = False
        self._sink: Callable[[Any], None] | None = None

    def deliver_to(self, sink: Callable[[stt.SpeechEvent], None]) -> None:
        """`DirectEvents`, as voicehub's own recognizers: finals go straight to `sink`."""
        self._sink = sink

    def _take(self, item: InputItem) -> bool:
        if isinstance(item, self._FlushSentinel):
            # always answer a flush: a session waits for a final after one
            self._emit(_final(self._text if self._heard else ""))
            self._heard = False
        else:
            self._heard = True
        return True


def _final(text: str) -> stt.SpeechEvent:
    data = stt.SpeechData(language=_LANGUAGE, text=text, confidence=1.0)
    return stt.SpeechEvent(type=stt.SpeechEventType.FINAL_TRANSCRIPT, alternatives=[data])


class FakeTTS(tts.TTS[Never]):
    """Non-streaming TTS: every sentence becomes `seconds` of silence at `sample_rate`."""

    def __init__(self, *, sample_rate: int = 16000, seconds: float = 0.6) -> None:
        super().__init__(
            capabilities=tts.TTSCapabilities(streaming=False),
            sample_rate=sample_rate,
            num_channels=1,
        )
        self.audio = bytes(2 * round(sample_rate * seconds))

    def synthesize(
        self, text: str, *, conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS
    ) -> tts.ChunkedStream:
        """The fixed audio, whatever `text` says."""
        return _FakeChunkedStream(tts=self, input_text=text, conn_options=conn_options)


class _FakeChunkedStream(tts.ChunkedStream):
    def __init__(self, *, tts: FakeTTS, input_text: str, conn_options: APIConnectOptions) -> None:
        super().__init__(tts=tts, input_text=input_text, conn_options=conn_options)
        self._audio = tts.audio

    async def _run(self, output_emitter: tts.AudioEmitter) -> None:
        output_emitter.initialize(
            request_id=uuid.uuid4().hex[:12],
            sample_rate=self._tts.sample_rate,
            num_channels=1,
            mime_type="audio/pcm",
        )
        output_emitter.push(self._audio)


class FakeLLM(llm.LLM[Never]):
    """A livekit LLM that streams `reply` in one chunk (the bare session's brain)."""

    def __init__(self, reply: str = REPLY_TEXT) -> None:
        super().__init__()
        self.reply = reply

    def chat(
        self,
        *,
        chat_ctx: llm.ChatContext,
        tools: list[llm.Tool] | None = None,
        conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS,
        parallel_tool_calls: NotGivenOr[bool] = NOT_GIVEN,
        tool_choice: NotGivenOr[llm.ToolChoice] = NOT_GIVEN,
        extra_kwargs: NotGivenOr[dict[str, Any]] = NOT_GIVEN,
    ) -> llm.LLMStream:
        """One turn: the fixed reply."""
        return _FakeLLMStream(self, chat_ctx=chat_ctx, tools=tools or [], conn_options=conn_options)


class _FakeLLMStream(llm.LLMStream):
    def __init__(
        self,
        owner: FakeLLM,
        *,
        chat_ctx: llm.ChatContext,
        tools: list[llm.Tool],
        conn_options: APIConnectOptions,
    ) -> None:
        super().__init__(owner, chat_ctx=chat_ctx, tools=tools, conn_options=conn_options)
        self._reply = owner.reply

    async def _run(self) -> None:
        delta = llm.ChoiceDelta(role="assistant", content=self._reply)
        self._event_ch.send_nowait(llm.ChatChunk(id=uuid.uuid4().hex[:12], delta=delta))


# -- voicehub's transport, in memory ------------------------------------------------------


class LoopbackTransport:
    """A `CallTransport` that keeps nothing but counts, and confirms every mark at once.

    `segment_starts` holds the `perf_counter` time of each agent audio segment's first
    frame (a segment ends at a mark or a clear); `keep_events` keeps the client events,
    each with the `perf_counter` time it arrived.
    """

    def __init__(self, sample_rate: int = 16000, *, keep_events: bool = False) -> None:
        self._sample_rate = sample_rate
        self.session: VoiceSession | None = None
        self.audio_bytes = 0
        self.segment_starts: list[float] = []
        self.new_segment = asyncio.Event()
        self.events: list[tuple[float, ServerEvent]] = []
        self._keep_events = keep_events
        self._in_segment = False

    @property
    def sample_rate(self) -> int:
        """16 kHz PCM16 both ways, as the WebSocket protocol."""
        return self._sample_rate

    async def send_audio(self, pcm16: bytes) -> None:
        """Count the audio; note when a segment starts."""
        if not self._in_segment:
            self._in_segment = True
            self.segment_starts.append(time.perf_counter())
            self.new_segment.set()
        self.audio_bytes += len(pcm16)

    async def mark(self, speech_id: str) -> None:
        """Confirm playout at once."""
        self._in_segment = False
        if self.session is not None:
            self.session.playout_confirmed(speech_id)

    async def clear(self) -> None:
        """Nothing is buffered here; the next audio starts a new segment."""
        self._in_segment = False

    async def send_event(self, event: ServerEvent) -> None:
        """Drop the event (or keep it, if asked)."""
        if self._keep_events:
            self.events.append((time.perf_counter(), event))


# -- the bare livekit session -------------------------------------------------------------


class PushAudioInput(io.AudioInput):
    """Caller PCM16 frames (exactly 20 ms each) into an `AgentSession`."""

    def __init__(self, sample_rate: int = 16000) -> None:
        super().__init__(label="bench.caller")
        self._rate = sample_rate
        self._samples = sample_rate // 50
        self._frames: asyncio.Queue[rtc.AudioFrame | None] = asyncio.Queue()

    def push(self, pcm16: bytes) -> None:
        """Queue one frame."""
        self._frames.put_nowait(rtc.AudioFrame(pcm16, self._rate, 1, self._samples))

    def close(self) -> None:
        """End the stream."""
        self._frames.put_nowait(None)

    async def __anext__(self) -> rtc.AudioFrame:
        frame = await self._frames.get()
        if frame is None:
            raise StopAsyncIteration
        return frame


class SinkAudioOutput(io.AudioOutput):
    """Counts agent audio; each segment counts as played as soon as it is flushed."""

    def __init__(self, sample_rate: int = 16000) -> None:
        super().__init__(
            label="bench.sink",
            capabilities=io.AudioOutputCapabilities(pause=False),
            sample_rate=sample_rate,
        )
        self.audio_bytes = 0
        self._position = 0.0
        self._open = False

    async def capture_frame(self, frame: rtc.AudioFrame) -> None:
        """Take one frame of agent audio."""
        await super().capture_frame(frame)
        if not self._open:
            self._open = True
            self.on_playback_started(created_at=time.time())
        self._position += frame.duration
        self.audio_bytes += len(frame.data) * 2

    def flush(self) -> None:
        """End the segment: it has 'played'."""
        super().flush()
        self._finish(interrupted=False)

    def clear_buffer(self) -> None:
        """Barge-in: the open segment ends interrupted."""
        self._finish(interrupted=True)

    def _finish(self, *, interrupted: bool) -> None:
        if self._open:
            self._open = False
            self.on_playback_finished(playback_position=self._position, interrupted=interrupted)
            self._position = 0.0


def pipeline_session(
    hub: Any, room_id: str, agent: Any, transport: Any, **options: Any
) -> PipelineVoiceSession:
    """A `PipelineVoiceSession` from the keywords tests and benches tune: `stt`, `tts`, `vad`,
    `voices` (its `CallSpeech`), `extra_tools`, `greeting`, `reply_gate` (its `CallAgent`),
    `end_of_turn`, `words_open`, `words_complete` (its `TurnJudges`), and the session's own
    keywords."""
    from voicehub.voice.engine.session import (
        CallAgent,
        CallSpeech,
        PipelineVoiceSession,
        TurnJudges,
    )

    speech = CallSpeech(
        options.pop("stt"),
        options.pop("tts"),
        options.pop("vad"),
        options.pop("voices", None) or {},
    )
    on_call = CallAgent(
        agent,
        extra_tools=options.pop("extra_tools", ()),
        greeting=options.pop("greeting", None),
        reply_gate=options.pop("reply_gate", None),
    )
    judges = TurnJudges(
        **{
            key: options.pop(key)
            for key in ("end_of_turn", "words_open", "words_complete")
            if key in options
        }
    )
    return PipelineVoiceSession(hub, room_id, on_call, transport, speech, judges=judges, **options)


class VoicehubCall:
    """One call on voicehub's `PipelineVoiceSession`, in a new room, over a
    `LoopbackTransport`; `options` go to the session (providers, `options`)."""

    def __init__(
        self, hub: Hub, room_id: str, agent: DeskAgent, *, keep_events: bool = False, **options: Any
    ) -> None:
        self.hub, self.room_id = hub, room_id
        self.transport = LoopbackTransport(keep_events=keep_events)
        self.session = pipeline_session(hub, room_id, agent, self.transport, **options)
        self.transport.session = self.session

    async def start(self) -> None:
        """Open the room, start the session (and attach delivery, as a server does)."""
        await self.hub.create_room(self.room_id, orchestration=None)
        await self.session.start()

    async def push(self, pcm16: bytes) -> None:
        """One caller frame."""
        await self.session.push_audio(pcm16)

    async def aclose(self) -> None:
        """End the call."""
        await self.session.aclose()

    def replies(self) -> int:
        """Agent audio segments the transport got so far."""
        return len(self.transport.segment_starts)


class BareCall:
    """One call on a bare livekit `AgentSession` with the given providers."""

    def __init__(
        self,
        *,
        stt: stt.STT[Any],
        vad: vad.VAD,
        tts: tts.TTS[Any],
        llm: llm.LLM[Any],
        close_timeout: float = 0.2,
    ) -> None:
        self._input = PushAudioInput()
        self.output = SinkAudioOutput()
        self._agent = Agent(instructions="You answer callers.", llm=llm)
        self._session: AgentSession[None] = AgentSession(
            stt=stt, vad=vad, tts=tts, **session_options(close_timeout)
        )

    async def start(self) -> None:
        """Attach the I/O and start the session."""
        self._session.input.audio = self._input
        self._session.output.audio = self.output
        await self._session.start(self._agent, record=False)

    async def push(self, pcm16: bytes) -> None:
        """One caller frame."""
        self._input.push(pcm16)

    async def aclose(self) -> None:
        """End the call."""
        self._input.close()
        await self._session.aclose()

    def replies(self) -> int:
        """Agent audio segments the output got so far."""
        return self.output.captured_playout_segments
