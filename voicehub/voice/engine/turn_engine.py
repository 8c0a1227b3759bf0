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
  (`FlushRecognizer`). The turn may still go on: speech before the commit joins it.
- **committed** (`CallerTurnCommitted`) once the caller has been quiet long enough and the
  recognizer has answered the flush with a final: after `endpointing_delay` in "vad" mode;
  in "model" mode as soon as the end-of-turn model says the utterance is complete, or after
  `max_turn_silence` of silence when it says it is not. A recognizer that never answers
  the flush holds the turn at most `final_timeout`; then what it heard is committed.
- **dropped** (`CallerTurnDropped`): quiet, settled, and no words (noise, a cough).

A committed turn is never lost: every final with words ends in exactly one commit. A turn
committed while the reply to the previous one has not been heard yet (the caller paused
mid-request and went on) `continues` that turn: its text holds both, and the driver cancels
the unheard reply.

Interruptions: caller speech that lasts `min_interruption` seconds, a transcript with words,
or a committed turn stop the agent's interruptible speech (`InterruptAgent`); a result being
spoken yields at the caller's first voiced frame (`YieldDelivery`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from voicehub.voice.engine.decisions import (
    AskEndOfTurn,
    CallerTurnCommitted,
    CallerTurnDropped,
    CallerTurnStarted,
    CallerWentQuiet,
    Decision,
    FlushRecognizer,
    InterruptAgent,
    YieldDelivery,
)

__all__ = ["AgentSpeech", "TurnEngine", "TurnSettings"]

TurnMode = Literal["vad", "model"]
AgentSpeech = Literal["reply", "say", "delivery"]


@dataclass(frozen=True, slots=True)
class TurnSettings:
    """When turns end and when the caller takes the floor.

    - `mode`: "vad" commits after `endpointing_delay` of quiet; "model" asks the end-of-turn
      model at the speech end and commits at once when it says complete, else after
      `max_turn_silence` of silence (measured from the end of the caller's speech).
    - `model_threshold`: the probability from which the model's verdict is "complete".
    - `final_timeout`: how long a quiet turn waits for the recognizer's final.
    - `flush_finalizes`: the recognizer answers a flush with a final (livekit's
      `manual_flush`), so a quiet turn waits for that final; otherwise for a final of
      every stretch of speech (the recognizer ends its segments itself).
    - `min_interruption`: caller speech that long cuts the agent's interruptible speech.
    """

    mode: TurnMode = "vad"
    endpointing_delay: float = 0.3
    max_turn_silence: float = 2.0
    model_threshold: float = 0.5
    final_timeout: float = 2.0
    min_interruption: float = 0.3
    flush_finalizes: bool = True

    def __post_init__(self) -> None:
        if self.mode not in ("vad", "model"):
            raise ValueError(f"turn mode {self.mode!r}: expected 'vad' or 'model'")
        for name in ("endpointing_delay", "max_turn_silence", "final_timeout", "min_interruption"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must not be negative, got {getattr(self, name)}")
        if not 0.0 <= self.model_threshold <= 1.0:
            raise ValueError(f"model_threshold must be in [0, 1], got {self.model_threshold}")


@dataclass(slots=True)
class _Turn:
    id: int
    finals: list[str] = field(default_factory=list)
    interim: str = ""
    speaking: bool = True
    speech_ended_at: float | None = None  # end of the caller's speech (clock)
    quiet_since: float | None = None  # when the VAD said so
    awaiting_final: bool = True  # speech (or a flush) the recognizer has not finalized
    final_at: float | None = None
    complete: float | None = None  # the end-of-turn model's probability, once asked

    def text(self, *, with_interim: bool = False) -> str:
        words = [*self.finals, self.interim] if with_interim else self.finals
        return " ".join(w for w in words if w)


@dataclass(slots=True)
class _Reply:
    turn: int
    text: str
    heard: bool = False  # its first audio went out
    used_tools: bool = False  # its tools ran: a new turn must not cancel it


class TurnEngine:
    """One call's turn-taking (see the module docstring)."""

    def __init__(self, settings: TurnSettings | None = None) -> None:
        self.settings = settings or TurnSettings()
        self._turn: _Turn | None = None
        self._turn_ids = 0
        self._reply: _Reply | None = None
        self._speech: AgentSpeech | None = None
        self._interruptible = False
        self._interrupt_at: float | None = None  # caller speech long enough by then
        self.committed = 0  # turns committed so far (for figures and tests)

    # -- reading ------------------------------------------------------------------------

    @property
    def caller_has_floor(self) -> bool:
        """Whether a caller turn is open (speaking, or quiet but not committed yet)."""
        return self._turn is not None

    @property
    def caller_speaking(self) -> bool:
        return self._turn is not None and self._turn.speaking

    @property
    def open_turn(self) -> int | None:
        return self._turn.id if self._turn is not None else None

    def next_wake(self) -> float | None:
        """The clock time at which `tick` has something to decide (None: nothing)."""
        times = [t for t in (self._interrupt_at, self._commit_check_at()) if t is not None]
        return min(times) if times else None

    # -- caller -------------------------------------------------------------------------

    def speech_started(self, now: float) -> list[Decision]:
        """The VAD heard the caller start speaking."""
        decisions: list[Decision] = []
        turn = self._turn
        if turn is None:
            turn = self._turn = self._new_turn()
            decisions.append(CallerTurnStarted(turn.id))
        else:  # a pause inside the turn: it goes on
            turn.speaking = True
            turn.speech_ended_at = turn.quiet_since = None
            turn.awaiting_final = True
            turn.complete = None
        if self._speech in ("reply", "say") and self._interruptible:
            self._interrupt_at = now + self.settings.min_interruption
            if self.settings.min_interruption == 0:
                decisions += self.tick(now)
        return decisions

    def speech_ended(self, now: float, ended_at: float | None = None) -> list[Decision]:
        """The VAD heard the caller stop speaking (`ended_at`: when their speech really
        ended, before the VAD's silence wait; defaults to `now`)."""
        turn = self._turn
        self._interrupt_at = None
        if turn is None or not turn.speaking:
            return []
        turn.speaking = False
        turn.speech_ended_at = now if ended_at is None else min(ended_at, now)
        turn.quiet_since = now
        decisions: list[Decision] = [CallerWentQuiet(turn.id)]
        if self.settings.flush_finalizes:
            turn.awaiting_final = True
            decisions.append(FlushRecognizer(turn.id))
        if self.settings.mode == "model":
            decisions.append(AskEndOfTurn(turn.id))
        return decisions + self._try_commit(now)

    def voiced(self, now: float) -> list[Decision]:
        """A speech-like caller frame arrived (per-frame evidence, ahead of the VAD)."""
        return [YieldDelivery()] if self._speech == "delivery" else []

    def transcript(self, text: str, *, final: bool, now: float) -> list[Decision]:
        """The recognizer's interim or final transcript of the caller's speech."""
        text = text.strip()
        turn = self._turn
        if turn is None:
            if not text:
                return []
            # words ahead of the VAD's start (an interim) or that it never heard as speech (a
            # late final): a turn of their own, settled by a final or `final_timeout`
            turn = self._turn = self._new_turn()
            turn.speaking = False
            turn.awaiting_final = not final
            turn.speech_ended_at = turn.quiet_since = now
            decisions: list[Decision] = [CallerTurnStarted(turn.id)]
        else:
            decisions = []
        if final:
            if text:
                turn.finals.append(text)
            turn.interim = ""
            turn.final_at = now
            turn.awaiting_final = False
        else:
            turn.interim = text
        if text and self._speech in ("reply", "say") and self._interruptible and final:
            decisions.append(InterruptAgent("caller words"))
            self._interrupt_at = None
        return decisions + self._try_commit(now)

    def typed(self, text: str, now: float) -> list[Decision]:
        """A turn typed, not said (keypad): committed at once, after any open turn."""
        turn = self._turn
        if turn is not None and turn.text(with_interim=True):
            # what was said before the keys counts first, in the same turn
            turn.finals = [turn.text(with_interim=True), text.strip()]
            turn.interim = ""
            turn.speaking = False
            if turn.speech_ended_at is None:
                turn.speech_ended_at = now
            return self._commit(turn, now)
        decisions: list[Decision] = []
        if turn is not None:
            self._turn = None
            decisions.append(CallerTurnDropped(turn.id))
        turn = self._new_turn()
        turn.finals.append(text.strip())
        turn.speaking = False
        decisions.append(CallerTurnStarted(turn.id))
        return decisions + self._commit(turn, now, spoken=False)

    def end_of_turn(self, turn: int, probability: float, now: float) -> list[Decision]:
        """The end-of-turn model's verdict for `turn` (ignored if the turn moved on)."""
        current = self._turn
        if current is None or current.id != turn or current.speaking:
            return []
        current.complete = probability
        return self._try_commit(now)

    def tick(self, now: float) -> list[Decision]:
        """Time passed: commit what is due, interrupt the agent if the caller held on."""
        decisions: list[Decision] = []
        if self._interrupt_at is not None and now >= self._interrupt_at:
            self._interrupt_at = None
            if self.caller_speaking and self._speech in ("reply", "say") and self._interruptible:
                decisions.append(InterruptAgent("caller speech"))
        return decisions + self._try_commit(now)

    # -- agent --------------------------------------------------------------------------

    def agent_speaking(self, kind: AgentSpeech | None, *, interruptible: bool = True) -> None:
        """What the agent is saying now (None: nothing)."""
        self._speech, self._interruptible = kind, interruptible
        if kind is None:
            self._interrupt_at = None

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

    # -- internals ----------------------------------------------------------------------

    def _new_turn(self) -> _Turn:
        self._turn_ids += 1
        return _Turn(self._turn_ids)

    def _commit_check_at(self) -> float | None:
        turn = self._turn
        if turn is None or turn.speaking or turn.quiet_since is None:
            return None
        if turn.awaiting_final:  # a final is an input; only the recognizer's deadline is time
            return turn.quiet_since + self.settings.final_timeout
        return self._ready_at(turn)

    def _ready_at(self, turn: _Turn) -> float | None:
        """When the quiet turn may commit once the recognizer settled."""
        assert turn.quiet_since is not None
        s = self.settings
        if s.mode == "vad":
            return turn.quiet_since + s.endpointing_delay
        if turn.complete is not None and turn.complete >= s.model_threshold:
            return turn.quiet_since
        ended = turn.speech_ended_at if turn.speech_ended_at is not None else turn.quiet_since
        return max(turn.quiet_since, ended + s.max_turn_silence)

    def _try_commit(self, now: float) -> list[Decision]:
        turn = self._turn
        if turn is None or turn.speaking or turn.quiet_since is None:
            return []
        timed_out = now >= turn.quiet_since + self.settings.final_timeout
        if not turn.awaiting_final:
            ready = self._ready_at(turn)
            if ready is None or now < ready:
                return []
            if not turn.finals:
                self._turn = None
                return [CallerTurnDropped(turn.id)]
            return self._commit(turn, now)
        if not timed_out:
            return []
        if not turn.text(with_interim=True):
            self._turn = None
            return [CallerTurnDropped(turn.id)]
        turn.finals = [turn.text(with_interim=True)]
        turn.interim = ""
        return self._commit(turn, now)

    def _commit(self, turn: _Turn, now: float, *, spoken: bool = True) -> list[Decision]:
        if self._turn is turn:
            self._turn = None
        text = turn.text(with_interim=True)
        decisions: list[Decision] = []
        continues: int | None = None
        reply = self._reply
        if reply is not None and not reply.heard and not reply.used_tools:
            continues, text = reply.turn, f"{reply.text} {text}".strip()
        elif self._speech in ("reply", "say") and self._interruptible:
            decisions.append(InterruptAgent("caller turn"))
        elif self._speech == "delivery":
            decisions.append(YieldDelivery())
        self._interrupt_at = None
        self.committed += 1
        decisions.append(
            CallerTurnCommitted(
                turn=turn.id,
                text=text,
                spoken=spoken,
                speech_ended_at=turn.speech_ended_at if spoken else None,
                final_at=turn.final_at,
                committed_at=now,
                continues=continues,
            )
        )
        return decisions
