"""A PocketSphinx worker process: the recognizers of the streams a server hands it.

PocketSphinx holds the GIL while it decodes (measured: two threads decoding take longer
than one doing both, and a third thread waits up to 120 ms for the GIL), so the server
decodes in processes of its own (`sphinx_workers`). Each runs `serve`: it reads batches of
operations from one pipe, feeds each stream's audio to its `SphinxRecognizer` over decoders
lent per utterance from the process's `DecoderPool`, and writes the partials and finals
back on another. When every decoder is busy, a stream's audio waits in its recognizer and
a flush waits behind it (first come, first served) for up to the pool's `wait_timeout`;
then the utterance is dropped, with an error in the log, as in the server before.

Run as `python -m voicehub.voice.providers.offline.sphinx_process READ_FD WRITE_FD
MAX_DECODERS WAIT_TIMEOUT`; it ends when the server closes its pipe.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import sys
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from voicehub.voice.providers.offline.decode_queue import DECODER_NICE
from voicehub.voice.providers.offline.decoder_pool import DecoderPool, PoolStats
from voicehub.voice.providers.offline.sphinx_wire import (
    Audio,
    Close,
    Flush,
    Flushed,
    Heard,
    Open,
    Prewarm,
    Prewarmed,
    Recognize,
    Recognized,
    StreamFailed,
    read_batch,
    write_batch,
)
from voicehub.voice.providers.offline.stt_engine import SphinxRecognizer, recognize_pcm

__all__ = ["WorkerState", "serve"]

log = logging.getLogger("voicehub.voice.stt")

STATS_EVERY = 1.0  # seconds between the pool counters sent back when nothing else is


@dataclass
class _Stream:
    recognizer: SphinxRecognizer
    inbox: deque[Audio | Flush] = field(default_factory=deque)
    waiting_since: float | None = None  # waiting for a decoder since (monotonic seconds)


class WorkerState:
    """The streams and decoders of one worker process; `handle` takes a batch of
    operations and returns the replies (no I/O: `serve` does that)."""

    def __init__(self, pool: DecoderPool) -> None:
        self.pool = pool
        self._waits = PoolStats()  # the waiting counters (the pool lends without waiting)
        self._streams: dict[int, _Stream] = {}
        self._waiting: deque[int] = deque()  # streams waiting for a decoder, in order
        self._requests: deque[Recognize] = deque()  # whole recordings waiting for one
        self.decode_seconds = 0.0  # CPU time spent handling batches (decoding, mostly)

    def handle(self, batch: list[Any], now: float) -> list[Any]:
        """Apply `batch` in order; the replies it produced."""
        replies: list[Any] = []
        for op in batch:
            if isinstance(op, Open):
                self._streams[op.stream] = _Stream(
                    SphinxRecognizer(None, gate=op.gate, endpoint_silence=op.endpoint_silence)
                )
            elif isinstance(op, Audio | Flush):
                stream = self._streams.get(op.stream)
                if stream is not None:  # in the order they came, across streams
                    stream.inbox.append(op)
                    self._drain(op.stream, replies, now)
            elif isinstance(op, Close):
                self._close(op.stream)
            elif isinstance(op, Recognize):
                self._requests.append(op)
            elif isinstance(op, Prewarm):
                replies.append(self._prewarm(op))
            self._serve_waiting(replies, now)
        return replies

    def expire(self, now: float) -> list[Any]:
        """Drop the utterances that waited too long for a decoder; the replies."""
        replies: list[Any] = []
        for stream_id in list(self._waiting):
            stream = self._streams.get(stream_id)
            if stream is None or stream.waiting_since is None:
                continue
            waited = now - stream.waiting_since
            if waited < self.pool.wait_timeout:
                continue
            log.error(
                "no PocketSphinx decoder came free in %.1f s: all %d are busy; an utterance "
                "was dropped (raise VOICEHUB_STT_DECODERS for more, about 85 MB each)",
                waited,
                self.pool.max_decoders,
            )
            self._waiting.remove(stream_id)
            self._waited(stream, now)
            self._waits.timeouts += 1
            stream.recognizer.drop_waiting()
            self._drain(stream_id, replies, now)
        return replies

    @property
    def streams(self) -> int:
        """Streams open now."""
        return len(self._streams)

    def stats(self, now: float) -> PoolStats:
        """The pool's counters with this process's waiting ones."""
        stats = self.pool.stats()
        waits = self._waits
        stats.waiting = len(self._waiting)
        stats.waits, stats.timeouts = waits.waits, waits.timeouts
        stats.wait_seconds, stats.max_wait_seconds = waits.wait_seconds, waits.max_wait_seconds
        for stream_id in self._waiting:
            since = self._streams[stream_id].waiting_since
            if since is not None:
                stats.oldest_wait_seconds = max(stats.oldest_wait_seconds, now - since)
        stats.decode_seconds = self.decode_seconds
        return stats

    # -- internals ---------------------------------------------------------------------------

    def _drain(self, stream_id: int, replies: list[Any], now: float) -> None:
        """Handle the stream's queued operations until one must wait for a decoder."""
        stream = self._streams.get(stream_id)
        if stream is None or stream.waiting_since is not None:
            return  # waiting in line: `_serve_waiting` resumes it
        recognizer = stream.recognizer
        try:
            while stream.inbox:
                op = stream.inbox[0]
                if isinstance(op, Flush) and recognizer.wants_decoder:
                    return  # `_lend` put it in line
                stream.inbox.popleft()
                if isinstance(op, Audio):
                    events = recognizer.feed(op.pcm16, op.sample_rate)
                    if events:
                        replies.append(Heard(stream_id, events))
                else:
                    replies.append(Flushed(stream_id, recognizer.finish()))
                if recognizer.wants_decoder and not self._lend(stream_id, stream, replies, now):
                    continue  # audio keeps queueing in the recognizer; a flush waits
                if recognizer.can_detach:
                    self.pool.release(recognizer.detach())
        except Exception as exc:  # this stream ends; the others go on
            log.exception("a PocketSphinx stream failed")
            replies.append(StreamFailed(stream_id, f"{type(exc).__name__}: {exc}"))
            self._close(stream_id)

    def _lend(self, stream_id: int, stream: _Stream, replies: list[Any], now: float) -> bool:
        """Attach a decoder now (True), or put the stream in line for one (False)."""
        decoder = None if self._waiting else self.pool.try_acquire()  # others came first
        if decoder is None:
            if stream_id not in self._waiting:
                self._waiting.append(stream_id)
                stream.waiting_since = now
                self._waits.waits += 1
            return False
        events = stream.recognizer.attach(decoder)
        if events:
            replies.append(Heard(stream_id, events))
        return True

    def _serve_waiting(self, replies: list[Any], now: float) -> None:
        """Hand freed decoders to the streams in line, then to whole recordings."""
        while self._waiting:
            decoder = self.pool.try_acquire()
            if decoder is None:
                return
            stream_id = self._waiting.popleft()
            stream = self._streams.get(stream_id)
            if stream is None:
                self.pool.release(decoder, reset=False)
                continue
            self._waited(stream, now)
            events = stream.recognizer.attach(decoder)
            if events:
                replies.append(Heard(stream_id, events))
            self._drain(stream_id, replies, now)
            if stream.recognizer.can_detach:
                self.pool.release(stream.recognizer.detach())
        while self._requests:
            decoder = self.pool.try_acquire()
            if decoder is None:
                return
            request = self._requests.popleft()
            try:
                transcript = recognize_pcm(decoder, request.pcm16, request.sample_rate)
                replies.append(Recognized(request.request, transcript))
            except Exception as exc:
                replies.append(Recognized(request.request, None, f"{type(exc).__name__}: {exc}"))
            finally:
                self.pool.release(decoder)

    def _waited(self, stream: _Stream, now: float) -> None:
        """The stream's wait for a decoder is over: count its time."""
        if stream.waiting_since is not None:
            waited = now - stream.waiting_since
            self._waits.wait_seconds += waited
            self._waits.max_wait_seconds = max(self._waits.max_wait_seconds, waited)
            stream.waiting_since = None

    def _close(self, stream_id: int) -> None:
        stream = self._streams.pop(stream_id, None)
        if stream is None:
            return
        if stream_id in self._waiting:
            self._waiting.remove(stream_id)
        recognizer = stream.recognizer
        recognizer.close()
        if recognizer.decoder is not None:
            self.pool.release(recognizer.detach())

    def _prewarm(self, op: Prewarm) -> Prewarmed:
        try:
            self.pool.prewarm(op.decoders)
        except Exception as exc:
            return Prewarmed(op.request, f"{type(exc).__name__}: {exc}")
        return Prewarmed(op.request)


def serve(read_fd: int, write_fd: int, pool: DecoderPool) -> None:
    """Answer batches from `read_fd` on `write_fd` until the server closes its end."""
    state = WorkerState(pool)
    stats_sent = 0.0
    while True:
        readable, _, _ = select.select([read_fd], [], [], STATS_EVERY)
        now = time.monotonic()
        replies: list[Any] = []
        if readable:
            batch = read_batch(read_fd)
            if batch is None:
                return  # the server is gone
            started = time.process_time()
            replies = state.handle(batch, now)
            state.decode_seconds += time.process_time() - started
        replies += state.expire(now)
        if replies or now - stats_sent >= STATS_EVERY:
            replies.append(state.stats(now))  # last: the server reads it before the rest
            stats_sent = now
        if replies:
            write_batch(write_fd, replies)


def main(argv: list[str]) -> None:
    read_fd, write_fd, max_decoders, wait_timeout = argv
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    os.nice(DECODER_NICE)  # the server's event loop goes first (`decode_queue`)
    pool = DecoderPool(max_decoders=int(max_decoders), wait_timeout=float(wait_timeout))
    with contextlib.suppress(BrokenPipeError):  # the server went away mid-reply
        serve(int(read_fd), int(write_fd), pool)


if __name__ == "__main__":
    main(sys.argv[1:])
