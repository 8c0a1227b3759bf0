"""livekit-agents STT plugin for Whisper (tiny.en, offline): :class:`WhisperSTT`.

Whisper decodes whole utterances, but the stream decodes them while the caller is still
speaking, so that little is left when the turn ends. Frames pushed are cut into utterance
windows by a cheap speech gate (`speech_gate`, `utterance_window`): when the caller pauses,
the window so far is decoded on a worker thread (`decode_queue`; Whisper releases the GIL,
so the event loop is not held). When the session flushes the stream (the VAD heard the end
of speech), the final is that decoding if no speech followed it: ready, or nearly; only a
caller who spoke on after the pause waits for a decoding of the whole window. Each
decoding before the flush is also an interim transcript; with `interim_every`, the window
is also decoded while the caller speaks (off by default, for the CPU; under load the
first of the workers' work to go).

The stream (`whisper_stream`) takes every frame where it is pushed
(`InlineRecognizeStream`) and hands events straight to a sink when asked (`DirectEvents`).
Each flush is answered by exactly one final, empty when nothing was said, in the order of
the flushes.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Never

from voicehub.voice.providers import vendor_import
from voicehub.voice.providers.offline.decode_queue import Urgency
from voicehub.voice.providers.offline.inline_stt import mono_pcm16
from voicehub.voice.providers.offline.vocabulary_correction import VocabularyCorrection
from voicehub.voice.providers.offline.whisper_engine import (
    WhisperRecognizer,
    WhisperTranscript,
    shared_recognizer,
    vocabulary_prompt,
)
from voicehub.voice.providers.offline.whisper_relisten import Relisten
from voicehub.voice.providers.offline.whisper_stream import WhisperStream, final_event

with vendor_import("livekit-agents"):
    from livekit import rtc
    from livekit.agents import stt, utils
    from livekit.agents.types import (
        DEFAULT_API_CONNECT_OPTIONS,
        NOT_GIVEN,
        APIConnectOptions,
        NotGivenOr,
    )

__all__ = ["WhisperSTT", "WindowSettings", "settle_in"]


@dataclass(frozen=True, slots=True)
class WindowSettings:
    """How a stream cuts and decodes ahead (`utterance_window`): audio kept before the
    first speech (`pre_roll`) and after the last (`tail`: also the pause that starts a
    decoding), seconds of speech between interim decodings (None: no interims), and
    whether to decode before the flush at all (`decode_ahead` False: only at the flush, as
    a recognizer fed whole utterances does; for comparison)."""

    pre_roll: float = 0.3
    tail: float = 0.2
    # Off by default: a decoding per second of speech costs more CPU than the rest of the
    # utterance's decodings together; the decoding at each pause gives partials anyway.
    interim_every: float | None = None
    decode_ahead: bool = True


class WhisperSTT(stt.STT[Never]):
    """Offline streaming STT on Whisper tiny.en, biased toward `vocabulary` (a desk's
    topics and trigger phrases); with `relisten`, audio that asks the desk for nothing is
    heard a second time, slowed (`whisper_relisten`); with `correction`, spans of what it
    hears that sound like one of the desk's topics are replaced by it
    (`vocabulary_correction`). The model and its decoding threads are shared by every call
    unless `recognizer` is given."""

    def __init__(
        self,
        *,
        vocabulary: Iterable[str] = (),
        relisten: Relisten | None = None,
        correction: VocabularyCorrection | None = None,
        recognizer: WhisperRecognizer | None = None,
        window: WindowSettings | None = None,
    ) -> None:
        super().__init__(
            capabilities=stt.STTCapabilities(
                streaming=True, interim_results=True, manual_flush=True
            )
        )
        self._recognizer = recognizer or shared_recognizer()
        self._prompt = vocabulary_prompt(vocabulary)
        self._relisten = relisten
        self._correction = correction
        self.window = window or WindowSettings()

    @property
    def model(self) -> str:
        """The bundled model."""
        return "whisper-tiny.en"

    @property
    def provider(self) -> str:
        """Always ``"offline"``."""
        return "offline"

    @property
    def prompt(self) -> str:
        """The vocabulary prompt every utterance is decoded with."""
        return self._prompt

    @property
    def relisten(self) -> Relisten | None:
        """When audio is listened to a second time, if ever."""
        return self._relisten

    @property
    def correction(self) -> VocabularyCorrection | None:
        """How transcripts are corrected to the desk's topics, if they are."""
        return self._correction

    @property
    def recognizer(self) -> WhisperRecognizer:
        """The model and decoding queue this plugin uses."""
        return self._recognizer

    def prewarm(self) -> None:
        """Load and check the model now (blocking, about half a second)."""
        self._recognizer.prewarm()

    def hear(
        self, pcm16: bytes, sample_rate: int, *, final: bool = True, draft: Sequence[int] = ()
    ) -> WhisperTranscript:
        """What this plugin hears in `pcm16` (blocking): a final's decoding (with the second
        listening) or, with `final=False`, an interim's (one decoding). Whisper takes no
        `draft`."""
        return self._recognizer.recognize(
            pcm16,
            sample_rate,
            prompt=self._prompt,
            relisten=self._relisten if final else None,
            correction=self._correction,
        )

    def decode(
        self, pcm16: bytes, sample_rate: int, *, final: bool = True, draft: Sequence[int] = ()
    ) -> WhisperTranscript:
        """A decode queue job's work: `hear` (Whisper asks for no second run)."""
        return self.hear(pcm16, sample_rate, final=final, draft=draft)

    async def _recognize_impl(
        self,
        buffer: utils.AudioBuffer,
        *,
        language: NotGivenOr[str] = NOT_GIVEN,
        conn_options: APIConnectOptions,
    ) -> stt.SpeechEvent:
        frame = rtc.combine_audio_frames(buffer) if isinstance(buffer, list) else buffer
        pcm16, rate = mono_pcm16(frame), frame.sample_rate
        loop = asyncio.get_running_loop()
        future: asyncio.Future[WhisperTranscript] = loop.create_future()
        self._recognizer.queue.submit(
            future, Urgency.FINAL, lambda: self.hear(pcm16, rate), settle_in(loop, future)
        )
        heard = await future
        return final_event(uuid.uuid4().hex, heard, 0.0)

    def stream(
        self,
        *,
        language: NotGivenOr[str] = NOT_GIVEN,
        conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS,
    ) -> WhisperStream:
        """Open a streaming recognition; push frames at any rate, flush at end of speech."""
        return WhisperStream(stt=self, plugin=self, conn_options=conn_options)


def settle_in(loop: asyncio.AbstractEventLoop, future: asyncio.Future[WhisperTranscript]) -> Any:
    """A queue job's completion that settles `future` on `loop`."""

    def settle(heard: Any, error: BaseException | None) -> None:
        def apply() -> None:
            if future.done():
                return
            if error is not None:
                future.set_exception(error)
            else:
                future.set_result(heard)

        if not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop closed: nobody waits
                loop.call_soon_threadsafe(apply)

    return settle
