"""The offline recognizers' load (the admission signal) and their queue on /metrics, on an
injected clock."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from voicehub.server.decoder_metrics import WhisperQueueCollector
from voicehub.voice.providers.offline.decode_queue import DecodeQueue, Urgency
from voicehub.voice.providers.offline.recognizer_load import (
    DEFAULT_MAX_LOAD,
    Capacity,
    RecognizerLoad,
    offline_recognizer_load,
)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_load_is_the_busiest_recognizers_share_of_its_time() -> None:
    clock = Clock()
    whisper = {"busy": 0.0}
    sphinx: dict[str, Capacity | None] = {"now": None}
    load = RecognizerLoad(
        [lambda: Capacity(whisper["busy"], 1), lambda: sphinx["now"]],
        min_window=2.0,
        clock=clock,
    )
    assert load() == 0.0  # the first reading only starts the count
    clock.now += 4.0
    whisper["busy"] = 2.0  # half of one decoder's time
    assert load() == 0.5
    clock.now += 1.0
    whisper["busy"] = 3.0
    assert load() == 0.5  # under the window: the previous figure
    clock.now += 1.0
    whisper["busy"] = 4.0  # 2 s of decoding over 2 s: never idle
    assert load() == 1.0
    sphinx["now"] = Capacity(10.0, 2)
    clock.now += 2.0
    whisper["busy"] = 4.0
    assert load() == 0.0  # PocketSphinx's first reading; Whisper idle
    sphinx["now"] = Capacity(13.0, 2)  # 3 s over 2 processes and 2 s
    clock.now += 2.0
    assert load() == 0.75
    assert 0.75 < DEFAULT_MAX_LOAD < 1.0


def test_a_final_waiting_a_second_means_full_at_once() -> None:
    clock = Clock()
    load = RecognizerLoad([lambda: Capacity(0.0, 1, oldest_final_wait=1.5)], clock=clock)
    assert load() == 1.0


def test_recognizers_not_in_use_weigh_nothing() -> None:
    assert offline_recognizer_load(clock=Clock())() >= 0.0


def test_the_whisper_queue_is_scraped() -> None:
    queue = DecodeQueue(1)
    finished = threading.Event()

    def done(result: Any, error: BaseException | None) -> None:
        finished.set()

    queue.submit(object(), Urgency.FINAL, lambda: "words", done)
    assert finished.wait(10)
    registry = CollectorRegistry()
    registry.register(WhisperQueueCollector(lambda: queue))
    figures = {
        sample.name: sample.value
        for family in text_string_to_metric_families(generate_latest(registry).decode())
        for sample in family.samples
    }
    assert figures["voicehub_whisper_workers"] == 1
    assert figures["voicehub_whisper_decodings_total"] == 1
    assert figures["voicehub_whisper_queued"] == 0
    empty = CollectorRegistry()
    empty.register(WhisperQueueCollector(lambda: None))
    assert b"voicehub_whisper" not in generate_latest(empty)


def test_calls_just_admitted_count_at_what_a_call_has_cost_before() -> None:
    clock = Clock()
    whisper = {"busy": 0.0}
    calls = [10]
    load = RecognizerLoad(
        [lambda: Capacity(whisper["busy"], 1)],
        min_window=2.0,
        clock=clock,
        calls=lambda: calls[0],
        learn_seconds=4.0,
    )
    assert load() == 0.0 and load.per_call is None  # nothing measured, nothing learned
    clock.now += 2.0
    whisper["busy"] += 1.0  # ten calls keep the decoder busy half the time
    assert load() == 0.5 and load.per_call == 0.05
    calls[0] = 16  # six more admitted: still in their greetings, nothing decoded yet
    assert load() == pytest.approx(0.8)  # 16 calls at 0.05 each, measured or not
    clock.now += 2.0
    whisper["busy"] += 1.0  # the same half share over 16 calls: a call costs less
    assert load.per_call == 0.05
    assert load() == pytest.approx(16 * 0.0406, abs=1e-3)
    assert load.per_call == pytest.approx(0.05 + 0.5 * (0.5 / 16 - 0.05))


def test_windows_without_calls_or_without_decoding_teach_nothing() -> None:
    clock = Clock()
    whisper = {"busy": 0.0}
    calls = [0]
    load = RecognizerLoad(
        [lambda: Capacity(whisper["busy"], 1)], clock=clock, calls=lambda: calls[0]
    )
    load()
    clock.now += 2.0
    whisper["busy"] += 1.0  # a decoding finished after its call ended
    assert load() == 0.5 and load.per_call is None
    calls[0] = 8  # a burst of callers, all in their greetings: nothing decoded
    clock.now += 2.0
    assert load() == 0.0 and load.per_call is None
    clock.now += 2.0
    whisper["busy"] += 0.8  # their first requests
    assert load() == 0.4 and load.per_call == pytest.approx(0.05)


async def test_moonshines_first_lane_is_a_recognizer_the_load_reads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Moonshine decodes the calls of `stt = "auto"`: admission that did not read its queue
    # saw an idle machine at any count and admitted every caller.
    from types import SimpleNamespace

    from tests.support.waiting import until
    from voicehub.voice.providers.offline import moonshine_stt

    queue = DecodeQueue(1, second_lane=1)
    monkeypatch.setattr(
        moonshine_stt, "built_shared_moonshine", lambda: SimpleNamespace(queue=queue)
    )
    clock = Clock()
    load = offline_recognizer_load(clock=clock)
    assert load() == 0.0  # the first reading only starts the count
    queue.submit(object(), Urgency.SECOND, lambda: "heard again", lambda *_: None)
    await until(lambda: queue.stats().jobs == 1, what="the second opinion")
    clock.now += 2.0
    assert load() == 0.0  # a second opinion is not the calls' decoding (it can be skipped)
    queue.submit(object(), Urgency.FINAL, lambda: "words", lambda *_: None)
    await until(lambda: queue.stats().jobs == 2, what="the final")
    clock.now += 2.0
    assert load() > 0.0
