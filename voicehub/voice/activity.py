"""Per-room conversational state (who is speaking, since when) that drives delivery.

`VoiceActivity` is fed by the voice session (user and agent turns) and by the transport
(playout confirmations). It answers one question cheaply: is the room idle, and since
when? The delivery policy reads an immutable `ActivitySnapshot`; the delivery driver
waits on `wait_for_change`.

Idle follows DESIGN.md exactly: the user is not speaking, the agent is neither speaking
nor thinking, no reply is queued, no user turn is awaiting an answer, and the transport
has confirmed playout of every agent speech (handing audio over is not enough).

Tolerance of out-of-order or duplicate events (transports and sessions are separate
sources, so reordering happens):

- Repeated events are no-ops: a second `user_speech_started`, a speech finished twice,
  a playout confirmed twice. Only real state changes bump `version`.
- `playout_confirmed` for a speech id this object does not know (never started, already
  confirmed, interrupted, or dropped by `session_detached`) is ignored.
- `playout_confirmed` that arrives before `agent_speech_finished` for the same id counts:
  the agent is still speaking until the finish event, but no further confirmation is
  awaited afterwards.
- `agent_speech_finished(..., interrupted=True)` also drops the pending confirmation: the
  session flushes the transport's buffer when it interrupts (Twilio `clear`, browser
  flush), so no audio of that speech is left to play, and a late mark for it is ignored.
- `reply_dequeued` never takes the count of queued replies below zero.
- `session_detached` resets every transient flag: with no session nothing can be speaking,
  thinking or awaiting playout, and a stale flag must not block the next session forever.
  `session_attached` starts a fresh idle period, so a reconnecting caller gets the full
  buffer before a held result is spoken.

Per-frame speech evidence (`caller_voiced`, fed for every speech-like caller frame) is kept
apart from the debounced user state: it stamps `caller_voiced_at` in the snapshot without
bumping `version` (50 wake-ups a second would help nobody). The policy reads it at each
decision; the delivery's last check before the first audio frame reads `voiced_within`.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TypeAlias

from voicehub.core.clock import Clock

__all__ = ["ActivitySnapshot", "VoiceActivity"]


@dataclass(frozen=True, slots=True)
class ActivitySnapshot:
    """An immutable view of a room's `VoiceActivity` at one `version`.

    `is_idle` is the DESIGN.md idle condition; it does not include `session_live` (a room
    with no session is idle but nothing can be spoken into it). `idle_since` is the clock
    time at which the current idle period began, or None when not idle.
    """

    user_speaking: bool
    agent_speaking: bool
    agent_thinking: bool
    reply_queued: bool
    user_turn_awaiting_answer: bool
    playout_pending: bool
    session_live: bool
    is_idle: bool
    idle_since: float | None
    version: int
    caller_voiced_at: float | None = None


# The observable state, used to tell real changes from repeated events.
_StateKey: TypeAlias = tuple[bool, bool, bool, bool, bool, bool, bool]


class VoiceActivity:
    """Conversational state of one room, stamped with an injected `Clock`.

    All methods are synchronous and cheap; call them from the event loop thread. Every
    observable change increments `version`, restamps `idle_since` on idle transitions and
    wakes the coroutines blocked in `wait_for_change`.
    """

    __slots__ = (
        "_agent_thinking",
        "_awaiting_answer",
        "_change",
        "_clock",
        "_generating",
        "_idle_since",
        "_key",
        "_replies_queued",
        "_session_live",
        "_snapshot",
        "_unplayed",
        "_user_speaking",
        "_version",
        "_voiced_at",
    )

    def __init__(self, clock: Clock, *, session_live: bool = False) -> None:
        """Start idle (since `clock.now()`), with or without a live session."""
        self._clock = clock
        self._user_speaking = False
        self._agent_thinking = False
        self._awaiting_answer = False
        self._session_live = session_live
        self._replies_queued = 0
        # Speech ids still being generated, and ids whose playout is not yet confirmed.
        self._generating: set[str] = set()
        self._unplayed: set[str] = set()
        self._idle_since: float | None = clock.now()
        self._voiced_at: float | None = None
        self._version = 0
        self._key: _StateKey = self._state_key()
        self._snapshot: ActivitySnapshot | None = None
        # Created only when someone waits, and replaced on each change (one set() wakes all).
        self._change: asyncio.Event | None = None

    # -- user -------------------------------------------------------------------------

    def user_speech_started(self) -> None:
        """The caller started speaking (VAD start of speech)."""
        self._user_speaking = True
        self._update()

    def user_speech_stopped(self) -> None:
        """The caller stopped speaking."""
        self._user_speaking = False
        self._update()

    def caller_voiced(self) -> None:
        """A speech-like caller frame arrived now (per-frame evidence, ahead of the VAD's
        debounced start of speech). Seen by the next snapshot; wakes nobody."""
        self._voiced_at = self._clock.now()
        self._snapshot = None

    def voiced_within(self, seconds: float) -> bool:
        """Whether the caller's latest speech-like frame arrived less than `seconds` ago."""
        voiced_at = self._voiced_at  # compared as the policy does: `voiced_at + seconds`
        return voiced_at is not None and self._clock.now() < voiced_at + seconds

    def user_turn_awaiting_answer(self, awaiting: bool) -> None:
        """Whether the caller's last turn still waits for the agent's answer."""
        self._awaiting_answer = awaiting
        self._update()

    # -- agent ------------------------------------------------------------------------

    def agent_thinking_started(self) -> None:
        """The agent started producing a reply (LLM running, no audio yet)."""
        self._agent_thinking = True
        self._update()

    def agent_thinking_finished(self) -> None:
        """The agent stopped thinking (it speaks next, or gave up)."""
        self._agent_thinking = False
        self._update()

    def agent_speech_started(self, speech_id: str) -> None:
        """The agent started a speech; its playout must be confirmed before idle.

        Starting an id that is already in progress is a no-op.
        """
        self._generating.add(speech_id)
        self._unplayed.add(speech_id)
        self._update()

    def agent_speech_finished(self, speech_id: str, *, interrupted: bool) -> None:
        """The speech is generated and its audio handed to the transport.

        With `interrupted=True` the speech was cut and the transport flushed, so no
        playout confirmation is awaited for it. Finishing an unknown or already finished
        id is harmless (an interrupted finish still drops a pending confirmation).
        """
        self._generating.discard(speech_id)
        if interrupted:
            self._unplayed.discard(speech_id)
        self._update()

    def playout_confirmed(self, speech_id: str) -> None:
        """The transport reports the speech's audio as really played.

        Unknown ids (never started, already confirmed or interrupted, or dropped by a
        detach) are ignored. A confirmation before `agent_speech_finished` counts.
        """
        self._unplayed.discard(speech_id)
        self._update()

    def reply_queued(self) -> None:
        """A reply was queued in the session (it will be spoken after the current one)."""
        self._replies_queued += 1
        self._update()

    def reply_dequeued(self) -> None:
        """A queued reply left the queue (started or dropped). Never goes below zero."""
        if self._replies_queued > 0:
            self._replies_queued -= 1
            self._update()

    # -- session ----------------------------------------------------------------------

    def session_attached(self) -> None:
        """A voice session is live on this room; a fresh idle period begins."""
        self._session_live = True
        self._update()

    def session_detached(self) -> None:
        """The session ended: forget every transient flag (see the module docstring)."""
        self._session_live = False
        self._user_speaking = False
        self._agent_thinking = False
        self._awaiting_answer = False
        self._replies_queued = 0
        self._generating.clear()
        self._unplayed.clear()
        self._voiced_at = None
        self._update()

    # -- reading ----------------------------------------------------------------------

    @property
    def version(self) -> int:
        """Incremented on every observable change."""
        return self._version

    @property
    def is_idle(self) -> bool:
        """The DESIGN.md idle condition (independent of `session_live`)."""
        return self._idle_since is not None

    @property
    def idle_since(self) -> float | None:
        """Clock time at which the current idle period began; None when not idle."""
        return self._idle_since

    @property
    def session_live(self) -> bool:
        """Whether a voice session is attached, so something can be spoken."""
        return self._session_live

    @property
    def caller_voiced_at(self) -> float | None:
        """Clock time of the caller's latest speech-like frame (None: none yet)."""
        return self._voiced_at

    def snapshot(self) -> ActivitySnapshot:
        """The current state as an immutable value (cached until the next change)."""
        snapshot = self._snapshot
        if snapshot is None:
            user, speaking, thinking, queued, awaiting, unplayed, live = self._key
            snapshot = ActivitySnapshot(
                user_speaking=user,
                agent_speaking=speaking,
                agent_thinking=thinking,
                reply_queued=queued,
                user_turn_awaiting_answer=awaiting,
                playout_pending=unplayed,
                session_live=live,
                is_idle=self._idle_since is not None,
                idle_since=self._idle_since,
                version=self._version,
                caller_voiced_at=self._voiced_at,
            )
            self._snapshot = snapshot
        return snapshot

    async def wait_for_change(self, after_version: int) -> ActivitySnapshot:
        """Return the latest snapshot once `version` is greater than `after_version`.

        Returns at once if a change already happened; several quick changes may be
        seen as one (the snapshot is always the newest). Cancellation is safe.
        """
        while self._version <= after_version:
            change = self._change
            if change is None:
                change = self._change = asyncio.Event()
            await change.wait()
        return self.snapshot()

    def __repr__(self) -> str:
        s = self.snapshot()
        return (
            f"VoiceActivity(version={s.version}, idle_since={s.idle_since}, "
            f"user_speaking={s.user_speaking}, agent_speaking={s.agent_speaking}, "
            f"agent_thinking={s.agent_thinking}, reply_queued={s.reply_queued}, "
            f"awaiting_answer={s.user_turn_awaiting_answer}, "
            f"playout_pending={s.playout_pending}, session_live={s.session_live})"
        )

    # -- internals --------------------------------------------------------------------

    def _state_key(self) -> _StateKey:
        return (
            self._user_speaking,
            bool(self._generating),
            self._agent_thinking,
            self._replies_queued > 0,
            self._awaiting_answer,
            bool(self._unplayed),
            self._session_live,
        )

    def _update(self) -> None:
        key = self._state_key()
        if key == self._key:
            return  # a repeated or invisible event: nothing for waiters to see
        self._key = key
        user, speaking, thinking, queued, awaiting, unplayed, _ = key
        idle = not (user or speaking or thinking or queued or awaiting or unplayed)
        # Idle after a change means a new idle period: either the room just became idle,
        # or the only thing that changed is `session_live` (attach/detach restarts it).
        self._idle_since = self._clock.now() if idle else None
        self._version += 1
        self._snapshot = None
        change = self._change
        if change is not None:
            self._change = None
            change.set()
