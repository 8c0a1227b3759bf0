"""A real full disk for the SQLite fault: the store's file on a small tmpfs of its own,
filled by another file until writes fail with ENOSPC (SQLite's SQLITE_FULL, "database or
disk is full"), then emptied again. Mounting needs root (CAP_SYS_ADMIN); `mount` says why
when it cannot."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
from pathlib import Path

from voicehub.errors import VoicehubError

__all__ = ["SmallDisk"]


class SmallDisk:
    """A tmpfs of `megabytes` at `where` (see the module)."""

    def __init__(self, where: Path, megabytes: int = 16) -> None:
        self.where, self.megabytes = where, megabytes
        self.filler = where / "filler"

    async def __aenter__(self) -> SmallDisk:
        self.where.mkdir(parents=True, exist_ok=True)
        await _run(
            "mount", "-t", "tmpfs", "-o", f"size={self.megabytes}m", "tmpfs", str(self.where)
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        await _run("umount", "-l", str(self.where))

    def fill(self) -> int:
        """Fill the disk to its last byte; returns the bytes written."""
        written, size = 0, 1 << 16
        with self.filler.open("ab", buffering=0) as out:  # unbuffered: each write lands
            while size:
                try:
                    written += out.write(b"\0" * size) or 0
                except OSError:  # no room for this much: try smaller, down to one byte
                    size //= 2
        return written

    def free(self) -> None:
        """The filler gone: the disk has room again."""
        with contextlib.suppress(FileNotFoundError):
            self.filler.unlink()

    def full(self) -> bool:
        """Whether a write of one byte fails with ENOSPC now."""
        probe = self.where / "probe"
        try:
            with probe.open("wb") as out:
                out.write(b"x")
                out.flush()
                os.fsync(out.fileno())
        except OSError as exc:
            return exc.errno == errno.ENOSPC
        finally:
            with contextlib.suppress(FileNotFoundError):
                probe.unlink()
        return False


async def _run(*command: str) -> None:
    process = await asyncio.create_subprocess_exec(
        *command, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE
    )
    _, error = await process.communicate()
    if process.returncode != 0:
        raise VoicehubError(f"{' '.join(command)} failed: {error.decode().strip()}")
