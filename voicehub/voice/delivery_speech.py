"""How a pipeline session speaks background results: pre-rendered, gated, yielding at once.

`DeliverySpeaker` is the delivery side of `LiveKitVoiceSession` (the session hands it
caller audio, its injections and the first frame of every audio segment):

- **Pre-rendered** ("say" mode): while a result waits in the outbox for a gap, the delivery
  service calls `prepare`, and its speech is synthesized ahead with the agent's TTS, within
  a `PrerenderBudget` (bytes per call and per server; over budget, it is synthesized when
  spoken, as before). When it is spoken the audio is ready, so the first frame goes out as
  soon as livekit schedules the speech. A hook that rewrites the text makes the text
  spoken differ from the text rendered: the rendering is dropped and the new text
  synthesized then. "generate" mode is not pre-rendered: the words are the model's, chosen
  when spoken from the conversation as it is then (rendering a guess ahead could speak a
  stale answer); gating and yielding apply all the same.
- **Gated at the first frame**: immediately before the first audio frame of a result goes
  to the transport, the caller's per-frame speech evidence is read; a speech-like frame
  within `VOICE_HOLD` holds the result (nothing is sent, `DEFERRED`) for the next gap.
- **Yielding at once**: while a result is queued or playing, the first speech-like caller
  frame stops it: the transport's clear is sent at once, with no minimum-interruption
  delay (normal replies keep livekit's, so a backchannel does not cut the agent), and the
  result goes back to the queue (`INTERRUPTED`).
- **Offered, not failed**: a result the caller has cut off again and again comes with
  `metadata["offer"]`: the agent asks ("I have the results on heat pumps, shall I read
  them?"), the caller's next turn is taken as the answer (not answered by the model), and a
  yes reads it; anything else leaves it held (`DECLINED`).
- **Cut by the caller, not by a late transcript**: livekit's own interruption by audio
  activity is off for a result's speech (`voicehub.voice.result_barge_in`); the evidence
  above stops it at the caller's first frame, and a completed caller turn still does.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from voicehub.delivery.injector import InjectOutcome
from voicehub.delivery.policy import VOICE_HOLD
from voicehub.errors import VoicehubError
from voicehub.voice import result_barge_in
from voicehub.voice.providers import vendor_import
from voicehub.voice.speech_evidence import SpeechEvidence

with vendor_import("livekit-agents"):
    from livekit import rtc
    from livekit.agents import tts

if TYPE_CHECKING:
    from livekit.agents import AgentSession
    from livekit.agents.voice.speech_handle import SpeechHandle

    from voicehub.core.clock import Clock
    from voicehub.voice.activity import VoiceActivity

__all__ = ["DeliverySpeaker", "PrerenderBudget"]

log = logging.getLogger("voicehub.voice")

result_barge_in.install()

ANSWER_TIMEOUT = 8.0  # seconds the offer waits for the caller's answer
_YES = re.compile(r"\b(yes|yeah|yep|sure|okay|ok|please|go ahead|read|of course)\b", re.I)


class PrerenderBudget:
    """Bytes of pre-rendered result audio allowed per call and in the whole server.

    Defaults: 4 MB a call (about 90 s of 22 kHz speech), 256 MB a server. Share one object
    among the calls of a server.
    """

    def __init__(self, *, per_call: int = 4 << 20, per_server: int = 256 << 20) -> None:
        self.per_call, self.per_server = per_call, per_server
        self.used = 0

    def take(self, call_used: int, size: int) -> bool:
        """Reserve `size` bytes for a call that already holds `call_used`; False if over."""
        if call_used + size > self.per_call or self.used + size > self.per_server:
            return False
        self.used += size
        return True

    def give_back(self, size: int) -> None:
        self.used = max(0, self.used - size)


@dataclass
class _Rendering:
    text: str
    frames: list[rtc.AudioFrame] = field(default_factory=list)
    size: int = 0
    task: asyncio.Task[None] | None = None
    complete: bool = False


class DeliverySpeaker:
    """Pre-renders, gates and yields one call's results (see the module docstring)."""

    def __init__(
        self,
        session: AgentSession[None],
        activity: VoiceActivity,
        voice: Callable[[], tts.TTS[Any] | None],
        clear_output: Callable[[], None],
        clock: Clock,
        *,
        sample_rate: int,
        budget: PrerenderBudget | None = None,
    ) -> None:
        self._session, self.activity = session, activity
        self._voice, self._clear_output, self._clock = voice, clear_output, clock
        self._answer: asyncio.Future[str] | None = None
        self._asked_at = 0.0  # when the offer's question had played out
        self._evidence = SpeechEvidence(sample_rate)
        self._budget = budget if budget is not None else PrerenderBudget()
        self._renderings: dict[str, _Rendering] = {}
        self._used = 0
        self._handle: SpeechHandle | None = None
        self._audio_started = False
        self._held = False

    # -- caller audio ---------------------------------------------------------------------

    def caller_audio(self, pcm16: bytes) -> None:
        """Every caller chunk: per-frame evidence, and a result in progress yields to it."""
        if not self._evidence.voiced_frames(pcm16):
            return
        self.activity.caller_voiced()
        handle = self._handle
        if handle is not None and not handle.done() and not handle.interrupted:
            if self._audio_started:
                self._clear_output()  # the clear goes out now, ahead of livekit's own
            handle.interrupt(force=True)

    def hold_segment(self) -> bool:
        """Called at the first frame of every agent audio segment: True to cut it unsent
        (the last check before a result's first frame goes out)."""
        handle = self._handle
        if handle is None or self._audio_started or self._session.current_speech is not handle:
            return False
        if self.activity.voiced_within(VOICE_HOLD):
            self._held = True
            handle.interrupt(force=True)
            return True
        self._audio_started = True
        return False

    # -- pre-rendering --------------------------------------------------------------------

    def prepare(self, delivery_id: str, text: str) -> None:
        """Synthesize `text` ahead for `delivery_id` (a new text replaces the old)."""
        current = self._renderings.get(delivery_id)
        if current is not None and current.text == text:
            return
        self.discard(delivery_id)
        voice = self._voice()
        if voice is None:
            return
        rendering = _Rendering(text)
        rendering.task = asyncio.create_task(self._render(voice, delivery_id, rendering))
        self._renderings[delivery_id] = rendering

    def discard(self, delivery_id: str) -> None:
        """Drop what was rendered for `delivery_id`."""
        rendering = self._renderings.pop(delivery_id, None)
        if rendering is None:
            return
        if rendering.task is not None:
            rendering.task.cancel()
        self._used -= rendering.size
        self._budget.give_back(rendering.size)

    def aclose(self) -> None:
        """Drop every rendering (the call ended)."""
        for delivery_id in list(self._renderings):
            self.discard(delivery_id)

    async def _render(self, voice: tts.TTS[Any], delivery_id: str, rendering: _Rendering) -> None:
        try:
            async with voice.synthesize(rendering.text) as stream:
                async for chunk in stream:
                    size = len(chunk.frame.data) * 2
                    if not self._budget.take(self._used, size):
                        log.info(
                            "pre-render budget full: %s is synthesized when spoken", delivery_id
                        )
                        self.discard(delivery_id)
                        return
                    rendering.frames.append(chunk.frame)
                    rendering.size += size
                    self._used += size
            rendering.complete = True
        except asyncio.CancelledError:
            raise
        except Exception:  # synthesized when spoken instead
            log.exception("could not pre-render delivery %s", delivery_id)
            self.discard(delivery_id)

    async def _prerendered(self, text: str, ids: list[str]) -> list[rtc.AudioFrame] | None:
        """The rendered frames of `text` (one item, or a batch joined as the service joins
        it), or None if something is missing or the text was rewritten."""
        renderings = [self._renderings.get(delivery_id) for delivery_id in ids]
        if not ids or any(r is None for r in renderings):
            return None
        frames: list[rtc.AudioFrame] = []
        texts: list[str] = []
        for rendering in renderings:
            assert rendering is not None
            if rendering.task is not None and not rendering.task.done():
                # Started long ago: nearly done. asyncio.wait, not a suppressed shield: that
                # also swallowed the cancellation of the driver itself when the call ended,
                # and the call never finished (seen under load in `voicehub soak`).
                await asyncio.wait({rendering.task})
            if not rendering.complete:
                return None
            frames += rendering.frames
            texts.append(rendering.text)
        return frames if "\n\n".join(texts) == text else None

    # -- speaking -------------------------------------------------------------------------

    def take_answer(self, text: str, *, spoken: bool = True) -> bool:
        """A caller turn: True if it answers an offer (so the model must not reply).

        A spoken turn answers only if the caller's voice was heard after the question had
        played out: a turn finished late (a slow recognizer) may hold words said before it,
        which answer nothing. Typed turns (keys pressed) have no voice to check."""
        answer = self._answer
        if answer is None or answer.done():
            return False
        if spoken:
            voiced_at = self.activity.caller_voiced_at
            if voiced_at is None or voiced_at < self._asked_at:
                log.info("a caller turn of earlier audio is not the answer to the offer")
                return False
        answer.set_result(text)
        return True

    async def offer(self, metadata: dict[str, Any]) -> InjectOutcome | None:
        """Ask whether to read the result now: None on a yes within `ANSWER_TIMEOUT`, else
        the outcome (DECLINED, or the offer's own when it was cut or held)."""
        task = metadata.get("task")
        line = (
            f"I have the results on {task}, shall I read them?"
            if isinstance(task, str) and task
            else "I have the research results, shall I read them?"
        )
        asked = await self.follow(self._session.say(line))
        if asked is not InjectOutcome.FINISHED:
            return asked
        self._answer = answer = asyncio.get_running_loop().create_future()
        self._asked_at = self._clock.now()
        timeout = asyncio.ensure_future(self._clock.sleep(ANSWER_TIMEOUT))
        try:
            await asyncio.wait({answer, timeout}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            timeout.cancel()
            self._answer = None
        if answer.done() and _YES.search(answer.result()):
            return None
        return InjectOutcome.DECLINED

    async def speak(self, text: str, metadata: dict[str, Any]) -> InjectOutcome:
        """Say a result verbatim, pre-rendered when possible; see `InjectOutcome`. With
        `metadata["offer"]`, ask first."""
        if metadata.get("offer") and (refused := await self.offer(metadata)) is not None:
            return refused
        ids = [str(i) for i in metadata.get("delivery_ids", [])]
        frames = await self._prerendered(text, ids)
        if frames is None:  # a hook rewrote it: the rendering is stale, synthesize now
            for delivery_id in ids:
                self.discard(delivery_id)
            return await self.follow(self._session.say(text))
        outcome = await self.follow(self._session.say(text, audio=_replay(frames)))
        if outcome is InjectOutcome.FINISHED:
            for delivery_id in ids:
                self.discard(delivery_id)
        return outcome  # otherwise kept: re-offered at the next gap, ready at once

    async def follow(self, handle: SpeechHandle) -> InjectOutcome:
        """Watch a result's speech to its end: gated, yielding, or finished."""
        self._handle, self._audio_started, self._held = handle, False, False
        result_barge_in.yields_only_to_the_caller(handle)
        try:
            await handle
        finally:
            self._handle = None
        if self._held:
            return InjectOutcome.DEFERRED
        if handle.interrupted:
            return InjectOutcome.INTERRUPTED
        error = handle.exception()
        if error is not None:
            raise VoicehubError(f"speech of a result failed: {error}") from error
        return InjectOutcome.FINISHED


async def _replay(frames: list[rtc.AudioFrame]) -> AsyncIterator[rtc.AudioFrame]:
    for frame in frames:
        yield frame
