"""The caller's side of a call: what the VAD and recognizer hear goes into the turn engine,
and the engine's decisions are carried out.

`CallerTurns` feeds `TurnEngine` (VAD starts and ends, transcripts, per-frame voice, the
end-of-turn model's verdicts, and `tick` at the time the engine asked for, on the hub's
clock) and acts on what it decides: `VoiceActivity` and the client's states, a flush of the
recognizer, a committed turn (recorded, then answered by a queued reply, taken as the
answer to an offer, or left to ask_user while the reply gate is closed; a turn that
continues an unheard reply stops that reply), and interruptions (the agent's words, or a
result yielding to the caller). It also keeps the floor: the agent's words wait while the
caller holds it (`wait_for_floor`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from voicehub.core.clock import wait_or_sleep
from voicehub.voice.audio.framing import FRAME_MS
from voicehub.voice.engine import decisions as d
from voicehub.voice.engine.reply import Reply
from voicehub.voice.providers import vendor_import

with vendor_import("livekit-agents"):
    from livekit.agents import stt as lk_stt
    from livekit.agents import vad as lk_vad

if TYPE_CHECKING:
    from voicehub.core.clock import Clock
    from voicehub.voice.activity import VoiceActivity
    from voicehub.voice.engine.history import CallHistory
    from voicehub.voice.engine.listening import CallerAudio
    from voicehub.voice.engine.playout import SpeechPlayer
    from voicehub.voice.engine.records import CallRecords
    from voicehub.voice.engine.replies import CallReplies
    from voicehub.voice.engine.results import ResultSpeaker
    from voicehub.voice.engine.speech import Speech
    from voicehub.voice.engine.turn_engine import TurnEngine
    from voicehub.voice.turns.model import EndOfTurnModel

__all__ = ["CallerTurns"]

log = logging.getLogger("voicehub.voice")

VAD_LAG_ALLOWED = 0.1  # seconds of caller audio the VAD may not have analysed yet
VAD_STALL_LIMIT = 5.0  # a lagging VAD that analyses nothing for this long holds no turn
# how often a tick held by a lagging VAD looks again: ours send no event per window (the
# engine takes their speech boundaries only), so their progress is read, not awaited
VAD_POLL = 0.02
RECOGNIZER_WAIT_LIMIT = 15.0  # a final owed is waited for this long past final_timeout


class CallerTurns:
    """One call's turn-taking driver (see the module docstring)."""

    def __init__(
        self,
        room_id: str,
        clock: Clock,
        engine: TurnEngine,
        *,
        activity: VoiceActivity,
        records: CallRecords,
        history: CallHistory,
        player: SpeechPlayer,
        replies: CallReplies,
        results: ResultSpeaker,
        reply_gate: Callable[[], bool] | None = None,
        end_of_turn: EndOfTurnModel | None = None,
        floor_wait: float = 3.0,
    ) -> None:
        self.room_id, self.clock, self.engine = room_id, clock, engine
        self.activity, self.records, self.history = activity, records, history
        self.player, self.replies, self.results = player, replies, results
        self._reply_gate, self._end_of_turn = reply_gate, end_of_turn
        self._floor_wait = floor_wait
        self.caller: CallerAudio | None = None  # set by the session (recent audio for EOT)
        self.recognizer: Any = None  # the STT stream, flushed at the VAD's end of speech
        self.vad: Any = None  # the VAD stream (how far it has analysed, when it says)
        self._vad_heard = 0.0  # audio time of its latest inference event
        self._vad_ended: float | None = None  # audio time of its latest end of speech
        self._vad_moved = asyncio.Event()  # set when a livekit VAD's event says it got on
        # what the VAD had analysed, and when that was last seen to grow (from the start)
        self._vad_seen = (0.0, clock.now())
        self._owed_since: float | None = None  # when a tick first waited for an owed final
        self._floor = asyncio.Event()  # set while the caller does not hold the floor
        self._floor.set()
        self._wake = asyncio.Event()
        self._tasks: set[asyncio.Task[Any]] = set()

    # -- inputs -------------------------------------------------------------------------

    def on_vad(self, event: lk_vad.VADEvent) -> None:
        """A VAD event (livekit's `vad.VADEvent`)."""
        now = self.clock.now()
        if event.type == lk_vad.VADEventType.INFERENCE_DONE:
            self._vad_heard = float(event.timestamp)  # audio seconds analysed
            self._vad_moved.set()
            return
        if event.type == lk_vad.VADEventType.START_OF_SPEECH:
            started = getattr(self.recognizer, "speech_started", None)
            if started is not None:  # an utterance recognizer keeps audio from here on
                started()
            self.activity.user_speech_started()
            self.records.user_state("speaking")
            self.apply(self.engine.speech_started(now))
        elif event.type == lk_vad.VADEventType.END_OF_SPEECH:
            # where in the caller's audio it decided (a VAD of ours says; None: unknown)
            self._vad_ended = getattr(self.vad, "analysed_seconds", None)
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

    def _flush_recognizer(self) -> None:
        """Flush the recognizer at the VAD's end of speech. One that cuts utterances
        itself (`flush_ended`: Whisper's window) is told how far behind the audio pushed
        the VAD decided, so words said after a pause the VAD ended late stay whole."""
        ended, self._vad_ended = self._vad_ended, None
        flush_ended = getattr(self.recognizer, "flush_ended", None)
        if flush_ended is None or ended is None or self.caller is None:
            self.recognizer.flush()
            return
        flush_ended(max(0.0, self.caller.seconds - ended))

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
            if self._vad_behind():
                # a burst (or a loaded machine): the VAD has not yet heard the audio after
                # the pause; a turn must not end on a silence nobody has analysed yet. Look
                # again soon (or at a livekit VAD's next event) until it caught up or
                # stalled (then it holds nothing)
                self._vad_moved.clear()
                await wait_or_sleep(self.clock, self._vad_moved, VAD_POLL)
                continue
            left = self._final_owed()
            if left is not None:
                # a recognizer of ours still decoding the turn's words (a loaded machine):
                # a turn committed on its interim would be said again by its final
                await wait_or_sleep(self.clock, self._wake, left)
                continue
            self.apply(self.engine.tick(self.clock.now()))

    def _final_owed(self) -> float | None:
        """How much longer ticks wait for a final the recognizer still owes the quiet turn
        (None: nothing to wait for, or the wait is over). A recognizer stream of ours says
        how many flushes it has not answered (`finals_owed`); livekit's do not, and
        `final_timeout` holds."""
        owed = getattr(self.recognizer, "finals_owed", 0)
        now = self.clock.now()
        if not (isinstance(owed, int) and owed > 0 and self.engine.awaiting_final):
            self._owed_since = None
            return None
        if self._owed_since is None:
            self._owed_since = now
        left = self._owed_since + RECOGNIZER_WAIT_LIMIT - now
        # a remainder under a millisecond is over: sleeping it could round to no time at
        # all on a clock far from zero, and the loop would spin
        return left if left >= 0.001 else None

    def _vad_behind(self) -> bool:
        """Whether the caller audio pushed runs ahead of what the VAD analysed: a VAD stream
        of ours says how far it got (`analysed_seconds`), livekit's say it with every
        inference event's audio time. Ticks wait for it while it makes progress; one that
        stalls `VAD_STALL_LIMIT` seconds (or never says) holds no turn."""
        analysed = getattr(self.vad, "analysed_seconds", self._vad_heard)
        caller = self.caller
        if not isinstance(analysed, float | int) or caller is None:
            return False
        now = self.clock.now()
        if float(analysed) > self._vad_seen[0]:
            self._vad_seen = (float(analysed), now)
        stalled = now - self._vad_seen[1] > VAD_STALL_LIMIT
        return caller.seconds - float(analysed) > VAD_LAG_ALLOWED and not stalled

    def aclose(self) -> None:
        for task in list(self._tasks):
            task.cancel()

    # -- the floor ----------------------------------------------------------------------

    async def wait_for_floor(self, speech: Speech) -> None:
        """The agent's words wait while the caller holds the floor (at most `floor_wait`
        seconds); not a result: that is held instead, and offered at the next gap."""
        if speech.kind != "delivery" and not self._floor.is_set():
            await wait_or_sleep(self.clock, self._floor, self._floor_wait)

    # -- decisions ----------------------------------------------------------------------

    def apply(self, decisions: list[d.Decision]) -> None:
        """Carry out `decisions`, in order (one failing does not stop the others)."""
        for decision in decisions:
            try:
                self._decide(decision)
            except Exception:
                log.exception("room %s: could not carry out %s", self.room_id, decision)
        if self.engine.caller_has_floor:
            self._floor.clear()
        else:
            self._floor.set()
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
                    self._flush_recognizer()
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
        own = turn.text if turn.continues is None else self._own_text(turn)
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

    def _own_text(self, turn: d.CallerTurnCommitted) -> str:
        """The words of `turn` itself, without those of the turn it continues."""
        earlier = self.replies.committed.get(turn.continues or -1)
        prefix = earlier.text if earlier is not None else ""
        return turn.text[len(prefix) :].strip() if turn.text.startswith(prefix) else turn.text

    def _ask_end_of_turn(self, turn: int) -> None:
        model, caller = self._end_of_turn, self.caller
        if model is None or caller is None:
            return
        audio = caller.recent_audio()

        async def ask() -> None:
            try:
                probability = await model.completion_probability(audio)
            except Exception:
                log.exception("room %s: the end-of-turn model failed", self.room_id)
                probability = 1.0  # the VAD's end stands: a turn is never held for ever
            self.apply(self.engine.end_of_turn(turn, probability, self.clock.now()))

        task = asyncio.get_running_loop().create_task(ask())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
