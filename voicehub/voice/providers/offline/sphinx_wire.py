"""What the server and its PocketSphinx worker processes say to each other (`sphinx_workers`,
`sphinx_process`): batches of operations one way, batches of replies the other, each batch
one pickled list framed by its length on a pipe. Both ends are voicehub's own, started
together, so pickle is safe here.

Operations (server -> worker): `Open`, `Audio`, `Flush`, `Close`, `Recognize`, `Prewarm`.
Replies (worker -> server): `Heard` (partials and finals of a stream), `Flushed` (the final
answering a flush), `Recognized`, `Prewarmed`, `StreamFailed`, and the worker's decoder
pool counters (`PoolStats`) now and then.
"""

from __future__ import annotations

import os
import pickle
import struct
from dataclasses import dataclass
from typing import Any

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


@dataclass(frozen=True, slots=True)
class Open:
    stream: int
    gate: bool
    endpoint_silence: float | None


@dataclass(frozen=True, slots=True)
class Audio:
    stream: int
    pcm16: bytes
    sample_rate: int


@dataclass(frozen=True, slots=True)
class Flush:
    stream: int


@dataclass(frozen=True, slots=True)
class Close:
    stream: int


@dataclass(frozen=True, slots=True)
class Recognize:
    """A whole recording as one utterance (`recognize_pcm`)."""

    request: int
    pcm16: bytes
    sample_rate: int


@dataclass(frozen=True, slots=True)
class Prewarm:
    request: int
    decoders: int


@dataclass(frozen=True, slots=True)
class Heard:
    stream: int
    events: list[RecognizerEvent]


@dataclass(frozen=True, slots=True)
class Flushed:
    stream: int
    transcript: Transcript


@dataclass(frozen=True, slots=True)
class Recognized:
    request: int
    transcript: Transcript | None
    error: str = ""


@dataclass(frozen=True, slots=True)
class Prewarmed:
    request: int
    error: str = ""


@dataclass(frozen=True, slots=True)
class StreamFailed:
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
