"""The pipeline `VoiceSession`: voicehub's own engine driving one call.

`PipelineVoiceSession` is the asyncio driver around `TurnEngine`: caller audio goes to the
VAD and the recognizer (`listening`), their events into the engine, the engine's decisions
into replies (`reply_run`, through voicehub's agent runner), speech (`speech_player`) and records
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
import contextlib
import dataclasses
import functools
import itertools
import logging
import uuid
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from voicehub.agents.llm import ChatMessage
from voicehub.agents.tools import Tool
from voicehub.core.jobs import TaskSet
from voicehub.core.store.base import TaskStatus
from voicehub.delivery.injector import InjectOutcome
from voicehub.errors import ConfigError, VoicehubError
from voicehub.voice.activity import VoiceActivity
from voicehub.voice.engine.call_parts import CallAgent, CallParts, CallSpeech, TurnJudges
from voicehub.voice.engine.caller_turns import CallerTurns
from voicehub.voice.engine.floor import CallerFloor
from voicehub.voice.engine.history import CallHistory
from voicehub.voice.engine.idle import CallIdle
from voicehub.voice.engine.latency import TurnObserver
from voicehub.voice.engine.listening import CallerAudio, follow_events
from voicehub.voice.engine.options import EngineOptions
from voicehub.voice.engine.records import CallRecords
from voicehub.voice.engine.replies import CallReplies
from voicehub.voice.engine.reply_run import Reply
from voicehub.voice.engine.results import PrerenderBudget, ResultSpeaker, outcome_of
from voicehub.voice.engine.speech import Speech, SpeechEnd
from voicehub.voice.engine.speech_player import SpeechHooks, SpeechPlayer
from voicehub.voice.engine.tts_audio import one_text, synthesized_pcm
from voicehub.voice.engine.turn_engine import TurnEngine
from voicehub.voice.engine.utterance_stream import finalizes_on_flush, recognizer_stream
from voicehub.voice.providers import vendor_import
from voicehub.voice.providers.recovering_stream import RecoveringRecognizeStream
from voicehub.voice.providers.streams import recognizer_abilities, vad_abilities
from voicehub.voice.transport import HangsUp

with vendor_import("livekit-agents"):
    from livekit.agents import stt as lk_stt
    from livekit.agents import tts as lk_tts

if TYPE_CHECKING:
    from voicehub.agents.agent import Agent
    from voicehub.voice.session import CallRuntime
    from voicehub.voice.transport import CallTransport

__all__ = [  # EngineOptions, CallAgent, CallSpeech, TurnJudges: from .options, .call_parts
    "CallAgent",
    "CallSpeech",
    "EngineOptions",
    "PipelineVoiceSession",
    "TurnJudges",
]

log = logging.getLogger("voicehub.voice")


@runtime_checkable
class ReportsErrors(Protocol):
    """A plugin that reports its faults as "error" events (livekit's plugins)."""

    def on(self, event: str, callback: Callable[..., Any]) -> Any: ...

    def off(self, event: str, callback: Callable[..., Any]) -> Any: ...


_RESULT_INSTRUCTIONS = "Tell the caller this result now: {text}"


class PipelineVoiceSession:
    """A `VoiceSession` (and delivery `PreparingInjector`) on voicehub's turn engine.

    `agent` is the desk's side of the call (`CallAgent`: the agent, its extra tools, the
    greeting, the reply gate), `speech` its providers (`CallSpeech`), `judges` what judges
    its turns beyond silence (`TurnJudges`); `turn_observer` receives every answered turn's
    latency. Every collaborator is built here with all it needs, once.
    """

    def __init__(
        self,
        hub: CallRuntime,
        room_id: str,
        agent: CallAgent,
        transport: CallTransport,
        speech: CallSpeech,
        *,
        options: EngineOptions | None = None,
        judges: TurnJudges | None = None,
        turn_observer: TurnObserver | None = None,
        prerender_budget: PrerenderBudget | None = None,
        activity: VoiceActivity | None = None,
    ) -> None:
        self.hub, self.room_id, self.transport = hub, room_id, transport
        self.options = options or EngineOptions()
        judges = judges or TurnJudges()
        self.activity = activity if activity is not None else VoiceActivity(hub.clock)
        self.greeting = agent.greeting
        self._stt, self._tts, self._vad = speech.stt, speech.tts, speech.vad
        self._voices = dict(speech.voices)
        self.agent, self._extra_tools = agent.agent, tuple(agent.extra_tools)
        self._reply_gate = agent.reply_gate  # closed while a question waits for its answer
        self._agent_voice = self._voice_of(agent.agent)  # checks the model and voice first
        turn = self.options.turn
        if turn.mode == "model" and judges.end_of_turn is None:
            raise ConfigError(
                "turn mode 'model' needs an end-of-turn model (TurnJudges(end_of_turn=...))"
            )
        flushes = finalizes_on_flush(speech.stt)
        if turn.flush_finalizes != flushes:
            turn = dataclasses.replace(turn, flush_finalizes=flushes)
        self.engine = TurnEngine(
            turn,
            words_open=judges.words_open,
            words_complete=judges.words_complete,
            started_at=hub.clock.now(),
        )
        self.history = CallHistory(self.options.history_messages)
        self.records = CallRecords(hub, room_id, transport)
        parts = CallParts(hub, room_id, self.activity, self.records, self.history)
        floor = CallerFloor(hub.clock, self.options.floor_wait)
        self.player = SpeechPlayer(
            transport,
            self.activity,
            hub.clock,
            SpeechHooks(
                wait=floor.wait_for,
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
        # Marks of this session's speeches: its own line's mark, never another session's of
        # the same room (the instance a call came from numbers its speeches from 1 too)
        self._speech_ids = itertools.count(1)
        self._line = uuid.uuid4().hex[:8]
        self.replies = CallReplies(
            parts,
            engine=self.engine,
            player=self.player,
            on_call=lambda: (self.agent, self._extra_tools, self._agent_voice),
            speech_id=self._new_speech_id,
            sample_rate=transport.sample_rate,
            observer=turn_observer,
        )
        keep = self.options.eot_audio_seconds if turn.mode == "model" else 0.0
        self.caller = CallerAudio(
            transport.sample_rate,
            self._caller_voiced,
            keep_seconds=keep,
            intake=speech.caller_filter,
        )
        self.turns = CallerTurns(
            parts,
            self.engine,
            player=self.player,
            replies=self.replies,
            results=self.results,
            floor=floor,
            caller=self.caller,
            reply_gate=agent.reply_gate,
            end_of_turn=judges.end_of_turn,
        )
        self._tasks = TaskSet("the pipeline voice session")
        self._streams: list[Any] = []
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
        # a failed provider stream is replaced, so the caller is heard again
        stt_stream = RecoveringRecognizeStream(
            functools.partial(recognizer_stream, self._stt), self.hub.clock
        )
        self._streams = [vad_stream, stt_stream]
        self.caller.feed(vad_stream, stt_stream)
        self.turns.listen(recognizer_abilities(stt_stream), vad_abilities(vad_stream))
        for stream, sink, name in (
            (vad_stream, self.turns.on_vad, "vad"),
            (stt_stream, self.turns.on_stt, "stt"),
        ):
            task = follow_events(
                stream, sink, self._stream_failed(name), name, boundaries_only=name == "vad"
            )
            if task is not None:
                self._tasks.hold(task)
        for plugin in {id(p): p for p in (self._stt, self._tts, *self._voices.values())}.values():
            if isinstance(plugin, ReportsErrors):  # livekit plugins: their faults as events
                plugin.on("error", self._provider_error)
                self._on_close.append(functools.partial(plugin.off, "error", self._provider_error))
        self.player.start()
        self._tasks.start(self.replies.run(), name="voicehub-replies")
        self._tasks.start(self.turns.run(), name="voicehub-turn-ticks")
        self._started = True
        self.activity.session_attached()
        if self.greeting:
            self._tasks.start(self.say(self.greeting), name="voicehub-greeting")
        idle = CallIdle(
            self.activity,
            self.hub.clock,
            prompt_after=self.options.idle_prompt_after,
            hang_up_after=self.options.idle_hang_up_after,
            pending=self._pending_topics,
            say=self.say,
            end_call=self.end_call,
        )
        self._tasks.start(idle.run(), name="voicehub-idle-caller")
        await self.hub.delivery.attach(self.room_id, self, self.activity)

    def on_close(self, callback: Callable[[], None]) -> None:
        """Call `callback` once the session closed (at once if it has)."""
        if self._closed:
            callback()
        else:
            self._on_close.append(callback)

    async def flush(self) -> None:
        """See `VoiceSession.flush`."""
        await self.records.outbox.flush()

    async def aclose(self) -> None:
        """End the call's processing; idempotent. The room stays open."""
        if self._closed:
            return
        self._closed = True
        if self._started:
            await self.hub.delivery.detach(self.room_id)
        self.results.aclose()
        self.replies.aclose()
        self.turns.aclose()
        await self.player.aclose()
        self._tasks.cancel()
        for stream in self._streams:
            with contextlib.suppress(Exception):
                await stream.aclose()
        self.caller.close()
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
            self.turns.typed(text)

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
        return outcome_of(end, speech.error)

    async def generate_reply(self, instructions: str) -> InjectOutcome:
        """Have the agent's model answer `instructions` aloud; returns once played out."""
        self._running()
        reply = self.replies.queue(Reply(turn=None, text="", instructions=instructions))
        await reply.done.wait()
        return outcome_of(reply.outcome)

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
        reply = self.replies.queue(
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

    async def end_call(self, reason: str) -> None:
        """End the call from the agent's side: the transport hangs up (where it can) and
        the session closes; the room and held results stay, as after any hang-up."""
        transport = self.transport
        if isinstance(transport, HangsUp):
            try:
                await transport.hang_up(reason)
            except Exception:
                log.exception("room %s: the transport could not hang up", self.room_id)
        await self.aclose()

    async def _pending_topics(self) -> list[str]:
        """What is still being worked on for this caller (the inputs of running tasks)."""
        tasks = await self.hub.store.list_tasks(
            parent_room_id=self.room_id, statuses=[TaskStatus.QUEUED, TaskStatus.RUNNING]
        )
        return [task.input for task in tasks if task.input]

    async def interrupt(self) -> None:
        """Stop the agent's current speech and reply (a running tool finishes first)."""
        self.player.interrupt()
        if self.replies.current is not None:
            self.replies.stop(self.replies.current)

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

    def _provider_error(self, error: object) -> None:
        """A plugin's "error" event (livekit's `STTError`, `TTSError`): a retry, a fallback."""
        if isinstance(error, lk_stt.STTError | lk_tts.TTSError):
            kind: str = error.type  # "stt_error", "tts_error"
            self.records.provider_error(kind, str(error.error), recoverable=error.recoverable)
        else:
            self.records.provider_error("error", str(error), recoverable=False)

    def _stream_failed(self, name: str) -> Callable[[BaseException], None]:
        def failed(error: BaseException) -> None:
            log.error("room %s: the %s stream failed: %s", self.room_id, name, error)
            self.records.provider_error(f"{name}_error", str(error), recoverable=False)

        return failed

    # -- speech hooks ---------------------------------------------------------------------

    async def _play_result(self, text: str, audio: AsyncIterator[bytes]) -> Speech:
        speech = Speech(self._new_speech_id(), "delivery", text, audio, agent_id=self.agent.id)
        self.player.play(speech)
        await speech.wait()
        return speech

    def _caller_voiced(self) -> None:
        self.turns.voiced()

    def _hold(self, speech: Speech) -> bool:
        return self.results.hold(speech)

    def _speech_started(self, speech: Speech) -> None:
        self.engine.agent_speaking(speech.kind, interruptible=speech.interruptible)
        reply = self.replies.current
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
            reply = self.replies.current
            in_reply = reply is not None and speech in reply.speeches
            if heard and not in_reply:  # a reply's words are in the history already
                self.history.add(ChatMessage(role="assistant", content=heard))
        if speech.end is SpeechEnd.FAILED and speech.error is not None:
            self.records.provider_error("tts_error", str(speech.error), recoverable=True)
        if (self._reply_over() or self._awaiting_answer()) and not self.player.queued:
            self.records.agent_state("listening")

    # -- internals ------------------------------------------------------------------------

    def _awaiting_answer(self) -> bool:
        """Whether a question is open (`reply_gate` closed): the reply waits for the
        caller's answer, so once nothing plays the agent is listening, the turn the
        caller's."""
        return self._reply_gate is not None and not self._reply_gate()

    def _reply_over(self) -> bool:
        """Whether no reply runs or will speak again (its model and tools are done and its
        speeches ended): the agent is listening."""
        reply = self.replies.current
        if reply is None:
            return True
        running = reply.task is None or not reply.task.done()
        return not running and all(speech.done for speech in reply.speeches)

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
        return f"{self.room_id}/speech-{self._line}-{next(self._speech_ids)}"

    def _now(self) -> float:
        return self.hub.clock.now()

    def _running(self) -> None:
        if not self._started or self._closed:
            raise VoicehubError(
                f"the voice session of room {self.room_id!r} is not running; "
                "start() it first (results stay queued until a session is live)"
            )
