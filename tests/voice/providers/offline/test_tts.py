"""Offline TTS: Piper and eSpeak NG, as plain functions and as livekit-agents plugins."""

from __future__ import annotations

import os
import subprocess
import sys
from functools import cache

import numpy as np
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from voicehub.errors import MissingExtraError
from voicehub.voice import audio
from voicehub.voice.providers.offline import synthesize, transcribe
from voicehub.voice.providers.offline.tts_engines import PiperEngine

PHRASE = "please research solar panels"


@cache
def piper_16k(text: str = PHRASE) -> bytes:
    return synthesize(text, voice="piper", sample_rate=16000)


def test_piper_is_deterministic_and_sounds_like_speech() -> None:
    first = piper_16k()
    assert synthesize(PHRASE, voice="piper", sample_rate=16000) == first
    seconds = len(first) / 2 / 16000
    assert 1.0 < seconds < 3.5
    assert audio.dbfs(first) > -30  # not silence


def test_piper_output_rate_follows_the_request() -> None:
    at_8k = synthesize(PHRASE, sample_rate=8000)
    at_native = synthesize(PHRASE, sample_rate=22050)
    assert len(at_8k) / 2 / 8000 == pytest.approx(len(at_native) / 2 / 22050, abs=0.001)


def test_piper_speech_is_recognized_back() -> None:
    words = set(transcribe(piper_16k(), 16000).split())
    assert {"research", "solar", "panels"} <= words


def test_espeak_is_light_and_stable() -> None:
    first = synthesize("hello there, how are you today", voice="espeak", sample_rate=22050)
    second = synthesize("hello there, how are you today", voice="espeak", sample_rate=22050)
    assert 1.0 < len(first) / 2 / 22050 < 3.5
    # the library keeps waveform state between calls: a sample or two of drift at most
    assert abs(len(first) - len(second)) <= 8
    assert audio.dbfs(first) > -30


def test_blank_text_and_unknown_voices() -> None:
    assert synthesize("   ") == b""
    with pytest.raises(ValueError, match="unknown offline voice 'festival'"):
        synthesize("hello", voice="festival")  # type: ignore[arg-type]


def test_missing_vendor_package_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "piper", None)  # makes `import piper` fail
    with pytest.raises(MissingExtraError, match=r"piper-tts is not installed.*voicehub\[voice\]"):
        PiperEngine.load()


def test_plain_functions_do_not_import_livekit() -> None:
    code = (
        "import sys\n"
        "import voicehub.voice.providers.offline as offline\n"
        "offline.synthesize, offline.transcribe\n"
        "assert not [m for m in sys.modules if m.startswith('livekit')], 'livekit imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


async def test_piper_plugin_matches_the_plain_function() -> None:
    from voicehub.voice.providers.offline import PiperTTS

    tts = PiperTTS()
    assert (tts.sample_rate, tts.num_channels, tts.capabilities.streaming) == (22050, 1, False)
    frame = await tts.synthesize(PHRASE).collect()
    assert frame.sample_rate == 22050
    # The plugin speaks in vocoder chunks at a fixed gain (`piper_chunks`), the function in
    # whole sentences normalized to full scale: the same speech, louder or softer.
    said = np.frombuffer(frame.data.tobytes(), np.int16).astype(np.float64)
    plain = np.frombuffer(synthesize(PHRASE, sample_rate=22050), np.int16).astype(np.float64)
    assert said.size == plain.size
    assert np.corrcoef(said, plain)[0, 1] > 0.999


async def test_piper_plugin_pauses_between_sentences_and_resamples() -> None:
    from voicehub.voice.providers.offline import PiperTTS

    two = await PiperTTS(sample_rate=16000).synthesize("Solar panels. Wind turbines.").collect()
    one = len(synthesize("Solar panels.")) + len(synthesize("Wind turbines."))
    assert two.sample_rate == 16000
    gap = len(two.data) - one // 2  # samples beyond the two sentences on their own
    assert 0.15 * 16000 < gap < 0.25 * 16000


async def test_espeak_plugin_and_empty_text() -> None:
    from voicehub.voice.providers.offline import ESpeakTTS

    tts = ESpeakTTS(sample_rate=16000)
    frame = await tts.synthesize("hello world").collect()
    assert frame.sample_rate == 16000
    assert 0.4 < frame.duration < 2.0
    # punctuation-only text must give (near) silence, not a failed reply
    dots = await tts.synthesize("...").collect()
    assert dots.duration < 0.1
