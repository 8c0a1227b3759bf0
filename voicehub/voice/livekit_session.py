"""The pipeline `VoiceSession` on livekit-agents' `AgentSession` (VAD, STT, LLM, TTS).

Audio flows through the custom livekit I/O of `voicehub.voice.livekit_io`: a `SpeechHandle`
(and so `say` and `inject`) ends only once the transport confirmed playout. Caller frames
reach livekit's VAD and STT streams without a task hop (`voicehub.voice.livekit_feed`).
What livekit's signals mean for the call's `VoiceActivity`, room and client is in
`voicehub.voice.livekit_signals`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from voicehub.agents.tools import Tool, ToolContext
from voicehub.core.events import EventKind
from voicehub.delivery.injector import InjectOutcome
from voicehub.errors import ConfigError, VoicehubError
from voicehub.voice.activity import VoiceActivity
from voicehub.voice.delivery_speech import DeliverySpeaker, PrerenderBudget
from voicehub.voice.event_outbox import EventOutbox
from voicehub.voice.livekit_feed import DirectFeed
from voicehub.voice.livekit_io import CallerAudioInput, TransportAudioOutput
from voicehub.voice.livekit_signals import LiveKitSignals
from voicehub.voice.livekit_speedups import install as install_livekit_speedups
from voicehub.voice.livekit_speedups import keep_no_events
from voicehub.voice.llm_adapter import LiveKitAgent, running_in_tool
from voicehub.voice.providers import vendor_import
from voicehub.voice.vad_gate import GatedVAD, VadProgress

with vendor_import("livekit-agents"):
    from livekit.agents import AgentSession, llm, stt, tts, vad
    from livekit.agents.voice.speech_handle import SpeechHandle

if TYPE_CHECKING:
    from voicehub.agents.agent import Agent
    from voicehub.voice.session import CallRuntime
    from voicehub.voice.transport import CallTransport

__all__ = ["LiveKitVoiceSession"]

install_livekit_speedups()  # same answers, less CPU per VAD window (see the module)

log = logging.getLogger("voicehub.voice")

DeliveryMode = Literal["say", "generate"]
_RESULT_INSTRUCTIONS = "Tell the caller this result now: {text}"


class LiveKitVoiceSession(LiveKitSignals):
    """A `VoiceSession` (and delivery `Injector`) on a livekit `AgentSession`.

    `stt`, `tts` and `vad` are livekit plugins, shared across calls; `voices` maps an
    agent's `voice` name to a TTS. `delivery_mode` picks how `inject` speaks a result:
    verbatim ("say") or through the model ("generate"). Endpointing defaults favour
    quick turns; `answer_timeout` bounds "awaiting answer" when livekit drops a turn. While
    `reply_gate()` is False, caller turns get no reply, only a room transcript (for ask_user).
    `gate_on_vad` holds caller audio back while the VAD lags (`voicehub.voice.vad_gate`);
    False only to compare with the ungated path.
    """

    def __init__(
        self,
        hub: CallRuntime,
        room_id: str,
        agent: Agent,
        transport: CallTransport,
        *,
        stt: stt.STT[Any],
        tts: tts.TTS[Any],
        vad: vad.VAD,
        greeting: str | None = None,
        delivery_mode: DeliveryMode = "say",
        extra_tools: Sequence[Tool] = (),
        voices: Mapping[str, tts.TTS[Any]] | None = None,
        reply_gate: Callable[[], bool] | None = None,
        turn_detection: Literal["vad", "stt"] = "vad",
        min_endpointing_delay: float = 0.3,
        max_endpointing_delay: float = 1.5,
        min_interruption_duration: float = 0.3,
        preemptive_generation: bool = False,
        answer_timeout: float = 4.0,
        close_timeout: float = 0.2,
        attach_delivery: bool = True,
        activity: VoiceActivity | None = None,
        prerender_budget: PrerenderBudget | None = None,
        gate_on_vad: bool = True,
    ) -> None:
        if delivery_mode not in ("say", "generate"):
            raise ConfigError(f"delivery_mode {delivery_mode!r}: expected 'say' or 'generate'")
        self.hub, self.room_id, self.transport = hub, room_id, transport
        self.activity = activity if activity is not None else VoiceActivity(hub.clock)
        self.greeting, self.answer_timeout = greeting, answer_timeout
        self.delivery_mode: DeliveryMode = delivery_mode
        self._voices = dict(voices or {})
        self._reply_gate, self._attach_delivery = reply_gate, attach_delivery
        self.agent, self._extra_tools = agent, tuple(extra_tools)
        self._leaving_agent_id: str | None = None
        self._desk_agent = self._build_agent(agent, self._extra_tools, None)  # validates first
        # caller audio waits for the VAD: bursts are heard like paced audio (vad_gate)
        self.vad_progress = VadProgress() if gate_on_vad else None
        if self.vad_progress is not None:
            vad = GatedVAD(vad, self.vad_progress)
        self._input = CallerAudioInput(transport.sample_rate, self.vad_progress)
        self._output = TransportAudioOutput(
            transport, self.activity, self._segment_started, self._hold_segment
        )
        self._session: AgentSession[None] = AgentSession(
            stt=stt,
            vad=vad,
            tts=tts,
            turn_handling={
                "turn_detection": turn_detection,  # unset loads a 240 MB end-of-turn model
                "endpointing": {
                    "min_delay": min_endpointing_delay,
                    "max_delay": max_endpointing_delay,
                },
                "interruption": {
                    "mode": "vad",
                    "min_duration": min_interruption_duration,
                    "resume_false_interruption": False,  # needs a pausable output
                },
                "preemptive_generation": {"enabled": preemptive_generation},
            },
            aec_warmup_duration=None,  # else barge-in is ignored for the first 3 s of speech
            user_away_timeout=None,
            session_close_transcript_timeout=close_timeout,
        )
        self._feed = DirectFeed(self._session)  # frames to VAD and STT without wake-ups
        # Results: pre-rendered, gated at their first frame, yielding to the caller at once.
        self._delivery = DeliverySpeaker(
            self._session,
            self.activity,
            self._voice_now,
            self._output.clear_buffer,
            hub.clock,
            sample_rate=transport.sample_rate,
            budget=prerender_budget,
        )
        self._init_signals()
        self._started = self._closed = False
        self._events = EventOutbox(room_id)
        self._close_task: asyncio.Task[None] | None = None

    # -- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        """Start the livekit session, attach delivery, and speak the greeting if any."""
        if self._started or self._closed:
            return
        session = self._session
        self._subscribe(session)
        session.input.audio, session.output.audio = self._input, self._output
        self._events.start()
        await session.start(self._desk_agent, record=False)
        keep_no_events(session)  # no LiveKit job, no session report: the events need no keeping
        self._input.deliver_directly(self._feed.push)
        self._started = True
        self.activity.session_attached()
        if self.greeting:
            session.say(self.greeting)
        if self._attach_delivery:
            await self.hub.delivery.attach(self.room_id, self, self.activity)

    async def aclose(self) -> None:
        """End the call's processing quickly; idempotent. The room stays open."""
        if self._closed:
            return
        self._closed = True
        if self._attach_delivery and self._started:
            await self.hub.delivery.detach(self.room_id)
        self._input.close()
        self._delivery.aclose()
        await self._session.aclose()
        self._desk_agent.entered.set()  # release an update_agent that can no longer finish
        self._answered()
        self.activity.session_detached()
        await self._output.drain()
        await self._events.aclose()

    @property
    def agent_session(self) -> AgentSession[None]:
        """The underlying livekit session (metrics, history, advanced options)."""
        return self._session

    # -- audio ------------------------------------------------------------------------------

    async def push_audio(self, pcm16: bytes) -> None:
        """Caller audio at the transport rate, any whole number of samples."""
        if not self._closed:
            self._delivery.caller_audio(pcm16)  # first: a result yields at this frame
            self._input.push(pcm16)

    def playout_confirmed(self, speech_id: str) -> None:
        """The transport played the segment marked `speech_id` (and all before it)."""
        if self._session.agent_state == "speaking":
            # livekit moves on (next step, or listening) only after this: busy until then
            self.activity.agent_thinking_started()
        self._output.confirm(speech_id)

    async def push_text(self, text: str) -> None:
        """A caller turn typed, not said (keys pressed on a phone): answered like a spoken
        turn, or, while ask_user waits for an answer (`reply_gate` closed), taken as it."""
        if self._gate(text, spoken=False):  # closed: posted to the room, for ask_user
            self._running().generate_reply(user_input=text)

    # -- speaking ---------------------------------------------------------------------------

    async def say(self, text: str, *, allow_interrupt: bool = True) -> InjectOutcome:
        """Speak `text` verbatim (the caller may barge in if `allow_interrupt`)."""
        return await self._wait(self._running().say(text, allow_interruptions=allow_interrupt))

    async def generate_reply(self, instructions: str) -> InjectOutcome:
        """Have the agent's model answer `instructions` aloud; returns once played out."""
        return await self._wait(self._running().generate_reply(instructions=instructions))

    async def inject(
        self, text: str, *, allow_interrupt: bool, metadata: dict[str, Any]
    ) -> InjectOutcome:
        """The delivery `Injector`: cut the agent's speech first if `allow_interrupt`
        (Immediate), then speak the result (see `DeliverySpeaker`: gated at its first
        frame, yielding at the caller's first voiced frame)."""
        if allow_interrupt:
            await self.interrupt()
        if self.delivery_mode == "say":
            self._running()
            return await self._delivery.speak(text, metadata)
        instructions = _RESULT_INSTRUCTIONS.format(text=text)
        return await self._delivery.follow(
            self._running().generate_reply(instructions=instructions)
        )

    def prepare(self, delivery_id: str, text: str) -> None:
        """A result waits for a gap: pre-render its speech ("say" mode only: in "generate"
        mode the model words it when spoken, from the conversation as it is then)."""
        if self.delivery_mode == "say" and self._started and not self._closed:
            self._delivery.prepare(delivery_id, text)

    def discard(self, delivery_id: str) -> None:
        """The result is settled: drop its pre-rendered speech."""
        self._delivery.discard(delivery_id)

    async def interrupt(self) -> None:
        """Stop the agent's current and queued speech (uninterruptible speech plays on)."""
        try:
            done = self._running().interrupt()
        except RuntimeError as exc:
            log.info("room %s: not interrupting: %s", self.room_id, exc)
            return
        await done

    async def update_agent(self, agent: Agent, *, extra_tools: list[Tool] | None = None) -> None:
        """Hand the call to `agent` (instructions, tools, voice); the history carries over.

        Returns once the new agent is live (livekit first lets the current speech finish),
        or at once when called from a tool of the current agent (that would deadlock).
        """
        session = self._running()
        tools = tuple(extra_tools) if extra_tools is not None else self._extra_tools
        new = self._build_agent(agent, tools, session.current_agent.chat_ctx.copy())
        session.update_agent(new)
        self._leaving_agent_id = self.agent.id
        self.agent, self._extra_tools, self._desk_agent = agent, tools, new
        if not running_in_tool():
            await new.entered.wait()

    # -- internals ------------------------------------------------------------------------

    def _hold_segment(self) -> bool:
        return self._delivery.hold_segment()

    def _voice_now(self) -> Any:
        """The TTS speaking for the current agent (its own voice, or the session's)."""
        voice = self._desk_agent.tts
        return voice if voice else self._session.tts

    def _gate(self, text: str, *, spoken: bool = True) -> bool:
        if self._delivery.take_answer(text, spoken=spoken):  # the answer to "shall I read them?"
            self._answered()
            return False
        if closed := self._reply_gate is not None and not self._reply_gate():
            self._answered()  # no reply will come: not "awaiting" one either
            self._post(EventKind.TRANSCRIPT, text, role="user", source="caller")
        return not closed

    def _build_agent(
        self, spec: Agent, tools: Sequence[Tool], history: llm.ChatContext | None
    ) -> LiveKitAgent:
        voice = None
        if spec.voice is not None and (voice := self._voices.get(spec.voice)) is None:
            known = ", ".join(sorted(self._voices)) or "none"
            raise ConfigError(
                f"agent {spec.id!r} asks for voice {spec.voice!r}, which this session does "
                f"not have (known voices: {known}); add it to `voices`"
            )
        context = ToolContext(hub=self.hub, room_id=self.room_id, agent_id=spec.id)
        return LiveKitAgent(
            spec, context, extra_tools=tools, voice=voice, chat_ctx=history, reply_gate=self._gate
        )

    def _running(self) -> AgentSession[None]:
        if not self._started or self._closed:
            raise VoicehubError(
                f"the voice session of room {self.room_id!r} is not running; "
                "start() it first (results stay queued until a session is live)"
            )
        return self._session

    async def _wait(self, handle: SpeechHandle) -> InjectOutcome:
        await handle
        if handle.interrupted:
            return InjectOutcome.INTERRUPTED
        error = handle.exception()
        if error is not None:
            raise VoicehubError(f"room {self.room_id!r}: speech failed: {error}") from error
        return InjectOutcome.FINISHED
