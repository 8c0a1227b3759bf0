"""The recordings folder: a subfolder per conversation, a WAV and a JSON per call, sealed.

    recordings/research%3Aalice/20261126T151203-1.wav.sealed    stereo, the caller left
    recordings/research%3Aalice/20261126T151203-1.json.sealed   the transcript

Each file is written sealed (`RecordingSeal`: AES-256-GCM under the server's number secret)
and read back through `read`, by its plain name (`20261126T151203-1.wav`); files of earlier
versions, kept unsealed, are read as they are. A conversation's call-backs add files to its
folder; deleting the conversation deletes the folder. Files older than their desk's
`keep_days` are pruned. Blocking file I/O: the server runs these in a worker thread.
"""

from __future__ import annotations

import io
import json
import logging
import os
import re
import shutil
import tempfile
import time
import urllib.parse
import wave
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from voicehub.recordings.seal import RecordingKeyError, RecordingSeal, missing_key

__all__ = ["RecordingFolder", "StoredRecording"]

log = logging.getLogger("voicehub.recordings")

_SEALED = ".sealed"
_PLAIN_NAME = re.compile(r"^\d{8}T\d{6}-\d+\.(?:wav|json)$")
_NAME = re.compile(r"^\d{8}T\d{6}-\d+\.(?:wav|json)(?:\.sealed)?$")


@dataclass(frozen=True)
class StoredRecording:
    """One call's files in a conversation's folder."""

    name: str  # the files' common stem
    started_at: float
    seconds: float
    audio: bool
    transcript: bool


class RecordingFolder:
    """Recordings under `root`, by conversation (room id), sealed under `number_key` (the
    server's number secret). Without a key, the folder can list, delete and prune, and read
    unsealed files of earlier versions, but not write or read a sealed one."""

    def __init__(self, root: Path, number_key: bytes | None = None) -> None:
        self.root = root
        self._seal = RecordingSeal(number_key) if number_key is not None else None

    def folder(self, room_id: str) -> Path:
        return self.root / urllib.parse.quote(room_id, safe="")

    def save(
        self,
        room_id: str,
        started_at: float,
        *,
        stereo: bytes | None,
        sample_rate: int,
        transcript: str | None,
    ) -> str:
        """Write one call's files, sealed; returns their stem."""
        seal = self._seal
        if seal is None:
            raise RecordingKeyError(
                f"room {room_id!r}: the recordings folder {self.root} was opened without the "
                "number secret, and recordings are only written sealed"
            )
        folder = self.folder(room_id)
        folder.mkdir(parents=True, exist_ok=True)
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(started_at))
        number = 1
        while any(
            (folder / f"{stamp}-{number}{ext}{sealed}").exists()
            for ext in (".wav", ".json")
            for sealed in ("", _SEALED)
        ):
            number += 1
        stem = f"{stamp}-{number}"
        if stereo is not None:
            buffer = io.BytesIO()
            with wave.open(buffer, "wb") as out:
                out.setnchannels(2)
                out.setsampwidth(2)
                out.setframerate(sample_rate)
                out.writeframes(stereo)
            sealed = seal.sealed_parts(room_id, f"{stem}.wav", buffer.getbuffer())
            _write_whole(folder, f"{stem}.wav", sealed)
        if transcript is not None:
            plain = transcript.encode("utf-8")
            _write_whole(folder, f"{stem}.json", seal.sealed_parts(room_id, f"{stem}.json", plain))
        return stem

    def list(self, room_id: str) -> list[StoredRecording]:
        """The conversation's recordings, oldest first."""
        folder = self.folder(room_id)
        if not folder.is_dir():
            return []
        names = {p.name.removesuffix(_SEALED) for p in folder.iterdir() if _NAME.match(p.name)}
        stems = sorted({name.rsplit(".", 1)[0] for name in names})
        return [self._describe(room_id, folder, stem, names) for stem in stems]

    def _describe(self, room_id: str, folder: Path, stem: str, names: set[str]) -> StoredRecording:
        audio, doc = f"{stem}.wav" in names, f"{stem}.json" in names
        seconds, started = 0.0, 0.0
        try:
            if doc:
                about: dict[str, Any] = json.loads(self._open(room_id, f"{stem}.json"))
                seconds = float(about.get("seconds", 0.0))
                started = float(about.get("started_at", 0.0))
            elif audio:
                with wave.open(io.BytesIO(self._open(room_id, f"{stem}.wav")), "rb") as wav:
                    seconds = wav.getnframes() / wav.getframerate()
        except RecordingKeyError as error:
            # listed all the same (its size and time unknown); reading it names the problem
            log.warning("%s", error)
        if not started:
            started = min(
                (folder / f"{stem}{ext}").stat().st_mtime
                for ext in (".wav", ".json", ".wav.sealed", ".json.sealed")
                if (folder / f"{stem}{ext}").exists()
            )
        return StoredRecording(stem, started, round(seconds, 3), audio, doc)

    def read(self, room_id: str, name: str) -> bytes | None:
        """The plain bytes of the conversation's file `name` (`<stem>.wav` or `<stem>.json`,
        only names this folder writes), or None when there is none. `RecordingKeyError`
        naming the file when it is sealed and does not open (no key, another key, damaged)."""
        if not _PLAIN_NAME.match(name):
            return None
        folder = self.folder(room_id)
        if not (folder / f"{name}{_SEALED}").is_file() and not (folder / name).is_file():
            return None
        return self._open(room_id, name)

    def _open(self, room_id: str, name: str) -> bytes:
        folder = self.folder(room_id)
        sealed = folder / f"{name}{_SEALED}"
        if not sealed.is_file():
            return (folder / name).read_bytes()  # unsealed, from an earlier version
        if self._seal is None:
            raise missing_key(room_id, name)
        return self._seal.open(room_id, name, sealed.read_bytes())

    def delete(self, room_id: str) -> int:
        """Delete the conversation's recordings; how many files there were."""
        folder = self.folder(room_id)
        if not folder.is_dir():
            return 0
        count = sum(1 for _ in folder.iterdir())
        shutil.rmtree(folder)
        return count

    def prune(self, desk: str, keep_days: float, now: float | None = None) -> int:
        """Delete the files of `desk`'s conversations older than `keep_days` (0: keep)."""
        if keep_days <= 0 or not self.root.is_dir():
            return 0
        cutoff = (now if now is not None else time.time()) - keep_days * 86400
        prefix = urllib.parse.quote(f"{desk}:", safe="")
        removed = 0
        for folder in self.root.iterdir():
            if not folder.name.startswith(prefix) or not folder.is_dir():
                continue
            for path in folder.iterdir():
                if _NAME.match(path.name) and path.stat().st_mtime < cutoff:
                    path.unlink()
                    removed += 1
            if not any(folder.iterdir()):
                folder.rmdir()
        return removed


def _write_whole(folder: Path, name: str, parts: tuple[bytes, ...]) -> None:
    """Write `folder/name.sealed` whole or not at all (a crash mid-write leaves no torn
    file that would never open)."""
    descriptor, temporary = tempfile.mkstemp(dir=folder, prefix=f".{name}-")
    try:
        with os.fdopen(descriptor, "wb") as file:
            for part in parts:
                file.write(part)
        os.chmod(temporary, 0o600)
        os.replace(temporary, folder / f"{name}{_SEALED}")
    except BaseException:
        os.unlink(temporary)
        raise
