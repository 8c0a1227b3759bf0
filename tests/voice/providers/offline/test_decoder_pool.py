"""The bounded decoder pool: built on demand up to its cap, then FIFO waits with a bound.

Stand-in decoders keep these fast; the PocketSphinx ones are covered by test_offline_stt.
Waits that must give up use a timeout of 0 (the next loop turn), never wall-clock time.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any

import pytest

from voicehub.errors import ConfigError
from voicehub.voice.providers.offline import decoder_pool
from voicehub.voice.providers.offline.decoder_pool import DecoderPool, DecoderPoolExhausted


class FakeDecoder:
    def __init__(self, number: int) -> None:
        self.number = number
        self.resets = 0
        self.cmn = ""

    def reinit_feat(self) -> None:
        self.resets += 1

    def set_cmn(self, cmn: str) -> None:
        self.cmn = cmn


def pool_of(cap: int, **options: Any) -> DecoderPool:
    built: list[FakeDecoder] = []

    def build() -> FakeDecoder:
        built.append(FakeDecoder(len(built)))
        return built[-1]

    return DecoderPool(max_decoders=cap, build=build, **options)


def test_builds_on_demand_up_to_the_cap_and_reuses_released_ones() -> None:
    pool = pool_of(2)
    first, second = pool.acquire(), pool.acquire()
    assert first is not second
    pool.release(first)
    assert first.resets == 1  # reset before anyone else gets it
    assert pool.acquire() is first
    stats = pool.stats()
    assert (stats.built, stats.busy, stats.peak_busy, stats.acquired) == (2, 2, 2, 3)


def test_prewarm_stops_at_the_cap() -> None:
    pool = pool_of(3)
    pool.prewarm(5)
    assert pool.stats().built == 3
    held = [pool.acquire() for _ in range(3)]
    assert len({id(decoder) for decoder in held}) == 3
    assert pool.stats().built == 3


async def test_an_exhausted_pool_hands_released_decoders_to_waiters_in_order() -> None:
    pool = pool_of(1)
    only = await pool.acquire_async()
    first = asyncio.create_task(pool.acquire_async())
    second = asyncio.create_task(pool.acquire_async())
    await asyncio.sleep(0)  # both queue
    assert pool.stats().waiting == 2
    pool.release(only)
    assert await first is only
    assert not second.done()
    pool.release(only)
    assert await second is only
    stats = pool.stats()
    assert (stats.built, stats.waits, stats.timeouts, stats.waiting) == (1, 2, 0, 0)


async def test_a_wait_gives_up_at_its_bound_with_a_clear_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    pool = pool_of(1)
    held = await pool.acquire_async()
    busy = r"all 1 are busy \(raise VOICEHUB_STT_DECODERS"
    with (
        caplog.at_level(logging.WARNING, "voicehub.voice.stt"),
        pytest.raises(DecoderPoolExhausted, match=busy),
    ):
        await pool.acquire_async(timeout=0)
    assert "all 1 PocketSphinx decoders are busy" in caplog.text
    assert pool.stats().timeouts == 1 and pool.stats().waiting == 0
    pool.release(held)  # nobody waits any more: it goes back to idle
    assert await pool.acquire_async(timeout=0) is held


async def test_a_cancelled_waiter_passes_its_decoder_on() -> None:
    pool = pool_of(1)
    held = await pool.acquire_async()
    gone = asyncio.create_task(pool.acquire_async())
    next_one = asyncio.create_task(pool.acquire_async())
    await asyncio.sleep(0)
    pool.release(held)  # handed to `gone`, which is cancelled before it runs
    gone.cancel()
    assert await next_one is held
    with pytest.raises(asyncio.CancelledError):
        await gone


def test_a_thread_waits_for_a_decoder_released_by_another() -> None:
    pool = pool_of(1)
    held = pool.acquire()
    got: list[Any] = []
    waiter = threading.Thread(target=lambda: got.append(pool.acquire(timeout=60)))
    waiter.start()
    while pool.stats().waiting == 0:  # until the thread queued
        threading.Event().wait(0.001)
    pool.release(held)
    waiter.join()
    assert got == [held]


def test_a_thread_wait_gives_up_at_its_bound() -> None:
    pool = pool_of(1)
    pool.acquire()
    with pytest.raises(DecoderPoolExhausted, match="no PocketSphinx decoder came free"):
        pool.acquire(timeout=0)
    assert pool.stats().waiting == 0


def test_the_shared_pool_size_comes_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(decoder_pool, "_shared_pool", None)
    monkeypatch.setenv("VOICEHUB_STT_DECODERS", "3")
    assert decoder_pool.shared_pool().max_decoders == 3
    monkeypatch.setattr(decoder_pool, "_shared_pool", None)
    monkeypatch.setenv("VOICEHUB_STT_DECODERS", "many")
    with pytest.raises(ConfigError, match="VOICEHUB_STT_DECODERS='many': expected a whole"):
        decoder_pool.shared_pool()
    with pytest.raises(ConfigError, match="at least one decoder"):
        DecoderPool(max_decoders=0)
