"""livekit-agents STT plugin for Moonshine Base English (offline): :class:`MoonshineSTT`.

The stream is the utterance stream Whisper's plugin uses (`whisper_stream`): windows cut by
the speech gate, decoded at each pause while the caller speaks (`TAIL` into it, a shorter
pause than Whisper's), the final the pause's decoding when no speech followed. Moonshine
adds drafts: each decoding of a longer window of the same utterance verifies the tokens of
the one before (`moonshine_engine`), so the final after the end of speech costs little
more than the encoder.

Moonshine cannot be primed with a desk's vocabulary as Whisper is. What priming and the
second, slowed listening do for Whisper is done here by a second opinion
(`SecondOpinion`): a final whose words ask the desk for nothing it knows about, or that
Moonshine is unsure of, is heard again by the desk's Whisper, whose hearing is kept when it
is a request where Moonshine heard none, or names one of the desk's topics where Moonshine's
request named none (`SecondOpinion.choose`). Transcripts are corrected to the desk's topics
(`vocabulary_correction`) either way.

A second opinion costs about a second of CPU (Whisper's 30 s window), five times a
Moonshine decoding. It runs on the decode queue's second lane (`Urgency.SECOND`, a thread
of its own), never on the thread that decodes the calls' finals: other calls' finals do
not wait behind it (on one thread, three calls at once had paused requests answered 2-10 s
late). The final it is for waits for it; when the lane is already behind (as many second
opinions waiting as it has threads), a doubted final keeps Moonshine's hearing instead of
waiting seconds more (`MoonshineSTT.second_opinions_skipped` counts them).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Never

from voicehub.voice.providers import vendor_import
from voicehub.voice.providers.offline.decode_queue import Then, Urgency
from voicehub.voice.providers.offline.inline_stt import mono_pcm16
from voicehub.voice.providers.offline.moonshine_engine import MoonshineRecognizer
from voicehub.voice.providers.offline.vocabulary_correction import VocabularyCorrection
from voicehub.voice.providers.offline.whisper_engine import WhisperTranscript
from voicehub.voice.providers.offline.whisper_relisten import Relisten, names_topic
from voicehub.voice.providers.offline.whisper_stream import WhisperStream, final_event
from voicehub.voice.providers.offline.whisper_stt import WhisperSTT, WindowSettings, settle_in

with vendor_import("livekit-agents"):
    from livekit import rtc
    from livekit.agents import stt, utils
    from livekit.agents.types import (
        DEFAULT_API_CONNECT_OPTIONS,
        NOT_GIVEN,
        APIConnectOptions,
        NotGivenOr,
    )

__all__ = ["DOUBTFUL_BELOW", "TAIL", "MoonshineSTT", "SecondOpinion", "built_shared_moonshine"]

log = logging.getLogger("voicehub.voice.stt")

TAIL = 0.04
"""The window's `tail` for Moonshine (`WindowSettings`): the gate's silence after which a
pause is decoded, and the audio kept after the gate's last speech. The speech gate holds
about 0.16 s of silence after the last word as speech (WebRTC's hangover), so the decoding
starts about 0.2 s after the caller's last word, on a window holding that much silence,
before the VAD's end of speech (about 0.3 s): the final is the pause's decoding, ready or
nearly when the turn ends. Whisper keeps 0.2 s: its decoding, not its start, is what a
caller waits for."""

DOUBTFUL_BELOW = 0.5
"""A Moonshine final below this confidence (the mean token probability) is heard again by
the second opinion whatever its words."""


@dataclass(frozen=True, slots=True)
class SecondOpinion:
    """Who hears a final again (`whisper`, the desk's, primed and relistening) and when:
    Moonshine's confidence under `below`, or words that `relisten` would listen to again
    (no request, or one about none of the desk's topics)."""

    whisper: WhisperSTT
    relisten: Relisten | None = None
    below: float = DOUBTFUL_BELOW

    def doubts(self, heard: WhisperTranscript) -> bool:
        """Whether Moonshine's `heard` is heard again."""
        if heard.confidence < self.below:
            return True
        return self.relisten is not None and self.relisten.listens_again(heard.text)

    def choose(self, first: WhisperTranscript, second: WhisperTranscript) -> WhisperTranscript:
        """Which of Moonshine's `first` hearing and Whisper's `second` is kept: Whisper's when
        it is a request and Moonshine's is none, or a request about one of the desk's topics
        where Moonshine's names none of them, or when it names a topic where Moonshine's
        words, no request, name none (the end of a request cut off by a pause); Whisper's
        when Moonshine was unsure; else Moonshine's. (Whisper's own hearing is believed as
        a desk on Whisper alone believes it, its false triggers included.)"""
        relisten = self.relisten
        if relisten is not None and second.text:
            if relisten.is_request(second.text) and not relisten.is_request(first.text):
                return second
            if relisten.believes(second.text) and relisten.listens_again(first.text):
                return second
            if (
                not relisten.is_request(first.text)
                and names_topic(second.text, relisten.topics)
                and not names_topic(first.text, relisten.topics)
            ):
                # a request's end that a pause cut off asks for nothing alone ("heat pumps
                # for me please", after "could you research"): the turn joins it, so the
                # hearing that names the desk's topic is the one to join
                return second
        if first.confidence < self.below and second.text:
            return second
        return first


class MoonshineSTT(stt.STT[Never]):
    """Offline streaming STT on Moonshine Base English; with `second_opinion`, doubtful
    finals are heard again by Whisper (see the module); with `correction`, spans that sound
    like one of the desk's topics are replaced by it. The model and its decoding thread are
    shared by every call unless `recognizer` is given."""

    def __init__(
        self,
        *,
        recognizer: MoonshineRecognizer | None = None,
        second_opinion: SecondOpinion | None = None,
        correction: VocabularyCorrection | None = None,
        window: WindowSettings | None = None,
    ) -> None:
        super().__init__(
            capabilities=stt.STTCapabilities(
                streaming=True, interim_results=True, manual_flush=True
            )
        )
        self._recognizer = recognizer or shared_moonshine()
        self._second = second_opinion
        self._correction = correction
        self._window = window or WindowSettings(tail=TAIL)
        self.second_opinions_skipped = 0
        """Doubted finals that kept Moonshine's hearing: the second lane was behind."""

    @property
    def model(self) -> str:
        """The bundled model."""
        return "moonshine-base-en"

    @property
    def provider(self) -> str:
        """Always ``"offline"``."""
        return "offline"

    @property
    def window(self) -> WindowSettings:
        """How streams cut and decode ahead."""
        return self._window

    @property
    def recognizer(self) -> MoonshineRecognizer:
        """The model and decoding queue this plugin uses."""
        return self._recognizer

    @property
    def second_opinion(self) -> SecondOpinion | None:
        """Who hears doubtful finals again, if anyone."""
        return self._second

    def prewarm(self) -> None:
        """Check, convert once and load the model now (and the second opinion's)."""
        self._recognizer.prewarm()
        if self._second is not None:
            self._second.whisper.prewarm()

    def hear(
        self, pcm16: bytes, sample_rate: int, *, final: bool = True, draft: Sequence[int] = ()
    ) -> WhisperTranscript:
        """What this plugin hears in `pcm16` (blocking), verifying `draft` (the tokens of a
        decoding of the utterance's start); a final may be heard again by the second
        opinion, here on the calling thread."""
        heard = self.decode(pcm16, sample_rate, final=final, draft=draft)
        if isinstance(heard, Then):
            result: WhisperTranscript = heard.run()
            return result
        return heard

    def decode(
        self, pcm16: bytes, sample_rate: int, *, final: bool = True, draft: Sequence[int] = ()
    ) -> WhisperTranscript | Then:
        """A decode queue job's work (blocking): Moonshine's hearing, or, for a doubted
        final, the second opinion to run next on the queue's second lane (`Then`); a final
        the lane is too far behind for keeps Moonshine's hearing (see the module)."""
        heard = self._recognizer.recognize(pcm16, sample_rate, draft=draft)
        if self._correction is not None and heard.text:
            heard = replace(heard, text=self._correction.correct(heard.text))
        second = self._second
        if not final or second is None or not second.doubts(heard):
            return heard
        queue = self._recognizer.queue
        if queue.waiting(Urgency.SECOND) >= queue.lane_workers(Urgency.SECOND):
            self.second_opinions_skipped += 1
            log.info("second opinion skipped (its lane is behind): kept %r", heard.text)
            return heard

        def again() -> WhisperTranscript:
            assert second is not None
            other = second.whisper.hear(pcm16, sample_rate, final=True)
            chosen = second.choose(heard, other)
            return chosen if chosen is heard else replace(other, tokens=heard.tokens)

        return Then(Urgency.SECOND, again)

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
            future, Urgency.FINAL, lambda: self.decode(pcm16, rate), settle_in(loop, future)
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


_shared: MoonshineRecognizer | None = None


def built_shared_moonshine() -> MoonshineRecognizer | None:
    """The process-wide model if something used it already (None: no desk did)."""
    return _shared


def shared_moonshine() -> MoonshineRecognizer:
    """The process-wide model (checked, converted once and loaded on first use), decoding
    on one thread."""
    global _shared
    if _shared is None:
        _shared = MoonshineRecognizer()
    return _shared
