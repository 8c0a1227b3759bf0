"""The recordings folder: a subfolder per conversation, a WAV and a JSON per call.

    recordings/research%3Aalice/20261126T151203-1.wav    stereo, the caller left
    recordings/research%3Aalice/20261126T151203-1.json   the transcript

A conversation's call-backs add files to its folder; deleting the conversation deletes the
folder. Files older than their desk's `keep_days` are pruned. Blocking file I/O: the
server runs these in a worker thread.
"""

from __future__ import annotations

import json
import re
import shutil
import time
import urllib.parse
import wave
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["RecordingFolder", "StoredRecording"]

_NAME = re.compile(r"^\d{8}T\d{6}-\d+\.(?:wav|json)$")


@dataclass(frozen=True)
class StoredRecording:
    """One call's files in a conversation's folder."""

    name: str  # the files' common stem
    started_at: float
    seconds: float
    audio: bool
    transcript: bool


class RecordingFolder:
    """Recordings under `root`, by conversation (room id)."""

    def __init__(self, root: Path) -> None:
        self.root = root

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
        """Write one call's files; returns their stem."""
        folder = self.folder(room_id)
        folder.mkdir(parents=True, exist_ok=True)
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(started_at))
        number = 1
        while any((folder / f"{stamp}-{number}{ext}").exists() for ext in (".wav", ".json")):
            number += 1
        stem = f"{stamp}-{number}"
        if stereo is not None:
            with wave.open(str(folder / f"{stem}.wav"), "wb") as out:
                out.setnchannels(2)
                out.setsampwidth(2)
                out.setframerate(sample_rate)
                out.writeframes(stereo)
        if transcript is not None:
            (folder / f"{stem}.json").write_text(transcript, encoding="utf-8")
        return stem

    def list(self, room_id: str) -> list[StoredRecording]:
        """The conversation's recordings, oldest first."""
        folder = self.folder(room_id)
        if not folder.is_dir():
            return []
        stems = sorted({p.stem for p in folder.iterdir() if _NAME.match(p.name)})
        return [self._describe(folder, stem) for stem in stems]

    def _describe(self, folder: Path, stem: str) -> StoredRecording:
        wav, doc = folder / f"{stem}.wav", folder / f"{stem}.json"
        seconds, started = 0.0, wav.stat().st_mtime if wav.exists() else 0.0
        if doc.exists():
            about: dict[str, Any] = json.loads(doc.read_text(encoding="utf-8"))
            seconds = float(about.get("seconds", 0.0))
            started = float(about.get("started_at", started))
        elif wav.exists():
            with wave.open(str(wav), "rb") as audio:
                seconds = audio.getnframes() / audio.getframerate()
        return StoredRecording(stem, started, round(seconds, 3), wav.exists(), doc.exists())

    def file(self, room_id: str, name: str) -> Path | None:
        """The file `name` of the conversation (only names this folder writes)."""
        if not _NAME.match(name):
            return None
        path = self.folder(room_id) / name
        return path if path.is_file() else None

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
