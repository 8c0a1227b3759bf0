"""The caller's side of a call: what the VAD and recognizer hear goes into the turn engine,
and the engine's decisions are carried out.

`CallerTurns` feeds `TurnEngine` (VAD starts and ends, transcripts, per-frame voice, the
end-of-turn model's verdicts, and `tick` at the time the engine asked for, on the hub's
clock) and acts on what it decides: `VoiceActivity` and the client's states, a flush of the
recognizer, a committed turn (recorded, then answered by a queued reply, taken as the
answer to an offer, or left to ask_user while the reply gate is closed; a turn that
continues an unheard reply stops that reply), and interruptions (the agent's words, or a
result yielding to the caller). It also tells the floor (`CallerFloor`) whether the
caller holds it, after every decision.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from voicehub.core.jobs import TaskSet
from voicehub.voice.audio.framing import FRAME_MS
from voicehub.voice.engine import decisions as d
from voicehub.voice.engine.reply_run import Reply
from voicehub.voice.engine.tick_gate import Hearing
from voicehub.voice.providers import vendor_import
from voicehub.voice.providers.streams import PauseWatch
from voicehub.voice.turns.early import EarlyAsk
from voicehub.voice.turns.early import completion_probability as early_answer

with vendor_import("livekit-agents"):
    from livekit.agents import stt as lk_stt
    from livekit.agents import vad as lk_vad

if TYPE_CHECKING:
    from voicehub.voice.engine.call_parts import CallParts
    from voicehub.voice.engine.floor import CallerFloor
    from voicehub.voice.engine.listening import CallerAudio
    from voicehub.voice.engine.replies import CallReplies
    from voicehub.voice.engine.results import ResultSpeaker
    from voicehub.voice.engine.speech_player import SpeechPlayer
    from voicehub.voice.engine.turn_engine import TurnEngine
    from voicehub.voice.providers.streams import RecognizerAbilities, VadAbilities
    from voicehub.voice.turns.model import EndOfTurnModel

__all__ = ["CallerTurns"]

log = logging.getLogger("voicehub.voice")


class CallerTurns:
    """One call's turn-taking driver (see the module docstring)."""

    def __init__(
        self,
        parts: CallParts,
        engine: TurnEngine,
        *,
        player: SpeechPlayer,
        replies: CallReplies,
        results: ResultSpeaker,
        floor: CallerFloor,
        caller: CallerAudio,
        reply_gate: Callable[[], bool] | None = None,
        end_of_turn: EndOfTurnModel | None = None,
    ) -> None:
        self.room_id, self.clock, self.engine = parts.room_id, parts.clock, engine
        self.activity, self.records, self.history = parts.activity, parts.records, parts.history
        self.player, self.replies, self.results = player, replies, results
        self._reply_gate, self._end_of_turn = reply_gate, end_of_turn
        self._floor = floor
        self.caller = caller  # recent audio for the end-of-turn model, how much was pushed
        # the STT stream, flushed at the VAD's end of speech, and the VAD stream (how far
        # it has analysed): given when the call starts (`listen`)
        self.recognizer: RecognizerAbilities | None = None
        self.vad: VadAbilities | None = None
        self._vad_heard = 0.0  # audio time of a livekit VAD's latest inference event
        self._vad_ended: float | None = None  # audio time of its latest end of speech
        self._wake = asyncio.Event()
        self._tasks = TaskSet("the caller's turns")
        self.early: EarlyAsk | None = None  # the model started at a pause (`listen`)

    def listen(self, recognizer: RecognizerAbilities, vad: VadAbilities) -> None:
        """The call started: these are its recognizer and VAD streams. A VAD that says when
        the caller pauses inside their speech starts the end-of-turn model there
        (`voicehub.voice.turns.early`, at the policy's `model_early`)."""
        self.recognizer, self.vad = recognizer, vad
        policy, model = self.engine.settings.policy, self._end_of_turn
        if (
            model is not None
            and policy.mode == "model"
            and policy.model_early is not None
            and isinstance(vad, PauseWatch)
        ):
            self.early = EarlyAsk(model, self.caller.recent_audio)
            vad.watch_pause(policy.model_early, self.early.paused)

    # -- inputs -------------------------------------------------------------------------

    def on_vad(self, event: lk_vad.VADEvent) -> None:
        """A VAD event (livekit's `vad.VADEvent`)."""
        now = self.clock.now()
        if event.type == lk_vad.VADEventType.INFERENCE_DONE:
            self._vad_heard = float(event.timestamp)  # audio seconds analysed
            if self.engine.release_hold("vad"):
                self._wake.set()
            return
        if event.type == lk_vad.VADEventType.START_OF_SPEECH:
            if self.early is not None:  # a pause of the speech before is no pause of this
                self.early.drop()
            if self.recognizer is not None:  # an utterance recognizer keeps audio from here
                self.recognizer.speech_started()
            self.activity.user_speech_started()
            self.records.user_state("speaking")
            self.apply(self.engine.speech_started(now))
        elif event.type == lk_vad.VADEventType.END_OF_SPEECH:
            # where in the caller's audio it decided (a VAD of ours says; None: unknown)
            self._vad_ended = self.vad.analysed_seconds if self.vad is not None else None
            ended_at = now - max(0.0, float(event.silence_duration))
            self.apply(self.engine.speech_ended(now, ended_at))

    def on_stt(self, event: lk_stt.SpeechEvent) -> None:
        """A recognizer event (livekit's `stt.SpeechEvent`): interim and final transcripts."""
        kind = event.type
        final = kind == lk_stt.SpeechEventType.FINAL_TRANSCRIPT
        if not final and kind != lk_stt.SpeechEventType.INTERIM_TRANSCRIPT:
            return
        text = event.alternatives[0].text.strip() if event.alternatives else ""
        confidence = float(event.alternatives[0].confidence) if event.alternatives else 0.0
        if text:
            self.records.caller_heard(text, final=final)
        now = self.clock.now()
        self.apply(self.engine.transcript(text, final=final, now=now, confidence=confidence))

    def _flush_recognizer(self, recognizer: RecognizerAbilities) -> None:
        """Flush the recognizer at the VAD's end of speech, telling it how far behind the
        audio pushed the VAD decided when the VAD says (`flush_ended`: a recognizer that
        cuts utterances itself, Whisper's window, keeps words said after a pause the VAD
        ended late whole)."""
        ended, self._vad_ended = self._vad_ended, None
        if ended is None:
            recognizer.flush()
            return
        recognizer.flush_ended(max(0.0, self.caller.seconds - ended))

    def voiced(self) -> None:
        """A speech-like 20 ms caller frame (before the VAD: a result pauses for it at once,
        a reply once the caller has been voiced long enough)."""
        self.activity.caller_voiced()
        current = self.player.current
        if current is not None and current.audio_started:
            self.apply(self.engine.voiced(self.clock.now(), FRAME_MS / 1000))

    def typed(self, text: str) -> None:
        """A turn typed on the keypad."""
        self.apply(self.engine.typed(text, self.clock.now()))

    async def run(self) -> None:
        """Tick the engine when it asked to be (a task of the session)."""
        while True:
            self._wake.clear()
            wake = self.engine.next_wake()
            if wake is None:
                await self._wake.wait()
                continue
            delay = wake - self.clock.now()
            if delay > 0:
                sleeper = asyncio.ensure_future(self.clock.sleep(delay))
                woken = asyncio.ensure_future(self._wake.wait())
                try:
                    await asyncio.wait({sleeper, woken}, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    sleeper.cancel()
                    woken.cancel()
                if self._wake.is_set():
                    continue  # an input moved the engine on: ask it again
            self.apply(self.engine.tick(self.clock.now(), self._hearing()))

    def _hearing(self) -> Hearing:
        """What the VAD and the recognizer have done with the caller's audio (the engine's
        tick gate decides on it). A livekit VAD says how far it got only in its inference
        events; one of ours in `analysed_seconds`."""
        caller = self.caller
        vad, recognizer = self.vad, self.recognizer
        analysed = vad.analysed_seconds if vad is not None else None
        return Hearing(
            pushed=caller.seconds,
            analysed=self._vad_heard if analysed is None else analysed,
            finals_owed=recognizer.finals_owed if recognizer is not None else 0,
        )

    def aclose(self) -> None:
        if self.early is not None:
            self.early.drop()
        self._tasks.cancel()

    # -- decisions ----------------------------------------------------------------------

    def apply(self, decisions: list[d.Decision]) -> None:
        """Carry out `decisions`, in order (one failing does not stop the others)."""
        for decision in decisions:
            try:
                self._decide(decision)
            except Exception:
                log.exception("room %s: could not carry out %s", self.room_id, decision)
        self._floor.held_by_caller(self.engine.caller_has_floor)
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
            if self.recognizer is not None:
                with contextlib.suppress(RuntimeError):  # the stream ended
                    self._flush_recognizer(self.recognizer)
        elif isinstance(decision, d.AskEndOfTurn):
            self._ask_end_of_turn(decision.turn)
        elif isinstance(decision, d.CallerTurnCommitted):
            self._committed(decision)
        elif isinstance(decision, d.CallerTurnDropped):
            self.activity.user_speech_stopped()
            self.activity.user_turn_awaiting_answer(False)
            self.records.user_state("listening")
            self.replies.drop_prepared()
        elif isinstance(decision, d.PrepareReply):
            if self._reply_gate is None or self._reply_gate():  # else no reply will come
                self.replies.prepare(decision.turn, decision.text)
        elif isinstance(decision, d.DropPreparedReply):
            self.replies.drop_prepared()
        elif isinstance(decision, d.PauseAgent):
            self.player.pause()
        elif isinstance(decision, d.ResumeAgent):
            self.player.resume()
        elif isinstance(decision, d.InterruptAgent):
            cut = self.player.interrupt()
            reply = self.replies.current
            if cut is not None and reply is not None and cut in reply.speeches:
                self.replies.stop(reply)

    def _committed(self, turn: d.CallerTurnCommitted) -> None:
        self.activity.user_speech_stopped()
        own = turn.own_text
        self.records.caller_turn(own, spoken=turn.spoken)
        replies_open = self._reply_gate is None or self._reply_gate()
        taken = self.results.take_answer(own, spoken=turn.spoken)
        if taken or not replies_open or not turn.answer:
            self.replies.drop_prepared()
            self.activity.user_turn_awaiting_answer(False)  # no reply comes
            return
        if turn.prepared and self.replies.commit_prepared(turn):
            return
        self.replies.drop_prepared()
        continued = None
        if turn.continues is not None:
            continued = next((r for r in self.replies.pending() if r.turn == turn.continues), None)
            if continued is not None:
                self.replies.stop(continued)
        # the reply it continues may have ended meanwhile: then this turn stands alone
        text = turn.text if continued is not None else own
        self.history.add_user(text, continues=continued is not None)
        self.replies.committed[turn.turn] = turn
        self.replies.queue(Reply(turn=turn.turn, text=text))

    def _ask_end_of_turn(self, turn: int) -> None:
        model = self._end_of_turn
        if model is None:
            return
        early = self.early.take() if self.early is not None else None
        audio = self.caller.recent_audio()  # up to the end of speech, for an ask now
        threshold = self.engine.settings.policy.threshold

        async def ask() -> None:
            try:  # the early inference when it says complete, else the model asked now
                probability = await early_answer(early, model, audio, threshold)
            except Exception:
                log.exception("room %s: the end-of-turn model failed", self.room_id)
                probability = 1.0  # the VAD's end stands: a turn is never held for ever
            self.apply(self.engine.end_of_turn(turn, probability, self.clock.now()))

        self._tasks.start(ask(), name="end-of-turn ask")
