"""Tests for voicehub.voice.audio.g711: bit-exact with audioop, over every input."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from voicehub.voice.audio.g711 import alaw2lin, lin2alaw, lin2ulaw, ulaw2lin
from voicehub.voice.audio.pcm import int16_to_pcm16, pcm16_to_int16

ALL_INT16 = np.arange(-32768, 32768, dtype=np.int16)
samples_16 = st.lists(st.integers(-32768, 32767), max_size=400)

# Reference: a line-by-line transliteration of the Sun/CCITT C code that audioop uses.

_ULAW_SEG_END = (0x3F, 0x7F, 0xFF, 0x1FF, 0x3FF, 0x7FF, 0xFFF, 0x1FFF)
_ALAW_SEG_END = (0x1F, 0x3F, 0x7F, 0xFF, 0x1FF, 0x3FF, 0x7FF, 0xFFF)


def _search(value: int, table: tuple[int, ...]) -> int:
    return next((i for i, end in enumerate(table) if value <= end), len(table))


def reference_lin2ulaw(sample: int) -> int:
    pcm = sample >> 2
    if pcm < 0:
        pcm, mask = -pcm, 0x7F
    else:
        mask = 0xFF
    pcm = min(pcm, 8159) + (0x84 >> 2)
    seg = _search(pcm, _ULAW_SEG_END)
    if seg >= 8:
        return 0x7F ^ mask
    return ((seg << 4) | ((pcm >> (seg + 1)) & 0xF)) ^ mask


def reference_lin2alaw(sample: int) -> int:
    pcm = sample >> 3
    if pcm >= 0:
        mask = 0xD5
    else:
        mask, pcm = 0x55, -pcm - 1
    seg = _search(pcm, _ALAW_SEG_END)
    if seg >= 8:
        return 0x7F ^ mask
    quant = (pcm >> 1) if seg < 2 else (pcm >> seg)
    return ((seg << 4) | (quant & 0xF)) ^ mask


def reference_ulaw2lin(code: int) -> int:
    u = ~code & 0xFF
    t = (((u & 0x0F) << 3) + 0x84) << ((u & 0x70) >> 4)
    return 0x84 - t if u & 0x80 else t - 0x84


def reference_alaw2lin(code: int) -> int:
    a = code ^ 0x55
    t = (a & 0x0F) << 4
    seg = (a & 0x70) >> 4
    if seg == 0:
        t += 8
    elif seg == 1:
        t += 0x108
    else:
        t = (t + 0x108) << (seg - 1)
    return t if a & 0x80 else -t


# sha256 of audioop's output over every int16 value (encode) or every code (decode),
# recorded once with CPython 3.11's audioop.
AUDIOOP_SHA256 = {
    "lin2ulaw": "81d633c9e6972a18c74a58720b96cb8ca0bdd096d4060b646dd708c3b846019a",
    "lin2alaw": "38488f6fd710f4686360edc4d38639f96c491595ef93f8eb8d62d5e07ca6ce7b",
    "ulaw2lin": "3dab54339e520bb2c924826e3b72a917a2b612e9fd12fc867500f1d983a75827",
    "alaw2lin": "e04788d110e58ff8c70c93b8480190d973e3b67876b6119abbaec766cc75c174",
}


@pytest.mark.parametrize(
    ("sample", "ulaw", "alaw"),
    [
        (0, 0xFF, 0xD5),
        (-1, 0x7E, 0x55),  # the arithmetic shift makes -1 a magnitude of 1 in mu-law
        (4, 0xFE, 0xD5),
        (8, 0xFE, 0xD5),
        (100, 0xF2, 0xD3),
        (-100, 0x72, 0x53),
        (1000, 0xCE, 0xFA),
        (-5000, 0x2B, 0x06),
        (12345, 0x97, 0xBD),
        (32635, 0x80, 0xAA),
        (32767, 0x80, 0xAA),
        (-32768, 0x00, 0x2A),
    ],
)
def test_g711_encode_known_values(sample: int, ulaw: int, alaw: int) -> None:
    pcm = int16_to_pcm16([sample])
    assert lin2ulaw(pcm) == bytes([ulaw])
    assert lin2alaw(pcm) == bytes([alaw])


@pytest.mark.parametrize(
    ("code", "ulaw_value", "alaw_value"),
    [(0x00, -32124, -5504), (0x7F, 0, -848), (0x80, 32124, 5504), (0xFF, 0, 848),
     (0x55, -716, -8), (0xD5, 716, 8), (0xAA, 5372, 32256), (0x2A, -5372, -32256)],
)  # fmt: skip
def test_g711_decode_known_values(code: int, ulaw_value: int, alaw_value: int) -> None:
    assert pcm16_to_int16(ulaw2lin(bytes([code]))).tolist() == [ulaw_value]
    assert pcm16_to_int16(alaw2lin(bytes([code]))).tolist() == [alaw_value]


def test_g711_is_bit_exact_with_the_reference_algorithm_for_every_input() -> None:
    pcm = int16_to_pcm16(ALL_INT16)
    codes = bytes(range(256))
    values = ALL_INT16.tolist()
    assert lin2ulaw(pcm) == bytes(reference_lin2ulaw(v) for v in values)
    assert lin2alaw(pcm) == bytes(reference_lin2alaw(v) for v in values)
    assert ulaw2lin(codes) == int16_to_pcm16([reference_ulaw2lin(c) for c in codes])
    assert alaw2lin(codes) == int16_to_pcm16([reference_alaw2lin(c) for c in codes])


def test_g711_matches_recorded_audioop_output() -> None:
    pcm = int16_to_pcm16(ALL_INT16)
    codes = bytes(range(256))
    outputs = {
        "lin2ulaw": lin2ulaw(pcm),
        "lin2alaw": lin2alaw(pcm),
        "ulaw2lin": ulaw2lin(codes),
        "alaw2lin": alaw2lin(codes),
    }
    assert {k: hashlib.sha256(v).hexdigest() for k, v in outputs.items()} == AUDIOOP_SHA256


@given(samples_16)
def test_ulaw_round_trip_keeps_about_five_bits(values: list[int]) -> None:
    pcm = int16_to_pcm16(values)
    encoded = lin2ulaw(pcm)
    decoded = pcm16_to_int16(ulaw2lin(encoded)).astype(int)
    assert len(encoded) == len(values)
    for original, back in zip(values, decoded, strict=True):
        assert abs(back - original) <= 36 + 0.036 * abs(original)
    assert lin2ulaw(ulaw2lin(encoded)) == encoded  # decoding lands on the code


@given(samples_16)
def test_alaw_round_trip_keeps_about_five_bits(values: list[int]) -> None:
    encoded = lin2alaw(int16_to_pcm16(values))
    decoded = pcm16_to_int16(alaw2lin(encoded)).astype(int)
    for original, back in zip(values, decoded, strict=True):
        assert abs(back - original) <= 32 + 0.032 * abs(original)
    assert lin2alaw(alaw2lin(encoded)) == encoded


@given(st.binary(max_size=300))
def test_every_ulaw_byte_stream_decodes_and_reencodes(codes: bytes) -> None:
    decoded = ulaw2lin(codes)
    assert len(decoded) == 2 * len(codes)
    # 0x7F and 0xFF both mean zero; every other code survives a round trip.
    assert lin2ulaw(decoded) == codes.replace(b"\x7f", b"\xff")
