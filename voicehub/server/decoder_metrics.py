"""The offline recognizers on /metrics. PocketSphinx's decoders (those of its worker
processes, added up): how many exist and are busy, and how often an utterance had to wait
for one or gave up waiting (`$VOICEHUB_STT_DECODERS` is the setting to raise when waits
grow). Whisper's decoding queue: how much waits, and the time spent decoding."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Protocol

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from voicehub.voice.providers.offline.decode_queue import DecodeQueue
from voicehub.voice.providers.offline.decoder_pool import PoolStats
from voicehub.voice.providers.offline.sphinx_workers import built_shared_workers


class Decoders(Protocol):
    """A decoder pool, or worker processes with theirs."""

    @property
    def max_decoders(self) -> int: ...

    def stats(self) -> PoolStats: ...


class DecoderPoolCollector(Collector):
    """Reads the decoders' counters at each scrape; nothing while none were set up (a server
    whose desks use no PocketSphinx never starts its workers)."""

    def __init__(self, pool: Callable[[], Decoders | None] = built_shared_workers) -> None:
        self._pool = pool

    def collect(self) -> Iterator[Metric]:
        pool = self._pool()
        if pool is None:
            return
        stats = pool.stats()
        gauges: dict[str, tuple[str, float]] = {
            "voicehub_stt_decoders": ("PocketSphinx decoders built (busy or idle).", stats.built),
            "voicehub_stt_decoders_busy": ("Decoders lent to an utterance now.", stats.busy),
            "voicehub_stt_decoders_busy_peak": ("Most decoders busy at once.", stats.peak_busy),
            "voicehub_stt_decoder_waiters": (
                "Utterances waiting for a decoder now.",
                stats.waiting,
            ),
            "voicehub_stt_decoders_max": ("The pool's limit.", pool.max_decoders),
        }
        for name, (text, value) in gauges.items():
            yield GaugeMetricFamily(name, text, value=value)
        counters: dict[str, tuple[str, float]] = {
            "voicehub_stt_decoder_acquisitions": ("Decoders lent.", stats.acquired),
            "voicehub_stt_decoder_waits": ("Lendings that found every decoder busy.", stats.waits),
            "voicehub_stt_decoder_wait_seconds": (
                "Time spent waiting for a decoder.",
                stats.wait_seconds,
            ),
            "voicehub_stt_decoder_timeouts": (
                "Utterances dropped after waiting too long for a decoder.",
                stats.timeouts,
            ),
        }
        for name, (text, value) in counters.items():
            yield CounterMetricFamily(name, text, value=value)


class WhisperQueueCollector(Collector):
    """Whisper's decoding queue (`voicehub.voice.providers.offline.decode_queue`): work
    waiting, the oldest final waiting for a decoder, decodings run and the time they took;
    nothing while no desk used Whisper."""

    def __init__(self, queue: Callable[[], DecodeQueue | None] | None = None) -> None:
        self._queue = queue or _shared_whisper_queue

    def collect(self) -> Iterator[Metric]:
        queue = self._queue()
        if queue is None:
            return
        stats = queue.stats()
        gauges: dict[str, tuple[str, float]] = {
            "voicehub_whisper_workers": ("Threads decoding Whisper.", stats.workers),
            "voicehub_whisper_queued": ("Decodings waiting for a thread.", stats.queued),
            "voicehub_whisper_finals_queued": (
                "Final transcripts waiting for a thread.",
                stats.finals_queued,
            ),
            "voicehub_whisper_oldest_final_wait_seconds": (
                "How long the oldest waiting final has waited.",
                stats.oldest_final_wait,
            ),
        }
        for name, (text, value) in gauges.items():
            yield GaugeMetricFamily(name, text, value=value)
        counters: dict[str, tuple[str, float]] = {
            "voicehub_whisper_decodings": ("Decodings run.", stats.jobs),
            "voicehub_whisper_busy_seconds": (
                "Time the threads spent decoding.",
                stats.busy_seconds,
            ),
            "voicehub_whisper_superseded": (
                "Decodings dropped for a newer one of the same call.",
                stats.superseded,
            ),
        }
        for name, (text, value) in counters.items():
            yield CounterMetricFamily(name, text, value=value)


def _shared_whisper_queue() -> DecodeQueue | None:
    from voicehub.voice.providers.offline.whisper_engine import built_shared_recognizer

    recognizer = built_shared_recognizer()
    return recognizer.queue if recognizer is not None else None
