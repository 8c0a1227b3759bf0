"""The `cloud_pipeline` bench section runs (quick) and reports its figures under the
documented keys."""

from __future__ import annotations

import os

import pytest

from voicehub_dev.bench import cloud_pipeline

pytest.importorskip("deepgram")
os.environ.setdefault("HF_HUB_OFFLINE", "1")


@pytest.mark.slow
async def test_the_cloud_pipeline_section_reports_cpu_and_latency() -> None:
    figures = (await cloud_pipeline.run(quick=True))["cloud_pipeline"]
    for value in (
        figures["us_per_frame"],
        figures["offline_us_per_frame"],
        figures["harness_us_per_frame"],
        figures["v2v_latency_ms"]["median"],
        figures["providers"]["stt_us_per_frame"] + figures["providers"]["harness_us_per_frame"],
        figures["providers"]["tts_us_per_frame"],
        figures["providers"]["tts_us_per_frame_mulaw_8k"],
    ):
        assert isinstance(value, int | float) and value > 0
    # the fake's provider delays are in the latency: STT results, then the TTS first byte
    assert figures["v2v_latency_ms"]["median"] > 1000 * (
        cloud_pipeline.STT_DELAY_S + cloud_pipeline.TTS_FIRST_BYTE_S
    )
    # the pinned ramp reports each step it ran (4 calls, quick), carried or not
    assert set(figures["calls_ramp_detail"]) == {"4"}
    assert figures["calls_per_core"] in (0, 4)
