"""The realtime `VoiceSession`: a lean relay to a speech-to-speech model (OpenAI Realtime).

Caller audio goes to `input_audio_buffer.append` in batches at 24 kHz, or as G.711 mu-law
on a phone line (`realtime.audio_batch`; the model's audio then comes back as mu-law and
goes to the transport untouched: `voice.transport.plays_mulaw`), and each frame's speech
evidence to `VoiceActivity`, where a
delivery's last check before its first audio frame reads it (`realtime.model_events`).
The model's audio goes to the transport with speech marks (`realtime.playout_marks`). The
model's server or semantic VAD drives turns; its events drive `VoiceActivity`
(`realtime.model_events`). Tools run in tasks (`realtime.tool_runs`).
The connection is kept up by `realtime.link`: a drop reconnects with backoff and the
session is restored (`connection_restored`): configuration, voice, and a recap of the call.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from voicehub.core.events import EventKind
from voicehub.core.jobs import TaskSet
from voicehub.delivery.injector import InjectOutcome
from voicehub.errors import ConfigError, VoicehubError
from voicehub.voice.activity import VoiceActivity
from voicehub.voice.engine.call_parts import CallAgent
from voicehub.voice.events import AgentState
from voicehub.voice.realtime.audio_batch import AudioBatcher
from voicehub.voice.realtime.config import (
    MODEL_RATE,
    RealtimeSettings,
    agent_voice,
    session_config,
)
from voicehub.voice.realtime.connection import ModelConnectionLost
from voicehub.voice.realtime.link import Backoff, ModelLink
from voicehub.voice.realtime.model_events import SAY_INSTRUCTIONS, ModelEvents
from voicehub.voice.realtime.pcm_resampler import PcmResampler
from voicehub.voice.realtime.recap import conversation_recap, with_recap
from voicehub.voice.realtime.recorder import CallRecorder
from voicehub.voice.realtime.responses import SpeakRequest
from voicehub.voice.realtime.tool_runs import in_tool
from voicehub.voice.speech_evidence import SpeechEvidence
from voicehub.voice.transport import plays_mulaw

if TYPE_CHECKING:
    from voicehub.agents.agent import Agent
    from voicehub.agents.tools import Tool
    from voicehub.voice.engine.latency import TurnObserver
    from voicehub.voice.session import CallRuntime
    from voicehub.voice.transport import CallTransport

__all__ = ["SAY_INSTRUCTIONS", "RealtimeCallOptions", "RealtimeVoiceSession"]

log = logging.getLogger("voicehub.voice.realtime")

DeliveryMode = Literal["say", "generate"]
RESULT_INSTRUCTIONS = "Tell the caller this result now, briefly and naturally."
RECAP_EVENTS = 200  # the recent events a recap is drawn from (tool calls, states too)


@dataclass(frozen=True, slots=True)
class RealtimeCallOptions:
    """How a relayed call speaks and recovers: `delivery_mode` ("say" or "generate", see
    `RealtimeVoiceSession`), `answer_timeout` (seconds the model has to start an answer),
    `mark_every_ms` (the playout granularity a barge-in truncates at), `backoff` (how a
    dropped model connection is retried, on the hub's clock)."""

    delivery_mode: DeliveryMode = "say"
    answer_timeout: float = 4.0
    mark_every_ms: float = 200.0
    backoff: Backoff | None = None


class RealtimeVoiceSession:
    """A `VoiceSession` (and delivery `Injector`) relaying a call to a Realtime model.

    `agent` is the agent alone or the desk's side of the call (`CallAgent`: its extra tools
    and greeting too). `client` is an `openai.AsyncOpenAI` (see
    `realtime.connection.realtime_client`). `options.delivery_mode` picks how `inject`
    speaks a result: verbatim ("say", a response told to repeat it) or through the model
    ("generate": the result as a `settings.injection_role` item, then a response).
    `turn_observer` hears each answered caller turn's voice-to-voice (the model's end of
    the caller's speech to the answer's first audio sent; the model measures no other
    stage for us).
    """

    def __init__(
        self,
        hub: CallRuntime,
        room_id: str,
        agent: Agent | CallAgent,
        transport: CallTransport,
        *,
        client: Any,
        settings: RealtimeSettings | None = None,
        options: RealtimeCallOptions | None = None,
        attach_delivery: bool = True,
        activity: VoiceActivity | None = None,
        turn_observer: TurnObserver | None = None,
    ) -> None:
        on_call = agent if isinstance(agent, CallAgent) else CallAgent(agent)
        options = options or RealtimeCallOptions()
        delivery_mode, greeting = options.delivery_mode, on_call.greeting
        agent, extra_tools = on_call.agent, on_call.extra_tools
        mark_every_ms, answer_timeout = options.mark_every_ms, options.answer_timeout
        backoff = options.backoff
        if delivery_mode not in ("say", "generate"):
            raise ConfigError(f"delivery_mode {delivery_mode!r}: expected 'say' or 'generate'")
        self.hub, self.room_id, self.transport = hub, room_id, transport
        self.settings = settings or RealtimeSettings()
        self.activity = activity if activity is not None else VoiceActivity(hub.clock)
        self.greeting, self.delivery_mode = greeting, delivery_mode
        self.agent, self._extra_tools = agent, tuple(extra_tools)
        self.voice = agent_voice(agent, self.settings)
        self._attach_delivery = attach_delivery
        self.turn_observer = turn_observer
        self.recorder = CallRecorder(hub, room_id, transport, lambda: self.agent.id)
        self.events = ModelEvents(self, mark_every_ms, answer_timeout)
        self.link = ModelLink(client, self.settings.model, hub.clock, self.events, backoff=backoff)
        # a phone line: mu-law both ways, never decoded or resampled for the model
        self._wire = transport if plays_mulaw(transport) else None
        self.mulaw = self._wire is not None
        self._batcher = AudioBatcher(transport.sample_rate, mulaw=self.mulaw)
        self._evidence = SpeechEvidence(transport.sample_rate)
        # model audio at the transport's rate already (mu-law, or a 24 kHz browser) is sent as is
        resampled = not self.mulaw and transport.sample_rate != MODEL_RATE
        self._down = PcmResampler(MODEL_RATE, transport.sample_rate) if resampled else None
        # bytes of model audio per ms: mu-law at 8 kHz, or PCM16 at 24 kHz
        self.model_bytes_per_ms = 8 if self.mulaw else 2 * MODEL_RATE // 1000
        self._ids = itertools.count(1)
        self._recap = ""  # the call so far, for a restored model session
        self._auto_reply = True
        self._started = self._closed = False
        self._tasks = TaskSet("the realtime session")
        self.closed = asyncio.Event()  # set once the call's processing ended

    # -- lifecycle ------------------------------------------------------------------------

    async def start(self, *, timeout: float = 15.0) -> None:
        """Connect, configure the session, attach delivery, and speak the greeting if any."""
        if self._started or self._closed:
            return
        self.recorder.outbox.start()
        async with asyncio.timeout(timeout):
            await self.link.open()
        async with asyncio.timeout(timeout):
            await self._configure()
        self._started = True
        self.activity.session_attached()
        if self.greeting:
            self.spawn(self.say(self.greeting))
        if self._attach_delivery:
            await self.hub.delivery.attach(self.room_id, self, self.activity)

    async def flush(self) -> None:
        """See `VoiceSession.flush`."""
        await self.recorder.outbox.flush()

    async def aclose(self) -> None:
        """End the call's processing; idempotent. The room stays (held results wait)."""
        if self._closed:
            return
        self._closed = True
        self.closed.set()
        if self._attach_delivery and self._started:
            await self.hub.delivery.detach(self.room_id)
        self.events.end()
        self.activity.session_detached()
        await self.recorder.outbox.aclose()
        current = asyncio.current_task()
        for task in list(self._tasks):
            if task is not current:
                task.cancel()
        await self.link.aclose()

    @property
    def running(self) -> bool:
        """Started and not closed."""
        return self._started and not self._closed

    # -- audio ------------------------------------------------------------------------------

    async def push_audio(self, pcm16: bytes) -> None:
        """Caller audio at the transport rate: its per-frame speech evidence into the
        activity (delivery reads it), then batched, resampled, appended to the model's
        buffer. Dropped while the model connection is down (nobody would hear it)."""
        if self._closed:
            return
        voiced = self._evidence.voiced_frames(pcm16) > 0
        if voiced:
            self.activity.caller_voiced()
            if self.events.requests:  # a delivery playing yields at this frame
                await self.events.caller_voiced()
        connection = self.link.connection
        if connection is None:
            return
        batch = self._batcher.push(pcm16, voiced)
        if batch:
            try:  # noqa: SIM105 (the per-frame path: no context manager)
                await connection.append_audio(batch)
            except ModelConnectionLost:
                pass  # the link's reader sees the drop and reconnects

    def playout_confirmed(self, speech_id: str) -> None:
        """The transport played everything up to mark `speech_id`."""
        self.events.playout_confirmed(speech_id)

    async def play(self, model_audio: bytes) -> None:
        """Model audio to the transport: mu-law as it came (a phone line), else 24 kHz
        PCM16, resampled to the transport's rate unless it is the model's."""
        if self._wire is not None:
            await self._wire.send_wire_audio(model_audio)
        elif self._down is None:
            await self.transport.send_audio(model_audio)
        else:
            pcm = self._down.push(model_audio)
            if pcm:
                await self.transport.send_audio(pcm)

    def hearing_caller(self, in_turn: bool) -> None:
        """The model hears the caller (or stopped): pauses flush the audio batch at once."""
        self._batcher.in_turn = in_turn

    # -- speaking ---------------------------------------------------------------------------

    async def push_text(self, text: str) -> None:
        """A caller turn typed, not said (phone keypad digits): added to the conversation as
        the caller's message and answered in the background, like a spoken turn."""
        self.recorder.post(EventKind.TRANSCRIPT, text, role="user", typed=True)
        item = {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": text}],
        }
        self.spawn(self._speak({}, before=[item]))

    async def say(self, text: str, *, allow_interrupt: bool = True) -> InjectOutcome:
        """Speak `text` verbatim (a response told to repeat it, without tools)."""
        instructions = SAY_INSTRUCTIONS.format(text=text)
        return await self._speak({"instructions": instructions, "tool_choice": "none"})

    async def generate_reply(self, instructions: str) -> InjectOutcome:
        """Have the model answer `instructions` aloud; returns once played out."""
        return await self._speak({"instructions": instructions})

    async def inject(
        self, text: str, *, allow_interrupt: bool, metadata: dict[str, Any]
    ) -> InjectOutcome:
        """The delivery `Injector`: cut the model first if `allow_interrupt` (Immediate),
        then speak the result once no response is running."""
        if allow_interrupt:
            await self.interrupt()
        if self.delivery_mode == "say":
            instructions = SAY_INSTRUCTIONS.format(text=text)
            return await self._speak(
                {"instructions": instructions, "tool_choice": "none"}, gated=True
            )
        item = {
            "type": "message",
            "role": self.settings.injection_role,
            "content": [{"type": "input_text", "text": f"Background result: {text}"}],
        }
        return await self._speak({"instructions": RESULT_INSTRUCTIONS}, before=[item], gated=True)

    async def interrupt(self) -> None:
        """Stop the model: cancel its response and cut the audio not yet played."""
        self._check_running()
        await self.events.cut()

    async def update_agent(self, agent: Agent, *, extra_tools: list[Tool] | None = None) -> None:
        """Hand the call to `agent` with `session.update` on the same connection:
        instructions, tools, and its voice while the model has not spoken yet (the API
        refuses a new voice after the first audio). Safe to call from a running tool."""
        self._check_running()
        tools = tuple(extra_tools) if extra_tools is not None else self._extra_tools
        voice: str | None = agent_voice(agent, self.settings)
        if voice == self.voice:
            voice = None
        elif self.events.spoken:
            log.warning("room %s: keeping voice %s for %s", self.room_id, self.voice, agent.id)
            voice = None
        previous = (self.agent, self._extra_tools)
        self.agent, self._extra_tools = agent, tools
        if not self.events.link_up:  # reconnecting: the restored session is configured so
            self.voice = voice or self.voice
            return
        try:
            config = session_config(
                self.settings,
                agent,
                self.tools(),
                full=False,
                voice=voice,
                instructions=with_recap(agent.instructions, self._recap),
            )
            await self.update_session(config)
        except BaseException:
            self.agent, self._extra_tools = previous
            raise
        if voice is not None:
            self.voice = voice

    async def set_auto_reply(self, on: bool) -> None:
        """Whether the model answers each caller turn by itself. Off while an `ask_user`
        question waits for its answer: the answering turn is the tool's, not the model's."""
        self._check_running()
        if on == self._auto_reply:
            return
        self._auto_reply = on
        if not self.events.link_up:  # reconnecting: the restored session gets it
            return
        detection = self.settings.turn_detection_config(auto_reply=on)
        await self.update_session(
            {"type": "realtime", "audio": {"input": {"turn_detection": detection}}}
        )

    # -- the model link ------------------------------------------------------------------

    async def restore(self, attempts: int) -> None:
        """A new connection after a drop: the whole configuration again, the voice the
        caller knows, and a recap of the call in the instructions (see `realtime.recap`)."""
        history = await self.hub.store.recent_events(self.room_id, RECAP_EVENTS)
        self._recap = conversation_recap(history)
        await self._configure()
        self.recorder.note(f"model connection restored (attempt {attempts})")

    async def _configure(self) -> None:
        config = session_config(
            self.settings,
            self.agent,
            self.tools(),
            full=True,
            voice=self.voice,
            instructions=with_recap(self.agent.instructions, self._recap),
            auto_reply=self._auto_reply,
            mulaw=self.mulaw,
        )
        await self.update_session(config)

    async def update_session(self, session: dict[str, Any]) -> None:
        """`session.update` on the live connection; returns once the model applied it."""
        event_id = f"voicehub_update_{next(self._ids)}"
        answered = self.events.updates.expect(event_id)
        try:
            await self.send({"type": "session.update", "event_id": event_id, "session": session})
        except ModelConnectionLost:
            self.events.updates.refused(event_id, "the model connection dropped")
        await answered

    async def send(self, event: dict[str, Any]) -> None:
        """Send a control event after the caller audio waiting in the batch (their order
        is the model's order). ModelConnectionLost while the connection is down."""
        connection = self.link.connection
        if connection is None:
            raise ModelConnectionLost(f"room {self.room_id!r}: the model connection is down")
        pending = self._batcher.flush()
        if pending:
            await connection.append_audio(pending)
        await connection.send(event)

    def reset_audio(self) -> None:
        """The connection dropped: the batched audio was for it."""
        self._batcher.reset()

    # -- internals ------------------------------------------------------------------------

    async def _speak(
        self,
        response: dict[str, Any],
        *,
        before: Sequence[dict[str, Any]] = (),
        gated: bool = False,
    ) -> InjectOutcome:
        self._check_running()
        events = self.events
        if not in_tool():  # a tool speaks at once: its own response is done
            while not events.model_free.is_set():  # never while the model responds
                await events.model_free.wait()
        if self._closed:
            return InjectOutcome.INTERRUPTED
        token = f"voicehub_{next(self._ids)}"
        request = SpeakRequest(token, asyncio.get_running_loop().create_future(), gated=gated)
        events.requests[token] = request
        events.model_free.clear()  # ours from now: another request waits for its end
        self.activity.reply_queued()
        try:
            for item in before:
                await self.send({"type": "conversation.item.create", "item": item})
            body = {**response, "metadata": {"voicehub": token}}
            await self.send({"type": "response.create", "event_id": token, "response": body})
        except ModelConnectionLost:  # the drop's handling frees the model once restored
            if events.requests.pop(token, None) is not None:
                self.activity.reply_dequeued()
            request.abandon()
        return await request.future

    def tools(self) -> tuple[Tool, ...]:
        """The tools the model is offered: the agent's and the call's."""
        return (*self.agent.tools, *self._extra_tools)

    def _check_running(self) -> None:
        if not self.running:
            raise VoicehubError(
                f"the voice session of room {self.room_id!r} is not running; "
                "start() it first (results stay queued until a session is live)"
            )

    def spawn(self, work: Awaitable[Any]) -> None:
        """Run `work` in the background for the call's life (errors are logged)."""

        async def run() -> None:
            try:
                await work
            except (asyncio.CancelledError, VoicehubError):
                pass
            except Exception:
                log.exception("room %s: a realtime session task failed", self.room_id)

        self._tasks.start(run())

    def agent_state(self, state: Literal["thinking", "speaking", "listening"]) -> None:
        """Tell the caller's client what the agent does now."""
        self.recorder.send_client(AgentState(state=state))
