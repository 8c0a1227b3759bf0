"""Offline VAD for livekit-agents: :func:`load_vad` (Silero or WebRTC), :func:`vad_for_call`
and :class:`WebRtcVAD`.

Silero is the accurate default, robust in noise: `SileroVAD` (one model run per window per
call) or `BatchedSileroVAD` (runs batched across calls), both deciding as livekit's Silero
plugin. WebRTC's GMM detector costs a few us per frame but raises false alarms in noise; it
is the choice when many calls share a core. See docs/vad.md.
"""

from __future__ import annotations

import time
from typing import Literal

from voicehub.voice.audio import FrameSplitter, Resampler, int16_to_pcm16
from voicehub.voice.providers import vendor_import
from voicehub.voice.providers.offline.silero_model import SILENT_PEAK_DBFS
from voicehub.voice.providers.offline.vad_segmenter import SpeechSegmenter, Transition
from voicehub.voice.providers.offline.vad_stream import InlineVADStream

with vendor_import("livekit-agents"):
    from livekit import rtc
    from livekit.agents import vad

__all__ = ["END_SILENCE", "VADKind", "WebRtcVAD", "WebRtcVADStream", "load_vad"]

VADKind = Literal["silero", "webrtc"]

_WEBRTC_RATES = (8000, 16000, 32000, 48000)
_WEBRTC_FRAME_MS = (10, 20, 30)
# the PCM16 sizes WebRTC's detector takes at each rate, looked up once a frame
_WEBRTC_FRAME_BYTES = {
    rate: frozenset(rate * ms // 1000 * 2 for ms in _WEBRTC_FRAME_MS) for rate in _WEBRTC_RATES
}


END_SILENCE = 0.2
"""Seconds of silence after which the VAD says speech ended (its default). From there the
turn is decided (word rules, the end-of-turn model: `voicehub.voice.turns.policy`) and the
recognizer flushed: a later end only delays both, and a pause the VAD ends that the turn
policy does not is one more flush, answered by the decoding made at that pause."""


def load_vad(
    kind: VADKind = "silero",
    *,
    min_speech_duration: float = 0.06,
    min_silence_duration: float = END_SILENCE,
    prefix_padding_duration: float = 0.3,
    silero_sample_rate: Literal[8000, 16000] = 16000,
    silent_peak_dbfs: float | None = SILENT_PEAK_DBFS,
    webrtc_mode: int = 3,
) -> vad.VAD:
    """Build a VAD tuned for quick turn-taking: speech ends after `END_SILENCE` of silence.

    Silero gives a `SileroVAD` (livekit's Silero rules, one model run per window per call;
    `BatchedSileroVAD(load_vad())` batches the runs across calls). Windows quieter than
    `silent_peak_dbfs` outside speech skip the model (None: never). Loading Silero is
    blocking (about 100 ms); build it once and share it: every ``stream()`` has its own
    state, and `vad_for_call` gives each call a VAD object of its own on the same model.
    """
    if kind == "silero":
        from voicehub.voice.providers.offline.silero_batch import SileroVAD
        from voicehub.voice.providers.offline.silero_model import SileroOptions

        return SileroVAD.load(
            SileroOptions(
                min_speech_duration=min_speech_duration,
                min_silence_duration=min_silence_duration,
                prefix_padding_duration=prefix_padding_duration,
                sample_rate=silero_sample_rate,
                silent_peak_dbfs=silent_peak_dbfs,
            )
        )
    if kind == "webrtc":
        return WebRtcVAD(
            mode=webrtc_mode,
            min_speech_duration=min_speech_duration,
            min_silence_duration=min_silence_duration,
            prefix_padding_duration=prefix_padding_duration,
        )
    raise ValueError(f"unknown VAD kind {kind!r}: expected 'silero' or 'webrtc'")


def vad_for_call(shared: vad.VAD) -> vad.VAD:
    """A VAD object of its own for one call, sharing `shared`'s model.

    A VAD object carries its listeners (`metrics_collected`): one object shared by N calls
    whose consumers each subscribe runs N handlers for every stream's report, a cost that
    grows with the square of the calls. The model stays shared (Silero's ONNX session runs
    from several streams safely). A `BatchedSileroVAD` gives a VAD on its shared batcher;
    a VAD of another kind (a livekit plugin's) is returned as given.
    """
    if isinstance(shared, WebRtcVAD):
        return WebRtcVAD(
            mode=shared.mode,
            min_speech_duration=shared.min_speech_duration,
            min_silence_duration=shared.min_silence_duration,
            prefix_padding_duration=shared.prefix_padding_duration,
            max_buffered_speech=shared.max_buffered_speech,
        )
    from voicehub.voice.providers.offline.silero_batch import SileroVAD

    if isinstance(shared, SileroVAD):
        return shared.for_call()  # a batched one's: on the same batcher
    return shared


class WebRtcVAD(vad.VAD):
    """A livekit VAD on ``webrtcvad`` (WebRTC's GMM detector), one decision per frame.

    ``mode`` is WebRTC's aggressiveness, 0 (keeps most speech) to 3 (fewest false alarms).
    Input at 8, 16, 32 or 48 kHz is analysed as is; other rates are resampled to 16 kHz
    and the event frames then carry 16 kHz audio.
    """

    def __init__(
        self,
        *,
        mode: int = 3,
        min_speech_duration: float = 0.06,
        min_silence_duration: float = END_SILENCE,
        prefix_padding_duration: float = 0.3,
        max_buffered_speech: float = 60.0,
    ) -> None:
        if mode not in (0, 1, 2, 3):
            raise ValueError(f"webrtc VAD mode must be 0, 1, 2 or 3, got {mode!r}")
        with vendor_import("webrtcvad-wheels"):
            import webrtcvad  # noqa: F401  (fail at construction, not in the stream task)
        super().__init__(capabilities=vad.VADCapabilities(update_interval=0.02))
        self.mode = mode
        self.min_speech_duration = min_speech_duration
        self.min_silence_duration = min_silence_duration
        self.prefix_padding_duration = prefix_padding_duration
        self.max_buffered_speech = max_buffered_speech

    @property
    def model(self) -> str:
        """Detector name, for livekit metrics."""
        return "webrtcvad"

    @property
    def provider(self) -> str:
        """Always ``"offline"``."""
        return "offline"

    def stream(self) -> WebRtcVADStream:
        """A new stream with its own detector and segment state."""
        return WebRtcVADStream(self)

    def new_segmenter(self, sample_rate: int) -> SpeechSegmenter:
        """A segmenter with this VAD's durations."""
        return SpeechSegmenter(
            sample_rate,
            min_speech_duration=self.min_speech_duration,
            min_silence_duration=self.min_silence_duration,
            prefix_padding_duration=self.prefix_padding_duration,
            max_buffered_speech=self.max_buffered_speech,
        )


class WebRtcVADStream(InlineVADStream):
    """Emits INFERENCE_DONE per 20 ms frame and START_OF_SPEECH / END_OF_SPEECH as
    Silero's, each decided in `push_frame` (an `InlineVADStream`)."""

    def __init__(self, owner: WebRtcVAD) -> None:
        import webrtcvad

        super().__init__(owner)
        self.settings = owner
        self.detector = webrtcvad.Vad(owner.mode)
        self.segmenter: SpeechSegmenter | None = None  # per segment (a flush starts anew)
        self.splitter: FrameSplitter | None = None
        self.resampler: Resampler | None = None
        self.rate = 0

    def process_frame(self, frame: rtc.AudioFrame) -> None:
        """Decide the frame (re-framed to 20 ms, resampled when WebRTC cannot take its rate)."""
        segmenter, splitter = self.segmenter, self.splitter
        self.input_rate = frame.sample_rate
        self.analysed_samples += frame.samples_per_channel  # decided before this returns
        if segmenter is None or splitter is None:
            rate = frame.sample_rate if frame.sample_rate in _WEBRTC_RATES else 16000
            segmenter = self.segmenter = self.settings.new_segmenter(rate)
            splitter = self.splitter = FrameSplitter(rate, 20)
            self.resampler = (
                Resampler(frame.sample_rate, rate) if rate != frame.sample_rate else None
            )
            self.rate = rate
        rate, resampler = self.rate, self.resampler
        pcm = (
            frame.data.tobytes()
            if resampler is None
            else int16_to_pcm16(resampler.push(frame.data))
        )
        if splitter.pending == 0 and len(pcm) in _WEBRTC_FRAME_BYTES[rate]:
            # the common case: no re-framing, and the event can carry the input frame
            self.decide(segmenter, pcm, rate, frame if resampler is None else None)
            return
        for part in splitter.push(pcm):
            self.decide(segmenter, part, rate)

    def process_flush(self) -> None:
        """A hard segment boundary: the next frame starts a fresh segment."""
        self.segmenter = self.splitter = self.resampler = None

    def process_end(self) -> None:
        """Every frame is decided already: the events end."""
        self.finish()

    def decide(
        self,
        segmenter: SpeechSegmenter,
        frame: bytes,
        rate: int,
        source: rtc.AudioFrame | None = None,
    ) -> None:
        """One 20 ms frame: WebRTC's decision, the segment rules, the events."""
        started = time.perf_counter()
        speech = bool(self.detector.is_speech(frame, rate))
        inference_duration = time.perf_counter() - started
        transition = segmenter.process(frame, speech)
        self.silence_run(segmenter.speaking, segmenter.raw_silence)
        if self.speech_inferences and (
            self.quiet_inferences
            or segmenter.speaking
            or segmenter.raw_speech
            or segmenter.speech_duration
        ):
            samples = len(frame) // 2
            self.send(
                vad.VADEvent(
                    type=vad.VADEventType.INFERENCE_DONE,
                    samples_index=segmenter.samples_processed,
                    timestamp=segmenter.elapsed,
                    speech_duration=segmenter.speech_duration,
                    silence_duration=segmenter.silence_duration,
                    frames=[
                        source if source is not None else rtc.AudioFrame(frame, rate, 1, samples)
                    ],
                    probability=1.0 if speech else 0.0,
                    inference_duration=inference_duration,
                    speaking=segmenter.speaking,
                    raw_accumulated_silence=segmenter.raw_silence,
                    raw_accumulated_speech=segmenter.raw_speech,
                )
            )
        self.count_inference(inference_duration)
        if transition is Transition.NONE:
            return
        audio = segmenter.speech_audio()
        self.send(
            vad.VADEvent(
                type=vad.VADEventType.START_OF_SPEECH
                if transition is Transition.STARTED
                else vad.VADEventType.END_OF_SPEECH,
                samples_index=segmenter.samples_processed,
                timestamp=segmenter.elapsed,
                speech_duration=segmenter.speech_duration,
                silence_duration=segmenter.silence_duration,
                frames=[rtc.AudioFrame(audio, rate, 1, len(audio) // 2)],
                speaking=segmenter.speaking,
            )
        )
