"""The worker's metrics: livekit's Prometheus endpoint in multiprocess mode, fed by each job
process' turn histograms: two job processes' turns are summed in one scrape."""

from __future__ import annotations

import multiprocessing
import os
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest, multiprocess
from prometheus_client.parser import text_string_to_metric_families

from voicehub.workers.server import metrics_options
from voicehub.workers.settings import WorkerSettings


def job_process(turns: int) -> None:
    """A job process: its own prometheus_client, writing to the folder its environment
    names (the worker sets it before any job process starts)."""
    from voicehub.telemetry.turn_metrics import TurnMetrics
    from voicehub.voice.engine.latency import TurnLatency

    observer = TurnMetrics(registry=None).observer("research", "livekit")
    for turn in range(turns):
        observer.turn_measured(
            TurnLatency("research:a", turn, 1.0, end_of_turn_delay=0.2, voice_to_voice=0.9)
        )


@pytest.mark.slow
def test_job_processes_turns_are_summed_in_one_scrape(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))
    context = multiprocessing.get_context("spawn")  # fresh interpreters, as job processes
    jobs = [context.Process(target=job_process, args=(n,)) for n in (2, 3)]
    for job in jobs:
        job.start()
    for job in jobs:
        job.join(60)
        assert job.exitcode == 0
    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry, path=str(tmp_path))
    found = {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(generate_latest(registry).decode())
        for sample in family.samples
    }
    labels = (("desk", "research"), ("stage", "voice_to_voice"), ("transport", "livekit"))
    assert found[("voicehub_turn_stage_seconds_count", labels)] == 5
    assert (
        found[("voicehub_turn_stage_seconds_bucket", (*labels[:1], ("le", "1.0"), *labels[1:]))]
        == 5
    )
    answered = (("desk", "research"), ("interrupted", "false"), ("transport", "livekit"))
    assert found[("voicehub_turns_answered_total", answered)] == 5


def test_the_metrics_port_turns_multiprocess_mode_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PROMETHEUS_MULTIPROC_DIR", raising=False)
    assert metrics_options(WorkerSettings()) == {}
    settings = WorkerSettings(metrics_port=9100, metrics_dir=tmp_path)
    assert metrics_options(settings) == {
        "prometheus_port": 9100,
        "prometheus_multiproc_dir": str(tmp_path),
    }
    assert os.environ["PROMETHEUS_MULTIPROC_DIR"] == str(tmp_path)
    monkeypatch.setenv("VOICEHUB_WORKER_METRICS_PORT", "9101")
    assert WorkerSettings.from_env().metrics_port == 9101
