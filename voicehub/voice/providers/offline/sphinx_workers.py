"""PocketSphinx decoding in worker processes, off the server's event loop: `SphinxWorkers`.

PocketSphinx holds the GIL while it decodes, so decoding in the server process, on the
event loop or on a thread, holds up every call on it (at 100 calls it took 56% of the loop
and left it lagging 723 ms). Streams hand their audio to worker processes
(`sphinx_process`) instead; each process has its own decoder pool and decodes on its own
core.

The event loop only appends a stream's frames to its worker's outbox (a few microseconds);
a writer thread per worker sends what gathered as one batch, and a reader thread per worker
hands the replies back to each stream's event loop, one callback per batch and loop. A
stream stays on one worker for its life (its recognizer and cepstral mean live there);
new streams go to the worker with the fewest.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from voicehub.errors import ConfigError, VoicehubError
from voicehub.voice.providers.offline.decoder_pool import (
    DECODERS_ENV,
    PoolStats,
    decoders_from_environment,
)
from voicehub.voice.providers.offline.environment import whole_number
from voicehub.voice.providers.offline.sphinx_wire import (
    Audio,
    Close,
    Flush,
    Open,
    Prewarm,
    Prewarmed,
    Recognize,
    Recognized,
    read_batch,
    write_batch,
)
from voicehub.voice.providers.offline.stt_engine import Transcript

__all__ = [
    "PROCESSES_ENV",
    "SphinxWorkers",
    "StreamLink",
    "WorkerGone",
    "built_shared_workers",
    "shared_workers",
]

log = logging.getLogger("voicehub.voice.stt")

PROCESSES_ENV = "VOICEHUB_STT_PROCESSES"
_BATCH_DELAY = 0.002  # seconds a writer lets frames gather before sending a batch
_MODULE = "voicehub.voice.providers.offline.sphinx_process"
_ids = itertools.count(1)

ReplyHandler = Callable[[Any], None]


@dataclass(frozen=True, slots=True)
class WorkerGone:
    """The reply a stream gets when its worker process ended."""

    message: str


class _Worker:
    """One worker process, its pipes, and the two threads that talk to it."""

    def __init__(self, index: int, max_decoders: int, wait_timeout: float, route: Any) -> None:
        to_worker_read, self._write_fd = os.pipe()
        self._read_fd, to_server_write = os.pipe()
        command = [sys.executable, "-m", _MODULE]
        command += [str(to_worker_read), str(to_server_write), str(max_decoders)]
        command += [str(wait_timeout)]
        # A session of its own: Ctrl-C at the server's terminal is the server's to handle
        # (it stops, closing the pipe, and the worker ends by itself), not a traceback here.
        self.process = subprocess.Popen(
            command, pass_fds=(to_worker_read, to_server_write), start_new_session=True
        )
        os.close(to_worker_read)
        os.close(to_server_write)
        self.index = index
        self.max_decoders = max_decoders
        self.streams = 0
        self.alive = True
        self.stats = PoolStats()
        self._route = route
        self._outbox: deque[Any] = deque()
        self._wake = threading.Event()
        self._closing = False
        for name, target in (("writer", self._write), ("reader", self._read)):
            threading.Thread(target=target, name=f"sphinx-{index}-{name}", daemon=True).start()

    def send(self, op: Any) -> None:
        """Queue `op` for the next batch (from any thread; the event loop's, mostly)."""
        self._outbox.append(op)
        if not self._wake.is_set():
            self._wake.set()

    def close(self) -> None:
        """Stop the process (its pipe closes: it ends by itself) and wait for it."""
        self._closing = True
        self._wake.set()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def _write(self) -> None:
        outbox = self._outbox
        try:
            while not self._closing:
                self._wake.wait()
                self._wake.clear()
                time.sleep(_BATCH_DELAY)
                batch = []
                while outbox:
                    batch.append(outbox.popleft())
                if batch:
                    write_batch(self._write_fd, batch)
        except OSError as exc:
            log.warning("PocketSphinx worker %d: cannot send: %s", self.index, exc)
        finally:
            os.close(self._write_fd)

    def _read(self) -> None:
        try:
            while (batch := read_batch(self._read_fd)) is not None:
                replies = []
                for reply in batch:
                    if isinstance(reply, PoolStats):
                        self.stats = reply
                    else:
                        replies.append(reply)
                if replies:
                    self._route(replies)
        except (OSError, ValueError, EOFError) as exc:
            log.error("PocketSphinx worker %d: unreadable reply: %s", self.index, exc)
        finally:
            os.close(self._read_fd)
            self.alive = False
            self._route(None, worker=self)


class StreamLink:
    """A stream's line to its worker: `send` operations, `close` once."""

    def __init__(self, workers: SphinxWorkers, worker: _Worker, stream_id: int) -> None:
        self._workers = workers
        self.worker = worker
        self.stream_id = stream_id
        self.closed = False

    @property
    def pid(self) -> int:
        """The worker process decoding this stream."""
        return self.worker.process.pid

    def audio(self, pcm16: bytes, sample_rate: int) -> None:
        self.worker.send(Audio(self.stream_id, pcm16, sample_rate))

    def flush(self) -> None:
        self.worker.send(Flush(self.stream_id))

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self.worker.send(Close(self.stream_id))
        self._workers.forget(self)


class SphinxWorkers:
    """`processes` worker processes (started on first use) sharing `max_decoders`
    decoders between them; an utterance waits up to `wait_timeout` seconds for one."""

    def __init__(
        self,
        *,
        processes: int | None = None,
        max_decoders: int | None = None,
        wait_timeout: float = 30.0,
    ) -> None:
        self.processes = processes or _processes_from_environment()
        self.max_decoders = max_decoders or decoders_from_environment()
        if self.max_decoders < self.processes:
            raise ConfigError(
                f"{self.max_decoders} PocketSphinx decoders cannot serve {self.processes} "
                f"worker processes: raise {DECODERS_ENV} or lower {PROCESSES_ENV}"
            )
        self.wait_timeout = wait_timeout
        self._workers: list[_Worker] = []
        self._lock = threading.Lock()
        # stream or request id -> (event loop or None, handler); None: call in the reader
        self._owners: dict[int, tuple[asyncio.AbstractEventLoop | None, ReplyHandler]] = {}
        self._owned_by: dict[int, _Worker] = {}

    # -- streams ----------------------------------------------------------------------------

    def open(
        self,
        handler: ReplyHandler,
        *,
        gate: bool = True,
        endpoint_silence: float | None = 1.0,
    ) -> StreamLink:
        """A new stream on the least busy worker; its replies go to `handler` on the
        calling event loop."""
        loop = asyncio.get_running_loop()
        stream_id = next(_ids)
        with self._lock:
            worker = min(self._live_workers(), key=lambda w: w.streams)
            worker.streams += 1
            self._owners[stream_id] = (loop, handler)
            self._owned_by[stream_id] = worker
        worker.send(Open(stream_id, gate, endpoint_silence))
        return StreamLink(self, worker, stream_id)

    def forget(self, link: StreamLink) -> None:
        """A closed stream's replies are dropped from now on."""
        with self._lock:
            self._owners.pop(link.stream_id, None)
            if self._owned_by.pop(link.stream_id, None) is not None:
                link.worker.streams -= 1

    async def recognize(self, pcm16: bytes, sample_rate: int) -> Transcript:
        """A whole recording as one utterance, decoded by a worker."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Transcript] = loop.create_future()

        def answer(reply: Any) -> None:
            if future.done():
                return
            if isinstance(reply, Recognized) and reply.transcript is not None:
                future.set_result(reply.transcript)
            else:
                problem = reply.error if isinstance(reply, Recognized) else reply.message
                future.set_exception(VoicehubError(f"PocketSphinx could not decode: {problem}"))

        request = next(_ids)
        with self._lock:
            worker = min(self._live_workers(), key=lambda w: w.streams)
            self._owners[request] = (loop, answer)
            self._owned_by[request] = worker
        worker.send(Recognize(request, pcm16, sample_rate))
        try:
            return await future
        finally:
            with self._lock:
                self._owners.pop(request, None)
                self._owned_by.pop(request, None)

    # -- the processes ----------------------------------------------------------------------

    def prewarm(self, decoders: int = 1, timeout: float = 120.0) -> None:
        """Start the workers and have them build `decoders` decoders in all (blocking)."""
        with self._lock:
            workers = self._live_workers()
        done = threading.Semaphore(0)
        errors: list[str] = []
        requests = []
        for index, worker in enumerate(workers):
            share = decoders // len(workers) + (index < decoders % len(workers))
            request = next(_ids)

            def answer(reply: Any) -> None:
                if not isinstance(reply, Prewarmed) or reply.error:
                    errors.append(getattr(reply, "error", "") or getattr(reply, "message", ""))
                done.release()

            with self._lock:
                self._owners[request] = (None, answer)
                self._owned_by[request] = worker
            requests.append(request)
            worker.send(Prewarm(request, max(1, share)))
        try:
            for _ in workers:
                if not done.acquire(timeout=timeout):
                    raise VoicehubError(f"PocketSphinx workers did not start in {timeout:.0f} s")
        finally:
            with self._lock:
                for request in requests:
                    self._owners.pop(request, None)
                    self._owned_by.pop(request, None)
        if errors:
            raise VoicehubError(f"a PocketSphinx worker could not build decoders: {errors[0]}")

    @property
    def pids(self) -> list[int]:
        """The worker processes running now."""
        return [w.process.pid for w in self._workers if w.alive]

    def stats(self) -> PoolStats:
        """The workers' decoder pools added up (as of their last report, about a second)."""
        total = PoolStats()
        for worker in self._workers:
            for name, value in vars(worker.stats).items():
                if name in ("max_wait_seconds", "oldest_wait_seconds"):
                    setattr(total, name, max(getattr(total, name), value))
                else:
                    setattr(total, name, getattr(total, name) + value)
        return total

    def close(self) -> None:
        """Stop every worker (their streams get `WorkerGone`)."""
        with self._lock:
            workers, self._workers = self._workers, []
        for worker in workers:
            worker.close()

    # -- internals ---------------------------------------------------------------------------

    def _live_workers(self) -> list[_Worker]:
        """Under the lock: the workers, (re)started as needed."""
        self._workers = [w for w in self._workers if w.alive]
        share = -(-self.max_decoders // self.processes)  # rounded up
        while len(self._workers) < self.processes:
            index = len(self._workers)
            self._workers.append(_Worker(index, share, self.wait_timeout, self._route))
        return self._workers

    def _route(self, replies: list[Any] | None, worker: _Worker | None = None) -> None:
        """On a worker's reader thread: hand each reply to its owner, one callback per event
        loop; `replies` None: the worker ended, tell its streams."""
        if replies is None:
            assert worker is not None
            with self._lock:
                gone = [key for key, owner in self._owned_by.items() if owner is worker]
            code = worker.process.poll()
            replies = [
                (key, WorkerGone(f"the PocketSphinx worker process ended (exit code {code})"))
                for key in gone
            ]
            if gone:
                log.error("PocketSphinx worker %d ended: %d streams lost", worker.index, len(gone))
        else:
            replies = [(_key_of(reply), reply) for reply in replies]
        by_loop: dict[asyncio.AbstractEventLoop, list[tuple[ReplyHandler, Any]]] = {}
        with self._lock:
            owners = [(self._owners.get(key), reply) for key, reply in replies]
        for owner, reply in owners:
            if owner is None:
                continue  # a stream closed meanwhile
            loop, handler = owner
            if loop is None:
                handler(reply)
            else:
                by_loop.setdefault(loop, []).append((handler, reply))
        for loop, calls in by_loop.items():
            with contextlib.suppress(RuntimeError):  # that loop closed: nobody listens
                loop.call_soon_threadsafe(_deliver, calls)


def _key_of(reply: Any) -> int:
    """The stream or request a reply is for."""
    stream = getattr(reply, "stream", None)
    return int(stream if stream is not None else reply.request)


def _deliver(calls: list[tuple[ReplyHandler, Any]]) -> None:
    for handler, reply in calls:
        try:
            handler(reply)
        except Exception:
            log.exception("a PocketSphinx reply could not be handled")


def _processes_from_environment() -> int:
    return whole_number(PROCESSES_ENV, 1)


_shared: SphinxWorkers | None = None
_shared_lock = threading.Lock()


def shared_workers() -> SphinxWorkers:
    """The process-wide workers (`$VOICEHUB_STT_PROCESSES` processes, 1 when unset, sharing
    `$VOICEHUB_STT_DECODERS` decoders, 16 when unset)."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = SphinxWorkers()
        return _shared


def built_shared_workers() -> SphinxWorkers | None:
    """The process-wide workers if something built them, else None (never builds them)."""
    return _shared
