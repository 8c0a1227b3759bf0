"""A bounded pool of PocketSphinx decoders, shared by every call of a process.

A decoder loads the en-us model shipped in the wheel: about 85 MB and one second each. A
stream takes one only while an utterance is being decoded and gives it back once its final
result is out, so memory follows the utterances decoded at once, not the live calls.

The pool builds decoders on demand up to ``max_decoders`` and keeps them. When all are busy
a new utterance waits (its audio stays queued, nothing is dropped) for at most
``wait_timeout`` seconds, in FIFO order; the wait is counted in :class:`PoolStats` and
logged. Waiting is the right answer to exhaustion here: decoding holds the GIL (about 1.5 ms
per 20 ms frame), so on a small machine more decoders at once would not decode faster,
they would only take more memory.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from voicehub.errors import ConfigError, VoicehubError
from voicehub.voice.providers import vendor_import
from voicehub.voice.providers.offline.environment import whole_number

__all__ = [
    "DECODERS_ENV",
    "DecoderPool",
    "DecoderPoolExhausted",
    "PoolStats",
    "decoders_from_environment",
    "shared_pool",
]

log = logging.getLogger("voicehub.voice.stt")

DEFAULT_MAX_DECODERS = 16  # about 1.4 GB; 2 cores decode about 12 utterances at once
DECODERS_ENV = "VOICEHUB_STT_DECODERS"
_LOG_EVERY = 10.0  # seconds between warnings while the pool stays exhausted


class DecoderPoolExhausted(VoicehubError):
    """Every decoder stayed busy for the whole wait."""


@dataclass
class PoolStats:
    """What the pool did so far (a snapshot)."""

    built: int = 0  # decoders alive (busy or idle)
    busy: int = 0
    waiting: int = 0  # acquisitions waiting now
    peak_busy: int = 0
    acquired: int = 0
    waits: int = 0  # acquisitions that found every decoder busy
    wait_seconds: float = 0.0  # total time they waited
    max_wait_seconds: float = 0.0
    timeouts: int = 0  # waits that gave up
    oldest_wait_seconds: float = 0.0  # how long the oldest waiting acquisition has waited
    decode_seconds: float = 0.0  # time spent decoding (worker processes report it)


class _Waiter:
    """One acquisition waiting for a decoder: a thread (event) or a task (future)."""

    def __init__(self, future: asyncio.Future[Any] | None = None) -> None:
        self.future = future
        self.event = threading.Event() if future is None else None
        self.decoder: Any = None
        self.since = time.monotonic()

    def hand(self, decoder: Any, pool: DecoderPool) -> None:
        self.decoder = decoder
        if self.event is not None:
            self.event.set()
            return
        assert self.future is not None
        future = self.future

        def settle() -> None:
            if future.done():  # cancelled meanwhile: the decoder goes to the next one
                pool.release(decoder, reset=False)
            else:
                future.set_result(decoder)

        future.get_loop().call_soon_threadsafe(settle)


class DecoderPool:
    """Idle PocketSphinx decoders, built on demand up to ``max_decoders``.

    A released decoder gets its features and cepstral mean reset, so a result never
    depends on which call used the decoder before. ``decoder_options`` go to
    ``pocketsphinx.Decoder``; ``build`` replaces it (tests).
    """

    def __init__(
        self,
        *,
        max_decoders: int = DEFAULT_MAX_DECODERS,
        wait_timeout: float = 30.0,
        build: Callable[[], Any] | None = None,
        **decoder_options: Any,
    ) -> None:
        if max_decoders < 1:
            raise ConfigError(f"a decoder pool needs at least one decoder, got {max_decoders}")
        self.max_decoders = max_decoders
        self.wait_timeout = wait_timeout
        self._options: dict[str, Any] = {"loglevel": "FATAL", **decoder_options}
        self._build_decoder = build or self._new_decoder
        self._idle: list[Any] = []
        self._waiters: deque[_Waiter] = deque()
        self._lock = threading.Lock()
        self._initial_cmn: str | None = None
        self._stats = PoolStats()
        self._warned_at = -_LOG_EVERY

    # -- taking and giving back ----------------------------------------------------------

    def acquire(self, timeout: float | None = None) -> Any:
        """A decoder (blocking): an idle one, a new one, or the next one released within
        ``timeout`` seconds (default ``wait_timeout``; DecoderPoolExhausted after)."""
        waiter = _Waiter()
        outcome = self._take_or_queue(waiter)
        if outcome == "idle":
            return waiter.decoder
        if outcome == "build":
            return self._build_counted()
        assert waiter.event is not None
        waiter.event.wait(self.wait_timeout if timeout is None else timeout)
        with self._lock:
            timed_out = waiter in self._waiters
            if timed_out:
                self._waiters.remove(waiter)
            self._count_wait(waiter, timed_out)
        if timed_out:
            raise self._exhausted(waiter)
        return waiter.decoder

    def try_acquire(self) -> Any:
        """An idle decoder, or a new one while under the cap (blocking while it builds,
        about a second), or None when every decoder is busy: never waits."""
        with self._lock:
            stats = self._stats
            if self._idle:
                decoder = self._idle.pop()
            elif stats.built < self.max_decoders:
                stats.built += 1
                decoder = None
            else:
                return None
            stats.acquired += 1
            stats.busy += 1
            stats.peak_busy = max(stats.peak_busy, stats.busy)
        return decoder if decoder is not None else self._build_counted()

    async def acquire_async(self, timeout: float | None = None) -> Any:
        """Like :meth:`acquire` without blocking the event loop while it waits (building
        a decoder still stalls it about a second: PocketSphinx holds the GIL)."""
        loop = asyncio.get_running_loop()
        waiter = _Waiter(loop.create_future())
        outcome = self._take_or_queue(waiter)
        if outcome == "idle":
            return waiter.decoder
        if outcome == "build":
            return await asyncio.to_thread(self._build_counted)
        future = waiter.future
        assert future is not None
        limit = self.wait_timeout if timeout is None else timeout
        timer = loop.call_later(limit, self._expire, waiter)
        try:
            return await future
        except asyncio.CancelledError:
            self._abandon(waiter)
            raise
        finally:
            timer.cancel()

    def release(self, decoder: Any, *, reset: bool = True) -> None:
        """Give a decoder back (it must not be in an utterance); the oldest waiter gets it."""
        if reset:
            # Resetting the mean alone left state behind: after a live phone call, the next
            # whole-recording recognition of phone audio on the decoder came out as noise.
            decoder.reinit_feat()
            if self._initial_cmn is not None:
                decoder.set_cmn(self._initial_cmn)
        with self._lock:
            while self._waiters:
                waiter = self._waiters.popleft()
                if waiter.future is not None and waiter.future.done():
                    continue  # gave up already
                waiter.hand(decoder, self)
                return
            self._stats.busy -= 1
            self._idle.append(decoder)

    def prewarm(self, count: int = 1) -> None:
        """Build decoders until ``count`` are idle (blocking, up to the cap).

        Building one holds the GIL for 0.4-1.2 s even in a worker thread, stalling the
        event loop, so a server should prewarm at startup rather than on a call's first frame.
        """
        with self._lock:
            missing = min(count - len(self._idle), self.max_decoders - self._stats.built)
            missing = max(0, missing)
            self._stats.built += missing
        for _ in range(missing):
            decoder = self._build_decoder()
            with self._lock:
                self._idle.append(decoder)

    def stats(self) -> PoolStats:
        """A snapshot of the counters."""
        with self._lock:
            snapshot = PoolStats(**vars(self._stats))
            snapshot.waiting = len(self._waiters)
            return snapshot

    # -- internals ---------------------------------------------------------------------------

    def _take_or_queue(self, waiter: _Waiter) -> str:
        """Under the lock: "idle" (handed over), "build" (room to build one) or "wait"."""
        with self._lock:
            stats = self._stats
            stats.acquired += 1
            if self._idle:
                waiter.decoder = self._idle.pop()
                outcome = "idle"
            elif stats.built < self.max_decoders:
                stats.built += 1
                outcome = "build"
            else:
                stats.waits += 1
                self._waiters.append(waiter)
                self._warn_exhausted(waiter.since)
                return "wait"
            stats.busy += 1
            stats.peak_busy = max(stats.peak_busy, stats.busy)
            return outcome

    def _warn_exhausted(self, now: float) -> None:
        if now - self._warned_at < _LOG_EVERY:
            return
        self._warned_at = now
        log.warning(
            "all %d PocketSphinx decoders are busy: utterances wait for one (%d waits so "
            "far; raise %s for more decoders, about 85 MB each)",
            self.max_decoders,
            self._stats.waits,
            DECODERS_ENV,
        )

    def _count_wait(self, waiter: _Waiter, timed_out: bool) -> None:
        """Under the lock: the wait's time, and whether it gave up."""
        waited = time.monotonic() - waiter.since
        stats = self._stats
        stats.wait_seconds += waited
        stats.max_wait_seconds = max(stats.max_wait_seconds, waited)
        stats.timeouts += timed_out

    def _expire(self, waiter: _Waiter) -> None:
        """On the waiting task's loop: give up if no decoder was handed over yet."""
        with self._lock:
            if waiter not in self._waiters:
                return  # handed over: the result is on its way
            self._waiters.remove(waiter)
            self._count_wait(waiter, True)
        error = self._exhausted(waiter)
        assert waiter.future is not None
        if not waiter.future.done():
            waiter.future.set_exception(error)

    def _abandon(self, waiter: _Waiter) -> None:
        """The waiting task was cancelled: leave the queue, or pass on what it was handed."""
        with self._lock:
            if waiter in self._waiters:
                self._waiters.remove(waiter)
                return
        future = waiter.future
        assert future is not None
        if future.done() and not future.cancelled() and future.exception() is None:
            self.release(future.result(), reset=False)
        else:
            future.cancel()  # the handover still to come sees it and passes the decoder on

    def _exhausted(self, waiter: _Waiter) -> DecoderPoolExhausted:
        message = (
            f"no PocketSphinx decoder came free in {time.monotonic() - waiter.since:.1f} s: all "
            f"{self.max_decoders} are busy (raise {DECODERS_ENV} for more, about 85 MB each)"
        )
        log.error("%s", message)
        return DecoderPoolExhausted(message)

    def _build_counted(self) -> Any:
        try:
            return self._build_decoder()
        except BaseException:
            with self._lock:
                self._stats.built -= 1
                self._stats.busy -= 1
            raise

    def _new_decoder(self) -> Any:
        with vendor_import("pocketsphinx"):
            from pocketsphinx import Decoder

        decoder = Decoder(**self._options)
        if self._initial_cmn is None:
            self._initial_cmn = decoder.get_cmn(False)
        return decoder


def decoders_from_environment() -> int:
    """`$VOICEHUB_STT_DECODERS`, or the default when unset (ConfigError when not a whole
    number of 1 or more)."""
    return whole_number(DECODERS_ENV, DEFAULT_MAX_DECODERS)


_shared_pool: DecoderPool | None = None
_shared_lock = threading.Lock()


def shared_pool() -> DecoderPool:
    """The process-wide decoder pool used by default (at most ``$VOICEHUB_STT_DECODERS``
    decoders, 16 when unset)."""
    global _shared_pool
    with _shared_lock:
        if _shared_pool is None:
            _shared_pool = DecoderPool(max_decoders=decoders_from_environment())
        return _shared_pool


def built_shared_pool() -> DecoderPool | None:
    """The process-wide pool if something built it already, else None (never builds it)."""
    return _shared_pool
