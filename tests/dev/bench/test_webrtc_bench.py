"""The `webrtc` bench section runs and reports its figures under the documented keys."""

from __future__ import annotations

import os

import pytest

from voicehub_dev.bench import webrtc

pytest.importorskip("aiortc")
os.environ.setdefault("HF_HUB_OFFLINE", "1")


async def test_the_webrtc_section_reports_both_transports_per_frame() -> None:
    figures = (await webrtc.run(quick=True))["webrtc"]
    assert figures["frames"] > 100  # a few seconds of speech, frame by frame
    # Opus both ways costs far more than queueing PCM for a socket
    assert figures["us_per_frame"] > figures["websocket_us_per_frame"] > 0
    assert figures["calls_per_core"] == int(20_000 / figures["us_per_frame"])
    # aiortc's decode and our encode, each alone, are parts of the whole
    assert 0 < figures["decode_us_per_frame"] < figures["us_per_frame"]
    assert 0 < figures["encode_us_per_frame"] < figures["us_per_frame"]
