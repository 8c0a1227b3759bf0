"""How a pipeline call speaks background results: pre-rendered, gated, yielding at once.

`ResultSpeaker` is the delivery side of `PipelineVoiceSession`:

- **Pre-rendered** ("say" mode): while a result waits in the outbox for a gap, the delivery
  service calls `prepare`, and its speech is synthesized ahead with the agent's TTS, within a
  `PrerenderBudget` (bytes per call and per server; over budget, it is synthesized when
  spoken). A hook that rewrote the text makes the rendering stale: the new text is
  synthesized then. "generate" mode is not pre-rendered: the model words the result when it
  is spoken, from the conversation as it is then.
- **Gated at the first frame**: right before a result's first frame goes out, a caller frame
  that was speech-like within `VOICE_HOLD` holds it (nothing is sent: `DEFERRED`).
- **Yielding at once**: the caller's first speech-like frame stops a result being spoken
  (the engine's `YieldDelivery`); it goes back to the queue (`INTERRUPTED`). A late
  transcript of earlier audio does not cut it; a committed caller turn does.
- **Offered, not failed**: a result the caller cut off again and again comes with
  `metadata["offer"]`: the agent asks ("I have the results on heat pumps, shall I read
  them?"), the caller's next turn is taken as the answer (the model does not answer it), a
  yes reads it, anything else leaves it held (`DECLINED`). What counts as the answer, and
  for how long, is the pure `OfferDialogue` (`voicehub.voice.engine.offer`); this module
  only waits for it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from voicehub.core.clock import wait_or_sleep
from voicehub.delivery.injector import InjectOutcome
from voicehub.delivery.policy import VOICE_HOLD
from voicehub.errors import VoicehubError
from voicehub.voice.engine.offer import ANSWER_TIMEOUT, OfferDialogue, question
from voicehub.voice.engine.speech import Speech, SpeechEnd
from voicehub.voice.engine.speech_player import VOICE_STALL_LIMIT
from voicehub.voice.engine.tts_audio import one_text, synthesized_pcm

if TYPE_CHECKING:
    from voicehub.core.clock import Clock
    from voicehub.voice.activity import VoiceActivity

__all__ = ["ANSWER_TIMEOUT", "RENDER_STALL", "PrerenderBudget", "ResultSpeaker", "outcome_of"]

log = logging.getLogger("voicehub.voice")

# seconds a result due now waits for its pre-rendering to send more audio: a voice's stall
RENDER_STALL = VOICE_STALL_LIMIT


class PrerenderBudget:
    """Bytes of pre-rendered result audio allowed per call and in the whole server.

    Defaults: 4 MB a call (about 2 minutes of 16 kHz speech), 256 MB a server. Share one
    object among the calls of a server.
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


def outcome_of(speech_end: SpeechEnd, error: BaseException | None = None) -> InjectOutcome:
    """A speech's end as the delivery service counts it (a failure raises)."""
    if speech_end is SpeechEnd.PLAYED:
        return InjectOutcome.FINISHED
    if speech_end is SpeechEnd.HELD:
        return InjectOutcome.DEFERRED
    if speech_end is SpeechEnd.INTERRUPTED:
        return InjectOutcome.INTERRUPTED
    raise VoicehubError(f"speech failed: {error}") from error


@dataclass
class _Rendering:
    text: str
    chunks: list[bytes] = field(default_factory=list)
    size: int = 0
    task: asyncio.Task[None] | None = None
    complete: bool = False
    ended: asyncio.Event = field(default_factory=asyncio.Event)  # its task is over, however


class ResultSpeaker:
    """Pre-renders, gates, yields and offers one call's results (see the module).

    `speak_audio(text, audio)` plays a result's speech and returns how it ended; `voice()`
    is the TTS of the agent on the call.
    """

    def __init__(
        self,
        activity: VoiceActivity,
        clock: Clock,
        voice: Callable[[], Any],
        speak_audio: Callable[[str, AsyncIterator[bytes]], Awaitable[Speech]],
        *,
        sample_rate: int,
        budget: PrerenderBudget | None = None,
    ) -> None:
        self.activity, self._clock = activity, clock
        self._voice, self._speak_audio = voice, speak_audio
        self._rate = sample_rate
        self._budget = budget if budget is not None else PrerenderBudget()
        self._renderings: dict[str, _Rendering] = {}
        self._used = 0
        self._offer: OfferDialogue | None = None  # the offer waiting for the caller's answer
        self._answered = asyncio.Event()  # set when it is over early (answered, or closed)

    # -- the first frame ------------------------------------------------------------------

    def hold(self, speech: Speech) -> bool:
        """Right before a result's first frame: hold it if the caller spoke just now."""
        return speech.kind == "delivery" and self.activity.voiced_within(VOICE_HOLD)

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
        if self._offer is not None:
            self._offer.close()
            self._answered.set()

    async def _render(self, voice: Any, delivery_id: str, rendering: _Rendering) -> None:
        try:
            async for chunk in synthesized_pcm(voice, one_text(rendering.text), self._rate):
                if not self._budget.take(self._used, len(chunk)):
                    log.info("pre-render budget full: %s is synthesized when spoken", delivery_id)
                    self.discard(delivery_id)
                    return
                rendering.chunks.append(chunk)
                rendering.size += len(chunk)
                self._used += len(chunk)
            rendering.complete = True
        except asyncio.CancelledError:
            raise
        except Exception:  # synthesized when spoken instead
            log.exception("could not pre-render delivery %s", delivery_id)
            self.discard(delivery_id)
        finally:
            rendering.ended.set()

    async def _prerendered(self, text: str, ids: list[str]) -> list[bytes] | None:
        """The rendered audio of `text` (one item, or a batch joined as the service joins
        it), or None if something is missing or the text was rewritten."""
        renderings = [self._renderings.get(delivery_id) for delivery_id in ids]
        if not ids or any(r is None for r in renderings):
            return None
        chunks: list[bytes] = []
        texts: list[str] = []
        for rendering in renderings:
            assert rendering is not None
            # started long ago: nearly done, so waited for while its voice sends audio; one
            # that sent nothing for a stall's length is lost (then spoken as synthesized)
            while rendering.task is not None and not rendering.task.done():
                size = rendering.size
                await wait_or_sleep(self._clock, rendering.ended, RENDER_STALL)
                if rendering.size == size and not rendering.ended.is_set():
                    break
            if not rendering.complete:
                return None
            chunks += rendering.chunks
            texts.append(rendering.text)
        return chunks if "\n\n".join(texts) == text else None

    # -- speaking -------------------------------------------------------------------------

    @property
    def offer_waiting(self) -> OfferDialogue | None:
        """The offer whose question played out and that waits for the caller's answer."""
        offer = self._offer
        return offer if offer is not None and offer.waiting else None

    def take_answer(self, text: str, *, spoken: bool = True) -> bool:
        """A caller turn: True if it answers an offer (so the model must not reply; see
        `OfferDialogue.answer`)."""
        offer = self._offer
        if offer is None:
            return False
        verdict = offer.answer(
            text, spoken=spoken, voiced_at=self.activity.caller_voiced_at, now=self._clock.now()
        )
        if verdict == "earlier audio":
            log.info("a caller turn of earlier audio is not the answer to the offer")
        if not offer.waiting:
            self._answered.set()
        return verdict == "answer"

    async def offer(self, metadata: dict[str, Any]) -> InjectOutcome | None:
        """Ask whether to read the result now: None on a yes within `ANSWER_TIMEOUT`, else
        the outcome (DECLINED, or the offer's own when it was cut or held)."""
        asked = await self._say(question(metadata.get("task")))
        if asked is not InjectOutcome.FINISHED:
            return asked
        self._offer = offer = OfferDialogue(self._clock.now(), ANSWER_TIMEOUT)
        self._answered.clear()
        try:
            while not offer.expire(self._clock.now()):
                await wait_or_sleep(self._clock, self._answered, offer.deadline - self._clock.now())
        finally:
            offer.close()
            self._offer = None
        return None if offer.accepted else InjectOutcome.DECLINED

    async def speak(self, text: str, metadata: dict[str, Any]) -> InjectOutcome:
        """Say a result verbatim, pre-rendered when possible; see `InjectOutcome`. With
        `metadata["offer"]`, ask first."""
        if metadata.get("offer") and (refused := await self.offer(metadata)) is not None:
            return refused
        ids = [str(i) for i in metadata.get("delivery_ids", [])]
        chunks = await self._prerendered(text, ids)
        if chunks is None:  # a hook rewrote it (or nothing was rendered): synthesize now
            for delivery_id in ids:
                self.discard(delivery_id)
            return await self._say(text)
        speech = await self._speak_audio(text, _replay(chunks))
        outcome = outcome_of(speech.end or SpeechEnd.FAILED, speech.error)
        if outcome is InjectOutcome.FINISHED:
            for delivery_id in ids:
                self.discard(delivery_id)
        return outcome  # otherwise kept: offered again at the next gap, ready at once

    async def _say(self, text: str) -> InjectOutcome:
        voice = self._voice()
        speech = await self._speak_audio(text, synthesized_pcm(voice, one_text(text), self._rate))
        return outcome_of(speech.end or SpeechEnd.FAILED, speech.error)


async def _replay(chunks: list[bytes]) -> AsyncIterator[bytes]:
    for chunk in chunks:
        yield chunk
