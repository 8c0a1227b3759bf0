"""The PocketSphinx decoders on /metrics (those of the worker processes, added up): how many
exist and are busy, and how often an utterance had to wait for one or gave up waiting
(`$VOICEHUB_STT_DECODERS` is the setting to raise when waits grow)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Protocol

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

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
