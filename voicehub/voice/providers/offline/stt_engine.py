"""PocketSphinx recognition without livekit: a per-caller recognizer over pooled decoders.

A PocketSphinx ``Decoder`` loads the en-us model shipped in the wheel (about 85 MB and one
second per decoder), so decoders come from a bounded pool (`decoder_pool`) and serve one
utterance at a time. A decoder holds the GIL while it decodes, so worker threads would not
run in parallel: callers feed it 20 ms frames inline, which keeps each hold short (1-4 ms).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

from voicehub.voice.audio import (
    FrameSplitter,
    Resampler,
    energy_above,
    int16_to_pcm16,
    pcm16_to_int16,
    resample_pcm16,
    rms,
)
from voicehub.voice.providers import vendor_import
from voicehub.voice.providers.offline.decoder_pool import DecoderPool, shared_pool

__all__ = [
    "SAMPLE_RATE",
    "DecoderPool",
    "Final",
    "Partial",
    "RecognizerEvent",
    "SphinxRecognizer",
    "Transcript",
    "recognize_pcm",
    "shared_pool",
    "transcribe",
]

SAMPLE_RATE = 16000
"""The rate the en-us acoustic model expects."""

_FRAME_MS = 20

# Live cepstral mean normalization starts from the model's wideband mean and needs seconds
# of audio to adapt. Phone audio (nothing above 4 kHz) is far from it, so a phone call's
# first utterance came out as noise (word error rate 77-80% on synthesized sentences).
# Seeding with this mean, measured on band-limited speech, brought it to 43-50%.
NARROWBAND_CMN = "48.47,36.01,-33.75,42.65,-9.11,-7.71,18.78,-24.57,8.32,-0.35,-7.34,10.17,-10.07"
_NARROWBAND_CUTOFF_HZ = 4500
_NARROWBAND_MAX_ENERGY = 1e-5  # phone speech measured under 1e-6, wideband over 3e-4
_PROBE_SPEECH_BYTES = 2 * SAMPLE_RATE // 5  # judge the band on 200 ms of speech...
_PROBE_BYTES = 2 * SAMPLE_RATE // 2  # ...at the end of the first 500 ms fed (with pre-roll)
_PROBE_MIN_RMS = 100.0  # about -50 dBFS


@dataclass(frozen=True, slots=True)
class Transcript:
    """The result of one utterance. Times are seconds from the start of the audio."""

    text: str
    confidence: float = 0.0
    start_time: float = 0.0
    end_time: float = 0.0


@dataclass(frozen=True, slots=True)
class Partial:
    """The hypothesis changed while the caller is still speaking."""

    text: str


@dataclass(frozen=True, slots=True)
class Final:
    """An utterance ended (flush or trailing silence) with this transcript."""

    transcript: Transcript


RecognizerEvent = Partial | Final


class SphinxRecognizer:
    """One caller's recognition state over pooled decoders: 16 kHz PCM16 in, events out.

    The decoder is lent: given at construction (kept for the recognizer's life) or, for a
    stream sharing a pool, attached when :attr:`wants_decoder` turns true (an utterance has
    audio to decode; it waits in the recognizer meanwhile) and detached once the utterance
    is over (:attr:`can_detach`). The caller's cepstral mean goes with the call from one
    decoder to the next, so results do not depend on which decoder serves an utterance.

    A cheap gate (PocketSphinx's built-in WebRTC VAD, about 2 us per frame) keeps silence
    away from the decoder, which costs 1-4 ms per frame: it starts feeding with ``pre_roll``
    seconds of buffered audio when it hears speech, and stops after ``hangover`` seconds
    without speech. When ``endpoint_silence`` is set and the utterance has words, that much
    silence ends it with a :class:`Final`, which makes STT turn detection possible.

    The first 500 ms fed (pre-roll included) are held back once per recognizer to check
    whether the audio is band-limited phone audio; partials start after that.
    """

    def __init__(
        self,
        decoder: Any = None,
        *,
        gate: bool = True,
        pre_roll: float = 0.3,
        hangover: float = 0.5,
        endpoint_silence: float | None = 1.0,
    ) -> None:
        self.decoder = decoder
        self._frames = FrameSplitter(SAMPLE_RATE, _FRAME_MS)
        self._gate = None
        if gate:
            with vendor_import("pocketsphinx"):
                from pocketsphinx import Vad

            self._gate = Vad(Vad.LOOSE, SAMPLE_RATE, _FRAME_MS / 1000)
        self._pre_roll: deque[bytes] = deque(maxlen=max(1, round(pre_roll * 50)))
        self._hangover_frames = max(1, round(hangover * 50))
        self._endpoint_frames = round(endpoint_silence * 50) if endpoint_silence else None
        self._frame_index = 0  # 20 ms frames seen since the stream started
        self._feeding = False
        self._silent_frames = 0
        self._in_utterance = False
        self._speech_start: int | None = None  # frame index of the first speech frame
        self._speech_end = 0
        self._text = ""
        self._resampler: Resampler | None = None
        self._held: list[bytes] | None = []  # None once the band is known
        self._waiting: list[tuple[bytes, bool]] = []  # audio to decode once a decoder comes
        self._caller_cmn: str | None = None  # this caller's cepstral mean between decoders
        self.narrowband = False
        """True once the first speech turned out band-limited (phone audio)."""

    @property
    def text(self) -> str:
        """The current hypothesis of the open utterance."""
        return self._text

    @property
    def wants_decoder(self) -> bool:
        """Audio is waiting to be decoded and no decoder is attached."""
        return self.decoder is None and bool(self._waiting)

    @property
    def can_detach(self) -> bool:
        """A decoder is attached and no utterance is open on it."""
        return self.decoder is not None and not self._in_utterance and not self._held

    def attach(self, decoder: Any) -> list[RecognizerEvent]:
        """Decode on `decoder` from now on, starting with the waiting audio."""
        self.decoder = decoder
        if self._caller_cmn is not None:
            decoder.set_cmn(self._caller_cmn)
        waiting, self._waiting = self._waiting, []
        before = self._text
        for pcm16, last in waiting:
            self._decode(pcm16, last=last)
        return [Partial(self._text)] if self._text and self._text != before else []

    def detach(self) -> Any:
        """Take the decoder back (see :attr:`can_detach`), keeping the caller's mean."""
        decoder, self.decoder = self.decoder, None
        if decoder is not None:
            self._caller_cmn = decoder.get_cmn(False)
        return decoder

    def drop_waiting(self) -> None:
        """Forget the audio waiting for a decoder (none came): the utterance is lost."""
        self._waiting.clear()
        self._feeding = False
        self._speech_start = None

    def feed(self, pcm16: bytes, sample_rate: int = SAMPLE_RATE) -> list[RecognizerEvent]:
        """Process audio of any length; return the partials and finals it produced."""
        if sample_rate != SAMPLE_RATE:
            if self._resampler is None or self._resampler.from_rate != sample_rate:
                self._resampler = Resampler(sample_rate, SAMPLE_RATE)
            pcm16 = int16_to_pcm16(self._resampler.push(pcm16_to_int16(pcm16)))
        events: list[RecognizerEvent] = []
        for frame in self._frames.push(pcm16):
            self._feed_frame(frame, events)
        return events

    def _feed_frame(self, frame: bytes, events: list[RecognizerEvent]) -> None:
        index = self._frame_index
        self._frame_index += 1
        speech = self._gate is None or bool(self._gate.is_speech(frame))
        if speech:
            self._silent_frames = 0
            self._speech_end = index + 1
            if self._speech_start is None:
                self._speech_start = index
        else:
            self._silent_frames += 1

        before = self._text
        if self._feeding:
            self._decode(frame)
        elif speech:
            self._feeding = True
            self._decode(b"".join(self._pre_roll) + frame)
            self._pre_roll.clear()
        else:
            self._pre_roll.append(frame)
        if self._text and self._text != before:
            events.append(Partial(self._text))

        if self._gate is not None and self._silent_frames >= self._hangover_frames:
            self._feeding = False
        if self._endpoint_frames and self._silent_frames >= self._endpoint_frames:
            if self._text:
                events.append(Final(self._end_utterance()))
            elif self._in_utterance or self._held:
                # Noise the gate let through, no words so far: end it so the decoder can go
                # back to the pool, and report it only if the end found words after all.
                if self._held:
                    self._decode(b"", last=True)
                transcript = self._end_utterance()
                if transcript.text:
                    events.append(Final(transcript))

    def _decode(self, pcm16: bytes, *, last: bool = False) -> None:
        if self.decoder is None:
            self._waiting.append((pcm16, last))
            return
        if self._held is not None:
            # Before the first words, hold audio until we know the band (see NARROWBAND_CMN).
            self._held.append(pcm16)
            if sum(map(len, self._held)) < _PROBE_BYTES and not last:
                return
            pcm16 = b"".join(self._held)
            self._held = None
            self._seed_cmn_for_bandwidth(pcm16[-_PROBE_SPEECH_BYTES:])
        if not self._in_utterance:
            self.decoder.start_utt()
            self._in_utterance = True
        self.decoder.process_raw(pcm16, False, False)
        hypothesis = self.decoder.hyp()
        self._text = hypothesis.hypstr if hypothesis is not None else ""

    def _seed_cmn_for_bandwidth(self, pcm16: bytes) -> None:
        samples = pcm16_to_int16(pcm16)
        if rms(samples) < _PROBE_MIN_RMS:
            return  # too quiet to judge: keep the model's mean
        if energy_above(samples, SAMPLE_RATE, _NARROWBAND_CUTOFF_HZ) < _NARROWBAND_MAX_ENERGY:
            self.narrowband = True
            self.decoder.set_cmn(NARROWBAND_CMN)

    def finish(self) -> Transcript:
        """End the open utterance now (a flush) and return its transcript, maybe empty."""
        pending = self._frames.flush(pad=False)
        tail = pending if pending and self._feeding else b""
        if tail or self._held:
            self._decode(tail, last=True)
        if self.decoder is None and self._waiting:
            raise RuntimeError("finish() needs a decoder: attach one first (wants_decoder)")
        self._feeding = False  # the next utterance starts at the gate, with its pre-roll
        return self._end_utterance()

    def _end_utterance(self) -> Transcript:
        text, confidence = "", 0.0
        if self._in_utterance:
            self.decoder.end_utt()
            self._in_utterance = False
            hypothesis = self.decoder.hyp()
            if hypothesis is not None:
                text, confidence = hypothesis.hypstr, min(1.0, max(0.0, hypothesis.prob))
        start = self._speech_start if self._speech_start is not None else self._frame_index
        self._text = ""
        self._speech_start = None
        return Transcript(
            text=text,
            confidence=confidence,
            start_time=start * _FRAME_MS / 1000,
            end_time=max(start, self._speech_end) * _FRAME_MS / 1000,
        )

    def close(self) -> None:
        """End any utterance so the decoder can go back to the pool."""
        self._waiting.clear()
        if self._in_utterance:
            self.decoder.end_utt()
            self._in_utterance = False


_EDGE_SILENCE = 0.3  # the decoder needs silence around words to anchor <s> and </s>


def recognize_pcm(decoder: Any, pcm16: bytes, sample_rate: int) -> Transcript:
    """Recognize a whole recording as one utterance on ``decoder`` (blocking).

    One ``full_utt`` call lets PocketSphinx normalize with the recording's own cepstral
    mean, which beats live normalization on a cold decoder (on phone audio, word error rate
    47% against 88%). It holds the GIL throughout, about 0.2 s per second of audio.
    """
    audio = resample_pcm16(pcm16, sample_rate, SAMPLE_RATE)
    edge = bytes(2 * round(_EDGE_SILENCE * SAMPLE_RATE))
    decoder.start_utt()
    try:
        decoder.process_raw(edge + audio + edge, False, True)
    finally:
        decoder.end_utt()
    hypothesis = decoder.hyp()
    if hypothesis is None or not hypothesis.hypstr:
        return Transcript("")
    # seg() frames are 10 ms; fillers such as <s>, <sil> and [NOISE] are not words
    spoken = [seg for seg in decoder.seg() if seg.word[:1] not in ("<", "[", "+")]
    start = spoken[0].start_frame / 100 - _EDGE_SILENCE if spoken else 0.0
    end = (spoken[-1].end_frame + 1) / 100 - _EDGE_SILENCE if spoken else 0.0
    return Transcript(
        hypothesis.hypstr,
        min(1.0, max(0.0, hypothesis.prob)),
        max(0.0, start),
        max(0.0, end),
    )


def transcribe(pcm16: bytes, sample_rate: int) -> str:
    """Recognize a whole recording (any rate; resampled to 16 kHz); return its words.

    Synchronous and livekit-free, for tests and the CLI. The whole buffer is one utterance.
    """
    pool = shared_pool()
    decoder = pool.acquire()
    try:
        return recognize_pcm(decoder, pcm16, sample_rate).text
    finally:
        pool.release(decoder)
