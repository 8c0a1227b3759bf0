"""The offline-load bench's arithmetic: the loop-lag percentile from two readings of the
server's histogram, and the desk files it serves."""

from __future__ import annotations

from pathlib import Path

from voicehub.desks.desk import load_desks
from voicehub_dev.bench.offline_load import _channels_with, _percentile_bound


def test_the_percentile_is_the_bucket_bound_the_share_falls_under() -> None:
    before = {0.01: 100.0, 0.05: 100.0, 0.1: 100.0, float("inf"): 100.0}
    # since then: 980 lags under 10 ms, 15 more under 50 ms, 5 more under 100 ms
    after = {0.01: 1080.0, 0.05: 1095.0, 0.1: 1100.0, float("inf"): 1100.0}
    assert _percentile_bound(before, after, 0.98) == 0.01
    assert _percentile_bound(before, after, 0.99) == 0.05
    assert _percentile_bound(before, after, 0.999) == 0.1
    assert _percentile_bound(after, after, 0.99) is None  # nothing observed between


def test_the_bench_serves_the_example_desks_with_the_chosen_recognizer(tmp_path: Path) -> None:
    channels = _channels_with(tmp_path / "channels", "pocketsphinx")
    desks = load_desks(channels)
    assert desks["research"].config.voice.stt == "pocketsphinx"
    assert desks["triage"].config.voice.stt == "auto"
