"""What the server and its PocketSphinx worker processes say to each other (`sphinx_workers`,
`sphinx_process`): batches of operations one way, batches of replies the other, each batch
one pickled list framed by its length on a pipe. Both ends are voicehub's own, started
together, so pickle is safe here; the messages are named tuples, which pickle several times
faster than dataclasses (a frame of audio is one, 50 a second per call).

Operations (server -> worker): `Open`, `Audio`, `Flush`, `Close`, `Recognize`, `Prewarm`.
Replies (worker -> server): `Heard` (partials and finals of a stream), `Flushed` (the final
answering a flush), `Recognized`, `Prewarmed`, `StreamFailed`, and the worker's decoder
pool counters (`PoolStats`) now and then.
"""

from __future__ import annotations

import os
import pickle
import struct
from typing import Any, NamedTuple

from voicehub.voice.providers.offline.stt_engine import RecognizerEvent, Transcript

__all__ = [
    "Audio",
    "Close",
    "Flush",
    "Flushed",
    "Heard",
    "Open",
    "Prewarm",
    "Prewarmed",
    "Recognize",
    "Recognized",
    "StreamFailed",
    "read_batch",
    "write_batch",
]

_LENGTH = struct.Struct(">I")


class Open(NamedTuple):
    stream: int
    gate: bool
    endpoint_silence: float | None


class Audio(NamedTuple):
    stream: int
    pcm16: bytes
    sample_rate: int


class Flush(NamedTuple):
    stream: int


class Close(NamedTuple):
    stream: int


class Recognize(NamedTuple):
    """A whole recording as one utterance (`recognize_pcm`)."""

    request: int
    pcm16: bytes
    sample_rate: int


class Prewarm(NamedTuple):
    request: int
    decoders: int


class Heard(NamedTuple):
    stream: int
    events: list[RecognizerEvent]


class Flushed(NamedTuple):
    stream: int
    transcript: Transcript


class Recognized(NamedTuple):
    request: int
    transcript: Transcript | None
    error: str = ""


class Prewarmed(NamedTuple):
    request: int
    error: str = ""


class StreamFailed(NamedTuple):
    stream: int
    error: str


def write_batch(fd: int, batch: list[Any]) -> None:
    """Send one batch (blocking until the pipe took all of it)."""
    body = pickle.dumps(batch, protocol=pickle.HIGHEST_PROTOCOL)
    data = memoryview(_LENGTH.pack(len(body)) + body)
    while data:
        written = os.write(fd, data)
        data = data[written:]


def read_batch(fd: int) -> list[Any] | None:
    """The next batch (blocking), or None once the other end closed the pipe."""
    head = _read_exactly(fd, _LENGTH.size)
    if head is None:
        return None
    (size,) = _LENGTH.unpack(head)
    body = _read_exactly(fd, size)
    if body is None:
        return None
    batch = pickle.loads(body)
    if not isinstance(batch, list):
        raise ValueError(f"a PocketSphinx worker sent a {type(batch).__name__}, not a batch")
    return batch


def _read_exactly(fd: int, size: int) -> bytes | None:
    chunks = bytearray()
    while len(chunks) < size:
        chunk = os.read(fd, size - len(chunks))
        if not chunk:
            return None
        chunks += chunk
    return bytes(chunks)
