"""The pipeline engine's turn state machine: pure, no asyncio, no I/O, no livekit.

`TurnEngine` is fed what happens on one call, each input stamped by the caller with `now`
(clock seconds): the VAD's start and end of caller speech, per-frame speech evidence, the
recognizer's interim and final transcripts, typed turns, the end-of-turn model's verdicts,
what the agent is saying, and `tick` when the time it asked for (`next_wake`) comes. Each
input returns the decisions it leads to (`voicehub.voice.engine.decisions`); the asyncio
driver carries them out. Nothing here reads a clock, so the same inputs always give the same
decisions.

A caller turn goes through these states:

- **speaking**: the VAD hears speech. Transcripts accumulate (finals joined, the latest
  interim kept).
- **quiet**: the VAD heard the speech end; the recognizer is asked to finalize
  (`FlushRecognizer`). The turn may still go on: speech before the commit joins it. Once
  the words are in, the turn policy (`voicehub.voice.turns.policy`) says when it is over:
  after a silence in "vad" mode; in "model" mode when the end-of-turn model says complete
  and the words do not stop mid-request ("could you research"), or at the silence ceiling.
  Meanwhile the reply may be prepared (`PrepareReply`). A recognizer that never finalizes
  holds a turn at most `final_timeout`.
- **committed** (`CallerTurnCommitted`), or **dropped** (`CallerTurnDropped`: no words).

A committed turn is never lost: every final with words ends in exactly one commit. A turn
committed while the reply to the previous one has not been heard yet (the caller paused
mid-request and went on) `continues` that turn: its text holds both, and the driver cancels
the unheard reply.

Caller sound over the agent's speech (an overlap) first pauses the agent (`PauseAgent`: at
once for a result; for a reply once the caller has been voiced for `min_interruption`,
longer than most acknowledgements, counted in speech-like frames, not in the VAD's
debounced span that runs on through its silence wait), then what it was decides
(`voicehub.voice.turns.overlap`): an acknowledgement ("uh-huh", "okay") or a noise resumes
the agent where the caller stopped hearing it (`ResumeAgent`) and is not answered; a stop
("wait", "hold on") or a real turn stops it for good (`InterruptAgent`), and only the real
turn is answered.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from voicehub.voice.engine.decisions import (
    AskEndOfTurn,
    CallerTurnCommitted,
    CallerTurnDropped,
    CallerTurnStarted,
    CallerWentQuiet,
    Decision,
    DropPreparedReply,
    FlushRecognizer,
    InterruptAgent,
    PauseAgent,
    PrepareReply,
    ResumeAgent,
)
from voicehub.voice.engine.tick_gate import (
    GateSettings,
    GateState,
    Hearing,
    HoldReason,
    HoldTick,
    gate,
)
from voicehub.voice.turns.overlap import MAX_BACKCHANNEL_SECONDS, Overlap, classify_overlap
from voicehub.voice.turns.policy import AskModel, Commit, TurnEvidence, WakeAt, decide
from voicehub.voice.turns.policy import TurnSettings as TurnPolicy
from voicehub.voice.turns.words import ends_open

__all__ = [
    "AgentSpeech",
    "CallerPhase",
    "TurnEngine",
    "TurnEngineSettings",
    "TurnPhase",
    "TurnPolicy",
]

AgentSpeech = Literal["reply", "say", "delivery"]

TurnPhase = Literal["speaking", "quiet", "committed", "dropped"]
"""A caller turn's phase (see the module docstring); committed and dropped are final."""

CallerPhase = Literal["listening", "speaking", "quiet"]
"""The engine's caller side: no turn open (`listening`), or the open turn's phase."""

_TURN_MOVES: dict[TurnPhase, frozenset[TurnPhase]] = {
    "speaking": frozenset({"speaking", "quiet", "dropped"}),  # speaking again: a new start
    "quiet": frozenset({"speaking", "committed", "dropped"}),
    "committed": frozenset(),
    "dropped": frozenset(),
}

_QUIET_VOICE_LIMIT = 2 * MAX_BACKCHANNEL_SECONDS
"""Speech the VAD holds this long over the agent is a turn, even in a voice too quiet for
the per-frame evidence to count."""


def _vad_policy() -> TurnPolicy:
    return TurnPolicy(mode="vad")


@dataclass(frozen=True, slots=True)
class TurnEngineSettings:
    """When turns end and when the caller takes the floor.

    - `policy`: when a quiet turn is over (`voicehub.voice.turns.policy.TurnSettings`:
      "vad" or "model", the silences, the ceiling).
    - `final_timeout`: how long a quiet turn waits for the recognizer's final.
    - `min_interruption`: caller voice that long (speech-like frames, while the VAD hears
      speech) over a reply pauses it: longer than most acknowledgements ("uh-huh",
      "okay"), which leave the reply playing; stop words are as short, and stop it when
      their words are known.
    - `resume_after`: a result paused by a sound that never became speech resumes after this
      much quiet.
    - `flush_finalizes`: the recognizer answers a flush with a final (livekit's
      `manual_flush`), so a quiet turn waits for that final; otherwise for a final of
      every stretch of speech (the recognizer ends its segments itself).
    - `prepare_replies`: prepare the reply while a likely-complete turn is still quiet.
    - `sure_overlap`: the recognizer's confidence below which words said over the agent
      in a voice no longer than an acknowledgement's (under 1.5 s) are taken for a
      misheard acknowledgement or noise, not a turn: a recognizer unsure of so short a
      sound has most likely made words of a hum. A recognizer that reports no confidence
      (0) is always taken at its word; stop words always stop.
    """

    policy: TurnPolicy = field(default_factory=_vad_policy)
    final_timeout: float = 2.0
    min_interruption: float = 0.6
    resume_after: float = 0.5
    flush_finalizes: bool = True
    prepare_replies: bool = True
    sure_overlap: float = 0.45

    def __post_init__(self) -> None:
        for name, value in (
            ("final_timeout", self.final_timeout),
            ("min_interruption", self.min_interruption),
            ("resume_after", self.resume_after),
            ("sure_overlap", self.sure_overlap),
        ):
            if value < 0:
                raise ValueError(f"{name} must not be negative, got {value}")

    @property
    def mode(self) -> str:
        return self.policy.mode


@dataclass(slots=True)
class _Turn:
    id: int
    phase: TurnPhase = "speaking"
    finals: list[str] = field(default_factory=list)
    interim: str = ""
    speech_ended_at: float | None = None  # end of the caller's speech (clock)
    quiet_since: float | None = None  # when the VAD said so
    awaiting_final: bool = True  # speech (or a flush) the recognizer has not finalized
    flushes_owed: int = 0  # flushes whose final has not come (one final answers each)
    final_at: float | None = None
    asked: bool = False  # the end-of-turn model was asked about this silence
    complete: float | None = None  # its answer
    wake_at: float | None = None  # when the policy wants to decide again
    prepared: str | None = None  # the text a reply was prepared for
    over_agent: _Overlap | None = None  # this turn began over the agent's speech
    stop_only: bool = False  # its words over the agent only asked it to stop
    unsettled: str = ""  # words committed as an interim the recognizer never finalized
    restates: tuple[int, str] | None = None  # (turn, words): its first final says them again
    confidence: float | None = None  # the recognizer's least, over its finals with words

    @property
    def speaking(self) -> bool:
        return self.phase == "speaking"

    def move(self, to: TurnPhase) -> None:
        """Go to phase `to` (RuntimeError: a move the turn's phases do not have)."""
        if to not in _TURN_MOVES[self.phase]:
            raise RuntimeError(f"caller turn {self.id} cannot go from {self.phase} to {to}")
        self.phase = to

    def text(self, *, with_interim: bool = False) -> str:
        words = [*self.finals, self.interim] if with_interim else self.finals
        return " ".join(w for w in words if w)


@dataclass(slots=True)
class _Overlap:
    started_at: float
    paused: bool = False
    last_voiced: float = 0.0
    voiced_seconds: float = 0.0  # speech-like caller audio since it started


@dataclass(slots=True)
class _Reply:
    turn: int
    text: str
    heard: bool = False  # its first audio went out
    used_tools: bool = False  # its tools ran: a new turn must not cancel it


class TurnEngine:
    """One call's turn-taking (see the module docstring). `words_open(text)` says whether a
    caller's words stop mid-request (a desk knows its own half requests); `words_complete(
    text)`, whether they make a whole request the desk answers (None: never)."""

    def __init__(
        self,
        settings: TurnEngineSettings | None = None,
        *,
        words_open: Callable[[str], bool] = ends_open,
        words_complete: Callable[[str], bool] | None = None,
        gate: GateSettings | None = None,
        started_at: float = 0.0,
    ) -> None:
        self.settings = settings or TurnEngineSettings()
        self._words_open = words_open
        self._words_complete = words_complete
        self._gate_settings = gate or GateSettings()
        self._gate = GateState(vad_seen_at=started_at)
        self._held: HoldTick | None = None  # the due tick waits for a provider
        self._turn: _Turn | None = None
        self._turn_ids = 0
        self._reply: _Reply | None = None
        self._unsettled: tuple[int, str] | None = None  # the last turn committed on an interim
        self._speech: AgentSpeech | None = None
        self._interruptible = False
        self._overlap: _Overlap | None = None
        self.committed = 0  # turns committed so far (for figures and tests)

    # -- reading ------------------------------------------------------------------------

    @property
    def caller_has_floor(self) -> bool:
        """Whether a caller turn is open (speaking, or quiet but not committed yet)."""
        return self._turn is not None

    @property
    def caller_phase(self) -> CallerPhase:
        """Whether a caller turn is open, and in which phase."""
        turn = self._turn
        if turn is None:
            return "listening"
        return "speaking" if turn.speaking else "quiet"

    @property
    def caller_speaking(self) -> bool:
        return self._turn is not None and self._turn.speaking

    @property
    def open_turn(self) -> int | None:
        return self._turn.id if self._turn is not None else None

    @property
    def agent_paused(self) -> bool:
        return self._overlap is not None and self._overlap.paused

    @property
    def awaiting_final(self) -> bool:
        """Whether the caller went quiet and the turn waits for the recognizer's final."""
        turn = self._turn
        return turn is not None and not turn.speaking and turn.awaiting_final

    @property
    def held(self) -> HoldTick | None:
        """Why and until when the due tick waits for a provider (None: it does not)."""
        return self._held

    def next_wake(self) -> float | None:
        """The clock time at which `tick` has something to decide (None: nothing); a tick
        held for a provider is due at the hold's end."""
        times = [t for t in (self._overlap_check_at(), self._commit_check_at()) if t is not None]
        if not times:
            return None
        due = min(times)
        held = self._held
        return due if held is None else max(due, held.until)

    def release_hold(self, reason: HoldReason) -> bool:
        """The provider a tick waits for moved on (a VAD's inference event): the tick asks
        again at once. True if it was held for `reason`."""
        held = self._held
        if held is None or held.reason != reason:
            return False
        self._held = None
        return True

    # -- caller -------------------------------------------------------------------------

    def speech_started(self, now: float) -> list[Decision]:
        """The VAD heard the caller start speaking."""
        self._held = None  # the state moved on: a held tick asks the gate again
        decisions: list[Decision] = []
        self._drop_stale_overlap(now)
        turn = self._turn
        if turn is None:
            turn = self._turn = self._new_turn()
            decisions.append(CallerTurnStarted(turn.id))
        else:  # a pause inside the turn: it goes on
            turn.move("speaking")
            turn.speech_ended_at = turn.quiet_since = turn.wake_at = None
            turn.awaiting_final = True
            turn.asked, turn.complete = False, None
            if turn.prepared is not None:
                turn.prepared = None
                decisions.append(DropPreparedReply(turn.id))
        if self._speech is not None and self._interruptible:
            overlap = self._overlap
            if overlap is None:
                overlap = self._overlap = _Overlap(started_at=now, last_voiced=now)
            if turn.over_agent is None:
                turn.over_agent = overlap
            decisions += self._pause_for_voice(overlap)
        return decisions + self.tick(now)

    def speech_ended(self, now: float, ended_at: float | None = None) -> list[Decision]:
        """The VAD heard the caller stop speaking (`ended_at`: when their speech really
        ended, before the VAD's silence wait; defaults to `now`)."""
        self._held = None  # the state moved on: a held tick asks the gate again
        turn = self._turn
        if turn is None or not turn.speaking:
            return []
        turn.move("quiet")
        turn.speech_ended_at = now if ended_at is None else min(ended_at, now)
        turn.quiet_since = now
        decisions: list[Decision] = [CallerWentQuiet(turn.id)]
        if self.settings.flush_finalizes:
            turn.awaiting_final = True
            turn.flushes_owed += 1
            decisions.append(FlushRecognizer(turn.id))
        return decisions + self._try_commit(now)

    def voiced(self, now: float, seconds: float = 0.02) -> list[Decision]:
        """`seconds` of speech-like caller audio arrived (per-frame evidence, ahead of the
        VAD): a result being spoken pauses at once; a reply once the caller has been voiced
        for `min_interruption` while the VAD hears speech."""
        if self._speech is None or not self._interruptible:
            return []
        self._drop_stale_overlap(now)
        overlap = self._overlap
        if overlap is None:
            overlap = self._overlap = _Overlap(started_at=now)
        overlap.last_voiced = now
        overlap.voiced_seconds += seconds
        if self._too_long(overlap, now):
            return self._stop_agent("caller turn")
        if overlap.paused:
            return []
        if self._speech == "delivery":
            overlap.paused = True
            return [PauseAgent("caller voice")]
        return self._pause_for_voice(overlap)

    def _too_long(self, overlap: _Overlap, now: float) -> bool:
        """Whether the caller has spoken over the agent longer than any acknowledgement:
        voiced for `MAX_BACKCHANNEL_SECONDS` (counted in speech-like frames: the VAD's span
        runs on through its silence wait, and further behind on a busy machine), or, for a
        voice too quiet to count, held by the VAD for `_QUIET_VOICE_LIMIT`."""
        if overlap.voiced_seconds + 1e-9 >= MAX_BACKCHANNEL_SECONDS and self._turn is not None:
            return True
        return self.caller_speaking and now >= overlap.started_at + _QUIET_VOICE_LIMIT

    def _drop_stale_overlap(self, now: float) -> None:
        """Forget an earlier sound over the agent that came to nothing (no turn, nothing
        paused, quiet since): the caller's next sound counts anew."""
        overlap = self._overlap
        if (
            overlap is not None
            and not overlap.paused
            and self._turn is None
            and now - overlap.last_voiced > self.settings.resume_after
        ):
            self._overlap = None

    def _pause_for_voice(self, overlap: _Overlap) -> list[Decision]:
        """Pause the reply once the caller has spoken over it long enough (see `voiced`)."""
        if overlap.paused or not self.caller_speaking or not self._voiced_enough(overlap):
            return []
        overlap.paused = True
        return [PauseAgent("caller speech")]

    def transcript(
        self, text: str, *, final: bool, now: float, confidence: float = 0.0
    ) -> list[Decision]:
        """The recognizer's interim or final transcript of the caller's speech, and its
        confidence in a final (0: not reported)."""
        self._held = None  # the state moved on: a held tick asks the gate again
        text = text.strip()
        turn = self._turn
        decisions: list[Decision] = []
        if turn is None:
            if not text:
                return []
            # words ahead of the VAD's start (an interim) or that it never heard as speech (a
            # late final): a turn of their own, settled by a final or `final_timeout`
            turn = self._turn = self._new_turn("quiet")
            turn.awaiting_final = not final
            turn.speech_ended_at = turn.quiet_since = now
            decisions.append(CallerTurnStarted(turn.id))
            if self._speech in ("reply", "say") and self._interruptible:
                # words over the agent's own speech that the VAD did not hear (yet): judged
                # as words, of the voice the caller has made over it so far (a result
                # yields only to the caller's live voice, or their turn)
                self._drop_stale_overlap(now)
                if self._overlap is None:
                    self._overlap = _Overlap(started_at=now, last_voiced=now)
                turn.over_agent = self._overlap
        if final:
            if self._unsettled is not None and turn.restates is None:
                # a recognizer's final replaces its interims: it says the words a turn
                # was committed on without one again
                turn.restates, self._unsettled = self._unsettled, None
            if text:
                turn.finals.append(text)
                if confidence > 0:
                    known = turn.confidence
                    turn.confidence = confidence if known is None else min(known, confidence)
            turn.interim = ""
            turn.final_at = now
            # a busy recognizer may answer an earlier flush after the caller spoke on and
            # went quiet again: the turn still waits for the final of the later words
            turn.flushes_owed = max(0, turn.flushes_owed - 1)
            turn.awaiting_final = turn.flushes_owed > 0
        else:
            turn.interim = text
        decisions += self._judge_overlap(turn, now, final=final)
        return decisions + self._try_commit(now)

    def typed(self, text: str, now: float) -> list[Decision]:
        """A turn typed, not said (keypad): committed at once, after any open turn."""
        self._held = None  # the state moved on: a held tick asks the gate again
        turn = self._turn
        if turn is not None and turn.text(with_interim=True):
            # what was said before the keys counts first, in the same turn
            turn.finals = [turn.text(with_interim=True), text.strip()]
            turn.interim = ""
            if turn.speaking:
                turn.move("quiet")
            turn.over_agent = None  # keys are never an acknowledgement
            if turn.speech_ended_at is None:
                turn.speech_ended_at = now
            return self._commit(turn, now)
        decisions: list[Decision] = []
        if turn is not None:
            decisions += self._drop(turn)
        turn = self._new_turn("quiet")
        turn.finals.append(text.strip())
        decisions.append(CallerTurnStarted(turn.id))
        return decisions + self._commit(turn, now, spoken=False)

    def end_of_turn(self, turn: int, probability: float, now: float) -> list[Decision]:
        """The end-of-turn model's verdict for `turn` (ignored if the turn moved on)."""
        self._held = None  # the state moved on: a held tick asks the gate again
        current = self._turn
        if current is None or current.id != turn or current.speaking:
            return []
        current.complete = probability
        return self._try_commit(now)

    def tick(self, now: float, hearing: Hearing | None = None) -> list[Decision]:
        """Time passed: pause or resume the agent, commit what is due. With `hearing` (what
        the VAD and the recognizer have done with the caller's audio) the tick first asks
        the gate (`voicehub.voice.engine.tick_gate`) and decides nothing while it holds."""
        if hearing is not None:
            self._gate, verdict = gate(
                self._gate,
                hearing,
                awaiting_final=self.awaiting_final,
                now=now,
                settings=self._gate_settings,
            )
            if isinstance(verdict, HoldTick):
                self._held = verdict
                return []
        self._held = None
        return self._check_overlap(now) + self._try_commit(now, deadline=True)

    # -- agent --------------------------------------------------------------------------

    def agent_speaking(self, kind: AgentSpeech | None, *, interruptible: bool = True) -> None:
        """What the agent starts saying now (None: nothing); nothing overlaps it yet."""
        self._overlap = None
        self._speech, self._interruptible = kind, interruptible

    def reply_started(self, turn: int, text: str) -> None:
        """The driver started the reply to committed turn `turn` (whose text is `text`)."""
        self._reply = _Reply(turn, text)

    def reply_heard(self) -> None:
        """The reply's first audio went out: a new turn no longer continues its turn."""
        if self._reply is not None:
            self._reply.heard = True

    def reply_used_tools(self) -> None:
        """The reply called tools: what they did stands, so a later turn never replaces it."""
        if self._reply is not None:
            self._reply.used_tools = True

    def reply_ended(self, turn: int) -> None:
        if self._reply is not None and self._reply.turn == turn:
            self._reply = None

    # -- overlaps -----------------------------------------------------------------------

    def _overlap_check_at(self) -> float | None:
        overlap = self._overlap
        if overlap is None:
            return None
        if self.caller_speaking:  # long enough, it is a turn (see `_too_long`)
            return overlap.started_at + _QUIET_VOICE_LIMIT
        if overlap.paused and self._turn is None:  # a sound that never became speech
            return overlap.last_voiced + self.settings.resume_after
        return None

    def _check_overlap(self, now: float) -> list[Decision]:
        overlap = self._overlap
        if overlap is None or self._speech is None:
            return []
        if self._too_long(overlap, now):
            return self._stop_agent("caller turn")
        if not overlap.paused:
            return []
        if self._turn is None and now >= overlap.last_voiced + self.settings.resume_after:
            return self._resume_agent("noise")
        return []

    def _judge_overlap(self, turn: _Turn, now: float, *, final: bool) -> list[Decision]:
        """Words heard over the agent: a stop or a turn stops it at once."""
        overlap = turn.over_agent
        if overlap is None or overlap is not self._overlap or self._speech is None:
            return []
        verdict = self._overlap_verdict(turn, overlap, now, final=final)
        if verdict.kind == "turn" and not final and not self._voiced_enough(overlap):
            # an interim of a sound as short as an acknowledgement is often wrong words
            # ("uh-huh" heard as "a hook"): its final, or more voice, decides
            return []
        if verdict.interrupts:
            turn.stop_only = verdict.kind == "stop" and _only_stop(verdict.words)
            return self._stop_agent(f"caller {verdict.kind}")
        return []

    def _overlap_verdict(
        self, turn: _Turn, overlap: _Overlap, now: float, *, final: bool
    ) -> Overlap:
        """What the caller's words over the agent are (`classify_overlap`); a final the
        recognizer is unsure of, in a voice no longer than an acknowledgement's, is taken
        for a misheard one (see `TurnEngineSettings.sure_overlap`)."""
        end = turn.speech_ended_at if turn.speech_ended_at is not None else now
        verdict = classify_overlap(
            turn.text(with_interim=True), voiced_seconds=end - overlap.started_at, final=final
        )
        unsure = turn.confidence is not None and turn.confidence < self.settings.sure_overlap
        short = overlap.voiced_seconds < MAX_BACKCHANNEL_SECONDS
        if verdict.kind == "turn" and final and unsure and short:
            return Overlap("backchannel", verdict.words)
        return verdict

    def _voiced_enough(self, overlap: _Overlap) -> bool:
        """Whether the caller has been voiced over the agent for longer than an
        acknowledgement lasts (`min_interruption`)."""
        return overlap.voiced_seconds + 1e-9 >= self.settings.min_interruption

    def _stop_agent(self, reason: str) -> list[Decision]:
        self._overlap = None
        return [InterruptAgent(reason)]

    def _resume_agent(self, reason: str) -> list[Decision]:
        overlap, self._overlap = self._overlap, None
        return [ResumeAgent(reason)] if overlap is not None and overlap.paused else []

    # -- turns --------------------------------------------------------------------------

    def _new_turn(self, phase: TurnPhase = "speaking") -> _Turn:
        self._turn_ids += 1
        return _Turn(self._turn_ids, phase)

    def _drop(self, turn: _Turn) -> list[Decision]:
        """The open turn needs no answer (no words, or an acknowledgement)."""
        turn.move("dropped")
        if self._turn is turn:
            self._turn = None
        return [CallerTurnDropped(turn.id)]

    def _commit_check_at(self) -> float | None:
        turn = self._turn
        if turn is None or turn.speaking or turn.quiet_since is None:
            return None
        if turn.awaiting_final:  # a final is an input; only the recognizer's deadline is time
            return turn.quiet_since + self.settings.final_timeout
        return turn.wake_at

    def _evidence(self, turn: _Turn) -> TurnEvidence:
        text = turn.text(with_interim=True)
        words_open = None if turn.awaiting_final else bool(text) and self._words_open(text)
        complete = self._words_complete
        return TurnEvidence(
            speech_ended_at=turn.speech_ended_at,
            words_open=words_open,
            asked=turn.asked,
            probability=turn.complete,
            words_complete=words_open is False and complete is not None and complete(text),
        )

    def _try_commit(self, now: float, *, deadline: bool = False) -> list[Decision]:
        """Commit the quiet turn if it is over. A turn still awaiting its final ends on
        `final_timeout` only in a `tick` (`deadline`): the driver holds ticks while a
        recognizer still owes the final, and an interim arriving late must not end the
        turn under it (its final would then be a turn of its own)."""
        turn = self._turn
        if turn is None or turn.speaking or turn.quiet_since is None:
            return []
        decisions: list[Decision] = []
        if turn.awaiting_final:
            if not deadline or now < turn.quiet_since + self.settings.final_timeout:
                # the words are not in yet; the model may already be asked about the sound
                decision = decide(self._evidence(turn), self.settings.policy, now)
                if isinstance(decision, AskModel):
                    turn.asked = True
                    decisions.append(AskEndOfTurn(turn.id))
                return decisions
            turn.finals = [turn.text(with_interim=True)]  # what it heard, never lost
            turn.unsettled, turn.interim = turn.interim, ""
            return self._end(turn, now)
        while True:
            decision = decide(self._evidence(turn), self.settings.policy, now)
            if isinstance(decision, AskModel):
                turn.asked = True
                decisions.append(AskEndOfTurn(turn.id))
                continue
            break
        if isinstance(decision, Commit):
            return decisions + self._end(turn, now)
        turn.wake_at = decision.time if isinstance(decision, WakeAt) else None
        if self._may_prepare(turn):
            turn.prepared = turn.text()
            decisions.append(PrepareReply(turn.id, turn.prepared))
        return decisions

    def _may_prepare(self, turn: _Turn) -> bool:
        """Prepare a reply for a settled turn whose words are not half a request, when the
        agent is not busy (no reply to stop, nothing it says the turn could be about)."""
        text = turn.text()
        return (
            self.settings.prepare_replies
            and bool(text)
            and turn.prepared != text
            and turn.over_agent is None
            and self._reply is None
            and self._speech is None
            and not self._words_open(text)
        )

    def _end(self, turn: _Turn, now: float) -> list[Decision]:
        """The quiet turn is over: commit it, or drop it (no words, or an acknowledgement
        said over the agent)."""
        text = turn.text(with_interim=True)
        overlap = turn.over_agent
        if overlap is not None and text:
            verdict = self._overlap_verdict(turn, overlap, now, final=True)
            if verdict.kind in ("backchannel", "noise"):  # listening, not asking: no answer
                resume = self._resume_agent(verdict.kind) if overlap is self._overlap else []
                return [*self._drop(turn), *resume]
            if verdict.kind == "stop" and _only_stop(verdict.words):
                turn.stop_only = True
        if turn.stop_only:
            return self._commit(turn, now, answer=False)
        if not text:
            return [*self._drop(turn), *self._resume_agent("noise")]
        return self._commit(turn, now)

    def _commit(
        self, turn: _Turn, now: float, *, spoken: bool = True, answer: bool = True
    ) -> list[Decision]:
        turn.move("committed")
        if self._turn is turn:
            self._turn = None
        text = own = turn.text(with_interim=True)
        decisions: list[Decision] = []
        continues: int | None = None
        reply = self._reply
        unsettled = turn.unsettled or (turn.interim if turn.awaiting_final else "")
        self._unsettled = (turn.id, unsettled) if unsettled else None
        if reply is not None and not reply.heard and not reply.used_tools and answer:
            earlier = reply.text
            if turn.restates is not None and turn.restates[0] == reply.turn:
                # its first final says the words that turn was committed on again
                earlier = earlier.removesuffix(turn.restates[1]).strip()
                own = own.removeprefix(turn.restates[1]).strip()
            continues, text = reply.turn, f"{earlier} {text}".strip()
        elif self._speech is not None and self._interruptible:
            decisions += self._stop_agent("caller turn")
        self.committed += 1
        decisions.append(
            CallerTurnCommitted(
                turn=turn.id,
                text=text,
                own_text=own,
                spoken=spoken,
                speech_ended_at=turn.speech_ended_at if spoken else None,
                final_at=turn.final_at,
                committed_at=now,
                continues=continues,
                answer=answer,
                prepared=turn.prepared is not None and turn.prepared == text,
            )
        )
        return decisions


def _only_stop(words: tuple[str, ...]) -> bool:
    """Whether `words` ask the agent to stop and nothing more ("wait", "hold on please")."""
    filler = {"please", "a", "sec", "second", "moment", "just", "oh", "um", "uh", "ok", "okay"}
    stops = {"stop", "wait", "hold", "on", "hang", "no", "nope", "pause", "enough", "quiet"}
    return all(word in stops or word in filler for word in words)
