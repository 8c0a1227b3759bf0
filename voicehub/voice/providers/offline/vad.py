"""Offline VAD for livekit-agents: :func:`load_vad` (Silero or WebRTC) and :class:`WebRtcVAD`.

Silero is the accurate default (about 50 us of CPU per 20 ms frame, robust in noise).
WebRTC's GMM detector costs about 2 us per frame but raises false alarms in noise; it is
the choice when many calls share a core.
"""

from __future__ import annotations

import time
from typing import Literal

from voicehub.voice.audio import FrameSplitter, Resampler, int16_to_pcm16
from voicehub.voice.providers import vendor_import
from voicehub.voice.providers.offline.vad_segmenter import SpeechSegmenter, Transition

with vendor_import("livekit-agents"):
    from livekit import rtc
    from livekit.agents import vad

__all__ = ["VADKind", "WebRtcVAD", "WebRtcVADStream", "load_vad"]

VADKind = Literal["silero", "webrtc"]

_WEBRTC_RATES = (8000, 16000, 32000, 48000)
_WEBRTC_FRAME_MS = (10, 20, 30)


def load_vad(
    kind: VADKind = "silero",
    *,
    min_speech_duration: float = 0.06,
    min_silence_duration: float = 0.35,
    prefix_padding_duration: float = 0.3,
    silero_sample_rate: Literal[8000, 16000] = 16000,
    webrtc_mode: int = 3,
) -> vad.VAD:
    """Build a VAD tuned for quick turn-taking: speech ends after 0.35 s of silence.

    Loading Silero is blocking (about 100 ms); build it once and share it across calls:
    every ``stream()`` has its own state.
    """
    if kind == "silero":
        with vendor_import("livekit-plugins-silero"):
            from livekit.plugins import silero

        return silero.VAD.load(
            min_speech_duration=min_speech_duration,
            min_silence_duration=min_silence_duration,
            prefix_padding_duration=prefix_padding_duration,
            sample_rate=silero_sample_rate,
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

    livekit sessions subscribe to their VAD's metrics events, so one VAD object shared by N
    calls runs N handlers for every stream's metrics: a cost that grows with the square of
    the calls (the voice bench measured 50 calls per core shared, 75 per call). The model
    (Silero's ONNX session, about 100 ms to load) stays shared; onnxruntime runs it from
    several streams safely. A `BatchedSileroVAD` gives a VAD on its shared batcher.
    """
    if isinstance(shared, WebRtcVAD):
        return WebRtcVAD(
            mode=shared.mode,
            min_speech_duration=shared.min_speech_duration,
            min_silence_duration=shared.min_silence_duration,
            prefix_padding_duration=shared.prefix_padding_duration,
            max_buffered_speech=shared.max_buffered_speech,
        )
    with vendor_import("livekit-plugins-silero"):
        from livekit.plugins import silero

        from voicehub.voice.providers.offline.silero_batch import BatchedSileroVAD
    if isinstance(shared, BatchedSileroVAD):
        return shared.for_call()  # inferences batched with every other call's
    if isinstance(shared, silero.VAD):
        # livekit-plugins-silero 1.8.9 (pinned) has no public way to share the model between
        # VAD objects; its public constructor takes the session and options `load` made.
        return silero.VAD(session=shared._onnx_session, opts=shared._opts)
    return shared  # an unknown VAD: shared as given


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
        min_silence_duration: float = 0.35,
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


class WebRtcVADStream(vad.VADStream):
    """Emits INFERENCE_DONE per frame and START_OF_SPEECH / END_OF_SPEECH like Silero's."""

    def __init__(self, owner: WebRtcVAD) -> None:
        import webrtcvad

        self._owner = owner
        self._detector = webrtcvad.Vad(owner.mode)
        super().__init__(owner)

    async def _main_task(self) -> None:
        segmenter: SpeechSegmenter | None = None
        splitter: FrameSplitter | None = None
        resampler: Resampler | None = None
        rate = 0
        async for item in self._input_ch:
            if isinstance(item, self._FlushSentinel):
                segmenter = splitter = resampler = None  # a hard segment boundary
                continue
            if segmenter is None or splitter is None:
                rate = item.sample_rate if item.sample_rate in _WEBRTC_RATES else 16000
                segmenter = self._owner.new_segmenter(rate)
                splitter = FrameSplitter(rate, 20)
                if rate != item.sample_rate:
                    resampler = Resampler(item.sample_rate, rate)
            pcm = item.data.tobytes()
            if resampler is not None:
                pcm = int16_to_pcm16(resampler.push(item.data))
            if splitter.pending == 0 and _is_webrtc_frame(len(pcm), rate):
                # the common case: no re-framing, and the event can carry the input frame
                self._process(segmenter, pcm, rate, item if resampler is None else None)
                continue
            for frame in splitter.push(pcm):
                self._process(segmenter, frame, rate)

    def _process(
        self,
        segmenter: SpeechSegmenter,
        frame: bytes,
        rate: int,
        source: rtc.AudioFrame | None = None,
    ) -> None:
        started = time.perf_counter()
        speech = bool(self._detector.is_speech(frame, rate))
        inference_duration = time.perf_counter() - started
        transition = segmenter.process(frame, speech)
        samples = len(frame) // 2
        send = self._event_ch.send_nowait
        send(
            vad.VADEvent(
                type=vad.VADEventType.INFERENCE_DONE,
                samples_index=segmenter.samples_processed,
                timestamp=segmenter.elapsed,
                speech_duration=segmenter.speech_duration,
                silence_duration=segmenter.silence_duration,
                frames=[source if source is not None else rtc.AudioFrame(frame, rate, 1, samples)],
                probability=1.0 if speech else 0.0,
                inference_duration=inference_duration,
                speaking=segmenter.speaking,
                raw_accumulated_silence=segmenter.raw_silence,
                raw_accumulated_speech=segmenter.raw_speech,
            )
        )
        if transition is Transition.NONE:
            return
        audio = segmenter.speech_audio()
        send(
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


def _is_webrtc_frame(size: int, rate: int) -> bool:
    return any(size == rate * ms // 1000 * 2 for ms in _WEBRTC_FRAME_MS)
