"""Tests for voicehub.voice.audio.framing."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from voicehub.errors import ProtocolError
from voicehub.voice.audio.framing import FrameSplitter, check_frame, frame_bytes


def test_frame_sizes() -> None:
    assert frame_bytes(16000) == 640
    assert frame_bytes(8000, sample_width=1) == 160
    assert frame_bytes(48000, 10) == 960
    with pytest.raises(ValueError, match="not a whole number of samples"):
        frame_bytes(22050, 1)


def test_check_frame_names_the_size() -> None:
    check_frame(bytes(640), 16000)
    with pytest.raises(ProtocolError, match=r"PCM16 frame has 500 bytes: expected 640 \(20 ms"):
        check_frame(bytes(500), 16000)
    with pytest.raises(ProtocolError, match="8-bit frame has 100 bytes: expected 160"):
        check_frame(bytes(100), 8000, sample_width=1)


@given(chunks=st.lists(st.binary(max_size=1500), max_size=20))
def test_frame_splitter_cuts_fixed_frames_and_keeps_the_rest(chunks: list[bytes]) -> None:
    splitter = FrameSplitter(16000)
    frames = [frame for chunk in chunks for frame in splitter.push(chunk)]
    stream = b"".join(chunks)
    assert all(len(frame) == 640 for frame in frames)
    assert b"".join(frames) == stream[: len(frames) * 640]
    assert splitter.pending == len(stream) % 640
    last = splitter.flush()
    if len(stream) % 640:
        assert last == stream[len(frames) * 640 :].ljust(640, b"\x00")
    else:
        assert last is None
    assert splitter.pending == 0


def test_frame_splitter_flush_without_padding() -> None:
    splitter = FrameSplitter(8000, sample_width=1)
    assert splitter.push(bytes(200)) == [bytes(160)]
    assert splitter.flush(pad=False) == bytes(40)
