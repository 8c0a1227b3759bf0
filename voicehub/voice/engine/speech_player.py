"""Agent speech to the transport, one speech at a time, with playout marks.

`SpeechPlayer` plays queued `Speech`es in order. Right before a speech's first frame goes
out the session may still make it wait (the caller has the floor) or hold it (a result whose
caller just spoke: `SpeechHooks`); before that, what a call plays besides speech (its
sounds) is ended (`before_speech`). After its last frame the player asks the transport for a
mark and the speech ends only when the transport confirms it (`confirm`): a speech is
"played" once the caller heard it, not once its audio was handed over.

`pause` stops the speech playing now (the transport's buffer is cleared) and keeps its place:
what the caller heard, estimated from the audio sent and the time since the stretch began.
`resume` plays it on from a little before that place, as a new stretch with its own mark.
`interrupt` ends it (playing or paused) as interrupted.

A voice that sends nothing for `voice_stall_limit` seconds (its next chunk, or its first)
fails the speech it is saying, as a voice that raises does: a hung synthesis would otherwise
hold the call's speech, and every result queued behind it, for good.

It keeps `VoiceActivity` in step (each stretch is a speech there: started at its first frame,
finished after its last or at a pause, played at its confirmation) and counts queued speeches
as queued replies. Transport calls (audio, marks, clears) are made one at a time, in order.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from voicehub.core.jobs import TaskSet
from voicehub.voice.engine.speech import Speech, SpeechEnd

if TYPE_CHECKING:
    from voicehub.core.clock import Clock
    from voicehub.voice.activity import VoiceActivity
    from voicehub.voice.transport import CallTransport

__all__ = ["REPLAY_BEFORE", "VOICE_STALL_LIMIT", "SpeechHooks", "SpeechPlayer", "VoiceStalled"]

log = logging.getLogger("voicehub.voice")

REPLAY_BEFORE = 0.3  # a resumed speech starts this much before the caller stopped hearing it
# seconds a voice may send nothing before its speech fails: as long as the engine waits for
# a recognizer that owes a final, and far past any synthesis's first audio
VOICE_STALL_LIMIT = 15.0


class VoiceStalled(Exception):
    """The voice sent no audio for the speech for `voice_stall_limit` seconds."""


def _never_hold(speech: Speech) -> bool:
    return False


def _nothing(speech: Speech) -> None:
    return None


async def _go(speech: Speech) -> None:
    return None


@dataclass(slots=True)
class SpeechHooks:
    """What the session decides around each speech.

    - `wait(speech)`: awaited right before its first frame (the caller has the floor).
    - `hold(speech)`: right before its first frame; True holds it (nothing is sent).
    - `started(speech)`: its first frame went out.
    - `ended(speech)`: it ended, however (see `speech.end`).
    """

    wait: Callable[[Speech], Awaitable[None]] = _go
    hold: Callable[[Speech], bool] = _never_hold
    started: Callable[[Speech], None] = _nothing
    ended: Callable[[Speech], None] = _nothing


class SpeechPlayer:
    """Plays one call's speeches (see the module docstring)."""

    def __init__(
        self,
        transport: CallTransport,
        activity: VoiceActivity,
        clock: Clock,
        hooks: SpeechHooks | None = None,
        voice_stall_limit: float = VOICE_STALL_LIMIT,
    ) -> None:
        self._transport, self._activity, self._clock = transport, activity, clock
        self._stall_limit = voice_stall_limit
        self.hooks = hooks or SpeechHooks()
        self._rate = transport.sample_rate
        self._queue: deque[Speech] = deque()
        self._wake = asyncio.Event()
        self._io = asyncio.Lock()  # audio, marks and clears go out in order
        self.current: Speech | None = None
        self._worker: asyncio.Task[None] | None = None
        self._watch: asyncio.Task[None] | None = None
        self._controls = TaskSet("the call's speech controls")
        self._closed = False
        self._before: list[Callable[[], Awaitable[None]]] = []
        self._voice_wait: tuple[Speech, float] | None = None  # awaiting the voice since
        self._voice_waiting = asyncio.Event()
        self._stalled: Speech | None = None  # cancelled for its voice's silence

    def before_speech(self, step: Callable[[], Awaitable[None]]) -> None:
        """Await `step` right before each speech's first frame, ahead of the `wait` hook:
        a sound the call plays ends there, so no frame of it follows the agent's first."""
        self._before.append(step)

    # -- control ------------------------------------------------------------------------

    def start(self) -> None:
        if self._worker is None:
            self._worker = asyncio.create_task(self._run(), name="voicehub-speech-player")
            self._watch = asyncio.create_task(self._watch_voice(), name="voicehub-voice-watch")

    def play(self, speech: Speech) -> Speech:
        """Queue `speech` behind the others; returns it (await `speech.wait()`)."""
        if self._closed:
            speech.finish(SpeechEnd.INTERRUPTED)
            return speech
        self._queue.append(speech)
        self._activity.reply_queued()
        self._wake.set()
        return speech

    @property
    def queued(self) -> tuple[Speech, ...]:
        return tuple(self._queue)

    def cancel(self, speech: Speech) -> None:
        """End `speech` at once: cut if playing, dropped if still queued."""
        if speech is self.current:
            self.interrupt(force=True)
        elif speech in self._queue:
            self._queue.remove(speech)
            self._activity.reply_dequeued()
            self._settle(speech, SpeechEnd.INTERRUPTED)

    def interrupt(self, *, force: bool = False, kinds: tuple[str, ...] = ()) -> Speech | None:
        """End the speech playing (or paused) now if it is interruptible (or `force`), and
        of one of `kinds` when given; returns it, or None when nothing was cut."""
        speech = self.current
        if speech is None or speech.done or not (speech.interruptible or force):
            return None
        if kinds and speech.kind not in kinds:
            return None
        if speech.audio_started_at is not None:
            if speech.paused:
                speech.heard_seconds = speech.segment_from
            else:
                speech.heard_seconds = speech.heard_until(self._clock.now())
                self._activity.agent_speech_finished(speech.mark_id, interrupted=True)
                self._send(self._transport.clear)
        self._settle(speech, SpeechEnd.INTERRUPTED)
        return speech

    def pause(self) -> Speech | None:
        """Stop the speech playing now, keeping its place (see the module); returns it."""
        speech = self.current
        if speech is None or speech.done or speech.paused or not speech.interruptible:
            return None
        speech.set_paused(True)
        if speech.audio_started_at is not None:
            speech.segment_from = speech.heard_until(self._clock.now())
            speech.segment_started_at = None
            self._activity.agent_speech_finished(speech.mark_id, interrupted=True)
            self._send(self._transport.clear)
        return speech

    def resume(self) -> Speech | None:
        """Play the paused speech on (see the module); returns it."""
        speech = self.current
        if speech is None or speech.done or not speech.paused:
            return None
        speech.set_paused(False)
        return speech

    def confirm(self, mark_id: str) -> None:
        """The transport played everything up to mark `mark_id`. Ignored unless it is the
        mark sent after the last frame of the stretch now playing: an ack of another id,
        or of this id before its mark went out (a client's early or stale ack), does not
        say the caller heard the speech to its end."""
        speech = self.current
        if speech is None or speech.mark_id != mark_id or speech.done or speech.paused:
            return
        if not speech.marked:
            log.info("speech %s: an ack before its mark went out is ignored", mark_id)
            return
        self._activity.playout_confirmed(speech.mark_id)
        speech.heard_seconds = speech.seconds_sent
        self._settle(speech, SpeechEnd.PLAYED)

    async def aclose(self) -> None:
        """Drop everything queued, cut what plays, stop the worker; idempotent."""
        self._closed = True
        while self._queue:
            speech = self._queue.popleft()
            self._activity.reply_dequeued()
            self._settle(speech, SpeechEnd.INTERRUPTED)
        self.interrupt(force=True)
        for task in (self._watch, self._worker):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        async with self._io:  # the last clear or mark is out
            pass

    # -- the worker ---------------------------------------------------------------------

    async def _run(self) -> None:
        while True:
            while not self._queue:
                self._wake.clear()
                await self._wake.wait()
            speech = self._queue.popleft()
            self._activity.reply_dequeued()
            if speech.done:
                continue
            self.current = speech
            try:
                await self._play(speech)
            except asyncio.CancelledError:
                task = asyncio.current_task()
                if self._stalled is not speech or task is None or task.uncancel() > 0:
                    self._settle(speech, SpeechEnd.INTERRUPTED)
                    raise
                stalled = VoiceStalled(f"the voice sent no audio for {self._stall_limit:g} s")
                log.warning("speech %s failed: %s", speech.id, stalled)
                self._failed(speech, stalled)
            except Exception as error:
                log.exception("speech %s failed", speech.id)
                self._failed(speech, error)
            finally:
                self._stalled = None
                self.current = None
                with contextlib.suppress(Exception):
                    await speech.audio.aclose()  # type: ignore[attr-defined]

    def _failed(self, speech: Speech, error: BaseException) -> None:
        if speech.audio_started_at is not None and not speech.done and not speech.paused:
            self._activity.agent_speech_finished(speech.mark_id, interrupted=True)
            self._send(self._transport.clear)
        self._settle(speech, SpeechEnd.FAILED, error)

    async def _watch_voice(self) -> None:
        """Cancel the speech whose voice has sent nothing for the stall limit (see the
        module); it sleeps only while a speech waits for its voice."""
        while True:
            wait = self._voice_wait
            if wait is None:
                self._voice_waiting.clear()
                await self._voice_waiting.wait()
                continue
            speech, since = wait
            left = since + self._stall_limit - self._clock.now()
            if left > 0:
                await self._clock.sleep(left)
                continue
            self._voice_wait, self._stalled = None, speech
            if self._worker is not None:
                self._worker.cancel()  # it waits in the voice's next chunk: see _run

    async def _next_chunk(self, speech: Speech, audio: AsyncIterator[bytes]) -> bytes | None:
        """The voice's next chunk for `speech`, None at its end (watched for stalls)."""
        self._voice_wait = (speech, self._clock.now())
        self._voice_waiting.set()
        try:
            return await anext(audio)
        except StopAsyncIteration:
            return None
        finally:
            self._voice_wait = None

    async def _play(self, speech: Speech) -> None:
        audio = aiter(speech.audio)
        while (chunk := await self._next_chunk(speech, audio)) is not None:
            if speech.done:
                return
            if not chunk:
                continue
            if speech.audio_started_at is None:
                for step in self._before:
                    await step()
                await self.hooks.wait(speech)
                if speech.done:
                    return
                if self.hooks.hold(speech):
                    self._settle(speech, SpeechEnd.HELD)
                    return
                speech.audio_started_at = self._clock.now()
                self._new_segment(speech, 0.0)
                self.hooks.started(speech)
            speech.pcm += chunk
            speech.seconds_sent += len(chunk) / 2 / self._rate
            if speech.paused:
                continue  # kept: a resume plays it
            if not await self._send_audio(speech, chunk):
                return
        if speech.audio_started_at is None:  # no audio at all: nothing to hear
            if not speech.done:
                self._settle(speech, SpeechEnd.PLAYED)
            return
        while not speech.done:
            if speech.paused:
                await speech.until(paused=False)
                if speech.done:
                    return
                await self._replay(speech)
                continue
            self._activity.agent_speech_finished(speech.mark_id, interrupted=False)
            speech.marked = True
            self._send(self._transport.mark, speech.mark_id)
            await speech.until(paused=True)  # the mark's confirmation ends it, or a pause

    async def _replay(self, speech: Speech) -> None:
        """Play a resumed speech from a little before where the caller stopped hearing it."""
        start = max(0.0, speech.segment_from - REPLAY_BEFORE)
        offset = int(start * self._rate) * 2
        self._new_segment(speech, start)
        await self._send_audio(speech, bytes(speech.pcm[offset:]))

    def _new_segment(self, speech: Speech, start: float) -> None:
        speech.segment += 1
        speech.marked = False
        speech.segment_from = start
        speech.segment_started_at = self._clock.now()
        self._activity.agent_speech_started(speech.mark_id)

    async def _send_audio(self, speech: Speech, pcm: bytes) -> bool:
        """Send `pcm` unless the speech ended or paused meanwhile; False when it ended."""
        async with self._io:
            if speech.done:
                return False
            if not speech.paused and pcm:
                await self._transport.send_audio(pcm)
        return True

    # -- internals ----------------------------------------------------------------------

    def _settle(self, speech: Speech, end: SpeechEnd, error: BaseException | None = None) -> None:
        if speech.done:
            return
        speech.finish(end, error)
        try:
            self.hooks.ended(speech)
        except Exception:
            log.exception("speech %s: ended hook failed", speech.id)

    def _send(self, call: Callable[..., object], *args: str) -> None:
        """A mark or a clear, in order after the audio and controls before it."""

        async def run() -> None:
            async with self._io:
                try:
                    await call(*args)  # type: ignore[misc]
                except Exception:
                    log.exception("transport call %r failed", call)

        self._controls.start(run())
