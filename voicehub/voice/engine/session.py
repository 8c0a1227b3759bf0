"""The pipeline `VoiceSession`: voicehub's own engine driving one call.

`PipelineVoiceSession` is the asyncio driver around `TurnEngine`: caller audio goes to the
VAD and the recognizer (`listening`), their events into the engine, the engine's decisions
into replies (`reply`, through voicehub's agent runner), speech (`playout`) and records
(`records`). Results are spoken by `ResultSpeaker`. STT, TTS and VAD are livekit plugins,
used through their public interfaces only, so any livekit plugin and ours plug in.

Replies run one at a time, in order. A caller turn that commits while the reply to the
previous turn has not been heard yet joins that turn (the engine says so): the unheard
reply is stopped and one reply answers both. A reply whose tools run is never cut: its
speech may be, and it ends after its tools. The agent's speech waits while the caller holds
the floor (at most `floor_wait` seconds), so a reply never starts over a caller who went on.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import functools
import itertools
import logging
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from voicehub.agents.llm import ChatMessage
from voicehub.agents.tools import Tool, ToolContext
from voicehub.core.clock import wait_or_sleep
from voicehub.delivery.injector import InjectOutcome
from voicehub.errors import ConfigError, VoicehubError
from voicehub.voice.activity import VoiceActivity
from voicehub.voice.engine import decisions as d
from voicehub.voice.engine.history import CallHistory
from voicehub.voice.engine.latency import TurnLatency, TurnObserver
from voicehub.voice.engine.listening import CallerAudio, follow_events
from voicehub.voice.engine.playout import SpeechHooks, SpeechPlayer
from voicehub.voice.engine.records import CallRecords
from voicehub.voice.engine.reply import Reply, ReplyRun
from voicehub.voice.engine.results import PrerenderBudget, ResultSpeaker, outcome_of
from voicehub.voice.engine.speech import Speech, SpeechEnd
from voicehub.voice.engine.tts_audio import one_text, synthesized_pcm
from voicehub.voice.engine.turn_engine import TurnEngine, TurnSettings
from voicehub.voice.providers import vendor_import

with vendor_import("livekit-agents"):
    from livekit.agents import stt as lk_stt
    from livekit.agents import vad as lk_vad

if TYPE_CHECKING:
    from voicehub.agents.agent import Agent
    from voicehub.agents.llm import ToolCall
    from voicehub.agents.tools import ToolResult
    from voicehub.voice.session import CallRuntime
    from voicehub.voice.transport import CallTransport
    from voicehub.voice.turns.model import EndOfTurnModel

__all__ = ["EngineOptions", "PipelineVoiceSession"]

log = logging.getLogger("voicehub.voice")

DeliveryMode = Literal["say", "generate"]
_RESULT_INSTRUCTIONS = "Tell the caller this result now: {text}"


@dataclass(frozen=True)
class EngineOptions:
    """How a pipeline call takes turns and speaks.

    `turn`: when turns end and when the caller takes the floor (`TurnSettings`).
    `delivery_mode`: results verbatim ("say") or worded by the model ("generate").
    `history_messages`: how much of the conversation the model reads.
    `floor_wait`: the longest the agent's speech waits for a caller who holds the floor.
    `eot_audio_seconds`: the caller audio kept for the end-of-turn model.
    """

    turn: TurnSettings = field(default_factory=TurnSettings)
    delivery_mode: DeliveryMode = "say"
    history_messages: int = 60
    floor_wait: float = 3.0
    eot_audio_seconds: float = 8.0

    def __post_init__(self) -> None:
        if self.delivery_mode not in ("say", "generate"):
            raise ConfigError(f"delivery_mode {self.delivery_mode!r}: expected 'say' or 'generate'")


class PipelineVoiceSession:
    """A `VoiceSession` (and delivery `PreparingInjector`) on voicehub's turn engine.

    `stt`, `tts` and `vad` are livekit plugins; `voices` maps an agent's `voice` name to a
    TTS. While `reply_gate()` is False, caller turns get no reply, only a room transcript
    (ask_user by voice). `end_of_turn` is the end-of-turn model for `turn.mode == "model"`;
    `turn_observer` receives every answered turn's latency.
    """

    def __init__(
        self,
        hub: CallRuntime,
        room_id: str,
        agent: Agent,
        transport: CallTransport,
        *,
        stt: Any,
        tts: Any,
        vad: Any,
        greeting: str | None = None,
        extra_tools: Sequence[Tool] = (),
        voices: Mapping[str, Any] | None = None,
        reply_gate: Callable[[], bool] | None = None,
        options: EngineOptions | None = None,
        end_of_turn: EndOfTurnModel | None = None,
        turn_observer: TurnObserver | None = None,
        prerender_budget: PrerenderBudget | None = None,
        activity: VoiceActivity | None = None,
        attach_delivery: bool = True,
    ) -> None:
        self.hub, self.room_id, self.transport = hub, room_id, transport
        self.options = options or EngineOptions()
        self.activity = activity if activity is not None else VoiceActivity(hub.clock)
        self.greeting = greeting
        self._stt, self._tts, self._vad = stt, tts, vad
        self._voices = dict(voices or {})
        self._reply_gate, self._attach_delivery = reply_gate, attach_delivery
        self._end_of_turn, self._observer = end_of_turn, turn_observer
        self.agent, self._extra_tools = agent, tuple(extra_tools)
        self._agent_voice = self._voice_of(agent)  # checks the model and voice first
        turn = self.options.turn
        if turn.mode == "model" and end_of_turn is None:
            raise ConfigError("turn mode 'model' needs an end-of-turn model (end_of_turn=...)")
        flushes = bool(getattr(stt.capabilities, "manual_flush", False))
        if turn.flush_finalizes != flushes:
            turn = dataclasses.replace(turn, flush_finalizes=flushes)
        self.engine = TurnEngine(turn)
        self.history = CallHistory(self.options.history_messages)
        self.records = CallRecords(hub, room_id, transport)
        self.player = SpeechPlayer(
            transport,
            self.activity,
            hub.clock,
            SpeechHooks(
                wait=self._wait_for_floor,
                hold=self._hold,
                started=self._speech_started,
                ended=self._speech_ended,
            ),
        )
        self.results = ResultSpeaker(
            self.activity,
            hub.clock,
            lambda: self._agent_voice,
            self._play_result,
            sample_rate=transport.sample_rate,
            budget=prerender_budget,
        )
        keep = self.options.eot_audio_seconds if turn.mode == "model" else 0.0
        self.caller = CallerAudio(transport.sample_rate, self._voiced, keep_seconds=keep)
        self._speech_ids = itertools.count(1)
        self._replies: collections.deque[Reply] = collections.deque()
        self._reply_added = asyncio.Event()
        self._reply: Reply | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._streams: list[Any] = []
        self._floor = asyncio.Event()  # set while the caller does not hold the floor
        self._floor.set()
        self._wake = asyncio.Event()
        self._committed: dict[int, d.CallerTurnCommitted] = {}
        self._started = self._closed = False
        self.closed = asyncio.Event()
        self._on_close: list[Callable[[], None]] = []

    # -- lifecycle ------------------------------------------------------------------------

    @property
    def sample_rate(self) -> int:
        return self.transport.sample_rate

    @property
    def stt(self) -> Any:
        """The call's recognizer (a livekit `stt.STT`)."""
        return self._stt

    @property
    def tts(self) -> Any:
        """The call's default voice (a livekit `tts.TTS`)."""
        return self._tts

    @property
    def voice(self) -> Any:
        """The TTS of the agent on the call (its own voice, or the call's default)."""
        return self._agent_voice

    @property
    def tools(self) -> list[Tool]:
        """The tools of the agent on the call: its own, then the call's (a later one wins a
        name clash, as in the agent runner)."""
        by_name = {t.name: t for t in (*self.agent.tools, *self._extra_tools)}
        return list(by_name.values())

    async def start(self) -> None:
        """Open the VAD and recognizer streams, attach delivery, speak the greeting."""
        if self._started or self._closed:
            return
        await self.history.load(self.hub.store, self.room_id)
        self.records.start()
        vad_stream = self._vad.stream()
        stt_stream = self._stt.stream()
        self._streams = [vad_stream, stt_stream]
        self.caller.streams = [vad_stream, stt_stream]
        for stream, sink, name in (
            (vad_stream, self._on_vad, "vad"),
            (stt_stream, self._on_stt, "stt"),
        ):
            task = follow_events(stream, sink, self._stream_failed(name), name)
            if task is not None:
                self._keep(task)
        for plugin in {id(p): p for p in (self._stt, self._tts, *self._voices.values())}.values():
            if hasattr(plugin, "on"):  # livekit plugins report their faults as events
                plugin.on("error", self._provider_error)
                self._on_close.append(functools.partial(plugin.off, "error", self._provider_error))
        self.player.start()
        self._keep(asyncio.create_task(self._run_replies(), name="voicehub-replies"))
        self._keep(asyncio.create_task(self._run_ticks(), name="voicehub-turn-ticks"))
        self._started = True
        self.activity.session_attached()
        if self.greeting:
            self._keep(asyncio.create_task(self.say(self.greeting)))
        if self._attach_delivery:
            await self.hub.delivery.attach(self.room_id, self, self.activity)

    def on_close(self, callback: Callable[[], None]) -> None:
        """Call `callback` once the session closed (at once if it has)."""
        if self._closed:
            callback()
        else:
            self._on_close.append(callback)

    async def aclose(self) -> None:
        """End the call's processing; idempotent. The room stays open."""
        if self._closed:
            return
        self._closed = True
        if self._attach_delivery and self._started:
            await self.hub.delivery.detach(self.room_id)
        self.results.aclose()
        reply = self._reply
        if reply is not None and reply.task is not None:
            reply.task.cancel()
        while self._replies:
            self._replies.popleft().done.set()
        await self.player.aclose()
        for task in list(self._tasks):
            task.cancel()
        for stream in self._streams:
            with contextlib.suppress(Exception):
                await stream.aclose()
        self.activity.session_detached()
        await self.records.aclose()
        self.closed.set()
        for callback in self._on_close:
            try:
                callback()
            except Exception:
                log.exception("room %s: a close callback failed", self.room_id)

    # -- caller ---------------------------------------------------------------------------

    async def push_audio(self, pcm16: bytes) -> None:
        """Caller audio at the transport rate, any whole number of samples."""
        if self._started and not self._closed:
            self.caller.push(pcm16)

    async def push_text(self, text: str) -> None:
        """A caller turn typed, not said (phone keys): answered like a spoken turn, or taken
        as the answer to an open question."""
        if self._started and not self._closed and text.strip():
            self._apply(self.engine.typed(text, self._now()))

    def playout_confirmed(self, speech_id: str) -> None:
        """The transport played the speech marked `speech_id`."""
        self.player.confirm(speech_id)

    # -- speaking -------------------------------------------------------------------------

    async def say(self, text: str, *, allow_interrupt: bool = True) -> InjectOutcome:
        """Speak `text` verbatim; returns once played out or interrupted."""
        self._running()
        audio = synthesized_pcm(self._agent_voice, one_text(text), self.sample_rate)
        speech = Speech(
            self._new_speech_id(),
            "say",
            text,
            audio,
            interruptible=allow_interrupt,
            agent_id=self.agent.id,
        )
        self.player.play(speech)
        end = await speech.wait()
        return _say_outcome(end, speech.error, self.room_id)

    async def generate_reply(self, instructions: str) -> InjectOutcome:
        """Have the agent's model answer `instructions` aloud; returns once played out."""
        self._running()
        reply = self._queue_reply(Reply(turn=None, text="", instructions=instructions))
        await reply.done.wait()
        return _say_outcome(reply.outcome, None, self.room_id)

    async def inject(
        self, text: str, *, allow_interrupt: bool, metadata: dict[str, Any]
    ) -> InjectOutcome:
        """The delivery `Injector`: cut the agent's speech first if `allow_interrupt`
        (Immediate), then speak the result (gated, yielding; see `ResultSpeaker`)."""
        self._running()
        if allow_interrupt:
            await self.interrupt()
        if self.options.delivery_mode == "say":
            return await self.results.speak(text, metadata)
        reply = self._queue_reply(
            Reply(
                turn=None,
                text="",
                instructions=_RESULT_INSTRUCTIONS.format(text=text),
                kind="delivery",
            )
        )
        await reply.done.wait()
        return outcome_of(reply.outcome)

    def prepare(self, delivery_id: str, text: str) -> None:
        """A result waits for a gap: pre-render its speech ("say" mode only)."""
        if self.options.delivery_mode == "say" and self._started and not self._closed:
            self.results.prepare(delivery_id, text)

    def discard(self, delivery_id: str) -> None:
        """The result is settled: drop its pre-rendered speech."""
        self.results.discard(delivery_id)

    async def interrupt(self) -> None:
        """Stop the agent's current speech and reply (a running tool finishes first)."""
        self.player.interrupt()
        if self._reply is not None:
            self._stop_reply(self._reply)

    async def update_agent(self, agent: Agent, *, extra_tools: list[Tool] | None = None) -> None:
        """Hand the call to `agent` (instructions, tools, voice); the conversation carries
        over. A reply already running ends with the agent it started with."""
        voice = self._voice_of(agent)
        if agent.llm is None:
            raise ConfigError(
                f"agent {agent.id!r} has no llm: give it a ScriptedLLM or a chat model"
            )
        self.agent, self._agent_voice = agent, voice
        if extra_tools is not None:
            self._extra_tools = tuple(extra_tools)

    # -- the engine's inputs --------------------------------------------------------------

    def _on_vad(self, event: lk_vad.VADEvent) -> None:
        now = self._now()
        if event.type == lk_vad.VADEventType.START_OF_SPEECH:
            self.activity.user_speech_started()
            self.records.user_state("speaking")
            self._apply(self.engine.speech_started(now))
        elif event.type == lk_vad.VADEventType.END_OF_SPEECH:
            ended_at = now - max(0.0, float(event.silence_duration))
            self._apply(self.engine.speech_ended(now, ended_at))

    def _on_stt(self, event: lk_stt.SpeechEvent) -> None:
        kind = event.type
        final = kind == lk_stt.SpeechEventType.FINAL_TRANSCRIPT
        if not final and kind != lk_stt.SpeechEventType.INTERIM_TRANSCRIPT:
            return
        text = event.alternatives[0].text.strip() if event.alternatives else ""
        if text:
            self.records.caller_heard(text, final=final)
        self._apply(self.engine.transcript(text, final=final, now=self._now()))

    def _voiced(self) -> None:
        self.activity.caller_voiced()
        if self.player.current is not None and self.player.current.kind == "delivery":
            self._apply(self.engine.voiced(self._now()))

    def _provider_error(self, error: Any) -> None:
        """A plugin's "error" event (livekit's `STTError`, `TTSError`): a retry, a fallback."""
        kind = str(getattr(error, "type", "error"))  # "stt_error", "tts_error"
        detail = str(getattr(error, "error", error))
        self.records.provider_error(
            kind, detail, recoverable=bool(getattr(error, "recoverable", False))
        )

    def _stream_failed(self, name: str) -> Callable[[BaseException], None]:
        def failed(error: BaseException) -> None:
            log.error("room %s: the %s stream failed: %s", self.room_id, name, error)
            self.records.provider_error(f"{name}_error", str(error), recoverable=False)

        return failed

    # -- the engine's decisions -----------------------------------------------------------

    def _apply(self, decisions: list[d.Decision]) -> None:
        for decision in decisions:
            try:
                self._decide(decision)
            except Exception:
                log.exception("room %s: could not carry out %s", self.room_id, decision)
        self._floor_changed()
        self._wake.set()

    def _decide(self, decision: d.Decision) -> None:
        if isinstance(decision, d.CallerTurnStarted):
            self.activity.user_speech_started()
            self.records.user_state("speaking")
        elif isinstance(decision, d.CallerWentQuiet):
            self.activity.user_turn_awaiting_answer(True)  # busy first: never idle between
            self.activity.user_speech_stopped()
            self.records.user_state("listening")
        elif isinstance(decision, d.FlushRecognizer):
            with contextlib.suppress(RuntimeError):  # the stream ended
                self._streams[1].flush()
        elif isinstance(decision, d.AskEndOfTurn):
            self._ask_end_of_turn(decision.turn)
        elif isinstance(decision, d.CallerTurnCommitted):
            self._committed_turn(decision)
        elif isinstance(decision, d.CallerTurnDropped):
            self.activity.user_speech_stopped()
            self.activity.user_turn_awaiting_answer(False)
            self.records.user_state("listening")
        elif isinstance(decision, d.InterruptAgent):
            cut = self.player.interrupt(kinds=("reply", "say"))
            reply = self._reply
            if cut is not None and reply is not None and cut in reply.speeches:
                self._stop_reply(reply)
        elif isinstance(decision, d.YieldDelivery):
            self.player.interrupt(kinds=("delivery",))

    def _committed_turn(self, turn: d.CallerTurnCommitted) -> None:
        self.activity.user_speech_stopped()
        own = turn.text if turn.continues is None else self._own_text(turn)
        self.records.caller_turn(own, spoken=turn.spoken)
        if self.results.take_answer(own, spoken=turn.spoken) or not self._replies_open():
            self.activity.user_turn_awaiting_answer(False)  # no reply comes
            return
        continued = None
        if turn.continues is not None:
            continued = next((r for r in self._pending_replies() if r.turn == turn.continues), None)
            if continued is not None:
                self._stop_reply(continued)
        self.history.add_user(turn.text, continues=continued is not None)
        self._committed[turn.turn] = turn
        self._queue_reply(Reply(turn=turn.turn, text=turn.text))

    def _own_text(self, turn: d.CallerTurnCommitted) -> str:
        earlier = self._committed.get(turn.continues or -1)
        prefix = earlier.text if earlier is not None else ""
        return turn.text[len(prefix) :].strip() if turn.text.startswith(prefix) else turn.text

    def _replies_open(self) -> bool:
        return self._reply_gate is None or self._reply_gate()

    def _ask_end_of_turn(self, turn: int) -> None:
        model = self._end_of_turn
        if model is None:
            return
        audio = self.caller.recent_audio()

        async def ask() -> None:
            try:
                probability = await model.completion_probability(audio)
            except Exception:
                log.exception("room %s: the end-of-turn model failed", self.room_id)
                probability = 1.0  # the VAD's end stands: a turn is never held for ever
            self._apply(self.engine.end_of_turn(turn, probability, self._now()))

        self._keep(asyncio.create_task(ask()))

    # -- replies --------------------------------------------------------------------------

    def _queue_reply(self, reply: Reply) -> Reply:
        if reply.turn is not None:
            self.activity.agent_thinking_started()  # busy first: never idle between
            self.activity.user_turn_awaiting_answer(False)
        self._replies.append(reply)
        self._reply_added.set()
        return reply

    def _pending_replies(self) -> list[Reply]:
        running = [self._reply] if self._reply is not None else []
        return running + list(self._replies)

    async def _run_replies(self) -> None:
        while True:
            while not self._replies:
                self._reply_added.clear()
                await self._reply_added.wait()
            reply = self._replies.popleft()
            if reply.stopped:
                reply.done.set()
                continue
            self._reply = reply
            self.activity.agent_thinking_started()
            self.records.agent_state("thinking")
            if reply.turn is not None:
                self.engine.reply_started(reply.turn, reply.text)
            run = ReplyRun(self, reply)
            reply.task = asyncio.create_task(run.run(), name=f"voicehub-reply-{reply.turn}")
            try:
                await asyncio.wait({reply.task})
                if not reply.task.cancelled() and (error := reply.task.exception()) is not None:
                    log.error("room %s: the reply failed: %s", self.room_id, error)
                    self.records.provider_error("llm_error", str(error), recoverable=True)
                for speech in reply.speeches:
                    if reply.stopped:
                        self.player.cancel(speech)
                    await speech.wait()
            finally:
                if reply.turn is not None:
                    self.engine.reply_ended(reply.turn)
                    self._report(reply)
                self._reply = None
                self.activity.agent_thinking_finished()
                if self.player.current is None:
                    self.records.agent_state("listening")
                reply.done.set()

    def _stop_reply(self, reply: Reply) -> None:
        reply.stop()
        for speech in reply.speeches:
            if not speech.audio_started:
                self.player.cancel(speech)

    def _report(self, reply: Reply) -> None:
        turn = self._committed.pop(reply.turn or -1, None)
        if self._observer is None or turn is None:
            return
        first_audio = next((s.audio_started_at for s in reply.speeches if s.audio_started), None)
        ended = turn.speech_ended_at

        def since(start: float | None, end: float | None) -> float | None:
            return None if start is None or end is None else max(0.0, end - start)

        latency = TurnLatency(
            room_id=self.room_id,
            turn=turn.turn,
            speech_ended_at=ended,
            end_of_turn_delay=since(ended, turn.committed_at),
            stt_final_delay=since(ended, turn.final_at),
            llm_ttft=since(reply.started_at, reply.first_token_at),
            tts_ttfb=since(reply.first_sentence_at, reply.first_audio_at),
            voice_to_voice=since(ended, first_audio),
            interrupted=reply.outcome is SpeechEnd.INTERRUPTED,
        )
        try:
            self._observer.turn_measured(latency)
        except Exception:
            log.exception("room %s: the turn observer failed", self.room_id)

    # -- ReplyHost ------------------------------------------------------------------------

    def reply_agent(self) -> tuple[Agent, Sequence[Tool], ToolContext, Any]:
        agent = self.agent
        context = ToolContext(hub=self.hub, room_id=self.room_id, agent_id=agent.id)
        return agent, self._extra_tools, context, self._agent_voice

    def new_speech_id(self) -> str:
        return self._new_speech_id()

    def play(self, speech: Speech) -> None:
        self.player.play(speech)

    def tools_running(self, reply: Reply, running: bool) -> None:
        if running and reply is self._reply:
            self.engine.reply_used_tools()

    def tool_ran(self, reply: Reply, call: ToolCall, result: ToolResult) -> None:
        self.records.tool_ran(reply.agent_id or self.agent.id, call, result)

    def now(self) -> float:
        return self._now()

    # -- speech hooks ---------------------------------------------------------------------

    async def _play_result(self, text: str, audio: AsyncIterator[bytes]) -> Speech:
        speech = Speech(self._new_speech_id(), "delivery", text, audio, agent_id=self.agent.id)
        self.player.play(speech)
        await speech.wait()
        return speech

    async def _wait_for_floor(self, speech: Speech) -> None:
        """The agent's words wait while the caller holds the floor (not a result: it is
        held instead, and offered at the next gap)."""
        if speech.kind != "delivery" and not self._floor.is_set():
            await wait_or_sleep(self.hub.clock, self._floor, self.options.floor_wait)

    def _hold(self, speech: Speech) -> bool:
        return self.results.hold(speech)

    def _speech_started(self, speech: Speech) -> None:
        self.engine.agent_speaking(speech.kind, interruptible=speech.interruptible)
        reply = self._reply
        if reply is not None and speech in reply.speeches:
            reply.heard = True
            self.engine.reply_heard()
        self.records.agent_state("speaking")

    def _speech_ended(self, speech: Speech) -> None:
        if self.player.current is speech or self.player.current is None:
            self.engine.agent_speaking(None)
        if speech.end in (SpeechEnd.PLAYED, SpeechEnd.INTERRUPTED) and speech.audio_started:
            heard = speech.heard_text()
            interrupted = speech.end is SpeechEnd.INTERRUPTED
            if heard:
                who = speech.agent_id or self.agent.id
                self.records.agent_said(who, heard, interrupted=interrupted)
            reply = self._reply
            in_reply = reply is not None and speech in reply.speeches
            if heard and not in_reply:  # a reply's words are in the history already
                self.history.add(ChatMessage(role="assistant", content=heard))
        if speech.end is SpeechEnd.FAILED and speech.error is not None:
            self.records.provider_error("tts_error", str(speech.error), recoverable=True)
        if self._reply is None and not self.player.queued:
            self.records.agent_state("listening")

    # -- internals ------------------------------------------------------------------------

    async def _run_ticks(self) -> None:
        clock = self.hub.clock
        while True:
            self._wake.clear()
            wake = self.engine.next_wake()
            if wake is None:
                await self._wake.wait()
                continue
            delay = wake - clock.now()
            if delay > 0:
                sleeper = asyncio.ensure_future(clock.sleep(delay))
                woken = asyncio.ensure_future(self._wake.wait())
                try:
                    await asyncio.wait({sleeper, woken}, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    sleeper.cancel()
                    woken.cancel()
                if self._wake.is_set():
                    continue
            self._apply(self.engine.tick(clock.now()))

    def _floor_changed(self) -> None:
        if self.engine.caller_has_floor:
            self._floor.clear()
        else:
            self._floor.set()

    def _voice_of(self, agent: Agent) -> Any:
        """The TTS `agent` speaks with (ConfigError: no model, or a voice this call lacks)."""
        if agent.llm is None:
            raise ConfigError(
                f"agent {agent.id!r} has no llm: give it a ScriptedLLM or a chat model"
            )
        if agent.voice is None:
            return self._tts
        voice = self._voices.get(agent.voice)
        if voice is None:
            known = ", ".join(sorted(self._voices)) or "none"
            raise ConfigError(
                f"agent {agent.id!r} asks for voice {agent.voice!r}, which this session does "
                f"not have (known voices: {known}); add it to `voices`"
            )
        return voice

    def _new_speech_id(self) -> str:
        return f"{self.room_id}/speech-{next(self._speech_ids)}"

    def _now(self) -> float:
        return self.hub.clock.now()

    def _running(self) -> None:
        if not self._started or self._closed:
            raise VoicehubError(
                f"the voice session of room {self.room_id!r} is not running; "
                "start() it first (results stay queued until a session is live)"
            )

    def _keep(self, task: asyncio.Task[Any]) -> None:
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


def _say_outcome(end: SpeechEnd, error: BaseException | None, room_id: str) -> InjectOutcome:
    if end is SpeechEnd.FAILED:
        raise VoicehubError(f"room {room_id!r}: speech failed: {error}") from error
    if end is SpeechEnd.PLAYED:
        return InjectOutcome.FINISHED
    return InjectOutcome.INTERRUPTED
