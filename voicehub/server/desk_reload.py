"""`voicehub serve --reload`: desk files are watched and a changed desk serves new calls.

The server's desk table (`Switchboard.desks`, shared with the WebRTC and phone entry
points) maps names to built `Desk`s. A reload builds every desk file of the folder again,
each on its own, and swaps in the desks that changed:

- new calls get the new version; a live call keeps the `Desk` it started with (its room's
  orchestration, agents and voice stack were built from it);
- a file that no longer loads is reported (file, line, what is wrong and the fix) and the
  desk it held goes on serving its last good version;
- a new file is served from the next call; a removed file's desk goes on serving until the
  restart (live calls may use it), with a warning;
- knowledge and workflow files (anything below the folder that is not a desk file) count
  too: when one changed, every desk is swapped for its rebuilt version, since any of them
  may read it (its knowledge, a manager's workflows).

Replaced desks are kept until the server stops (a live call may still use their model
clients) and closed then.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from voicehub.desks.folder_scan import scan_desk_folder

if TYPE_CHECKING:
    from voicehub.desks.desk import Desk

__all__ = ["DeskReloader", "ReloadReport"]

log = logging.getLogger("voicehub.reload")

Prepare = Callable[[Sequence["Desk"]], Awaitable[None]]


@dataclass
class ReloadReport:
    """What one reload pass did."""

    updated: list[str] = field(default_factory=list)  # desk names now on a new version
    added: list[str] = field(default_factory=list)
    broken: dict[str, str] = field(default_factory=dict)  # file -> the error, with lines
    gone: list[str] = field(default_factory=list)  # desks whose file was removed


class DeskReloader:
    """Keeps `desks` (mutated in place) in step with the desk files in `folder`."""

    def __init__(
        self,
        folder: Path,
        desks: dict[str, Desk],
        *,
        prepare: Prepare | None = None,
        debounce_ms: int = 300,
    ) -> None:
        self.folder = folder
        self.desks = desks
        self.prepare = prepare
        self.debounce_ms = debounce_ms
        self.retired: list[Desk] = []
        self.passes = 0
        self.last: ReloadReport | None = None  # the latest pass's (its broken files: /ready)
        self._support = _support_digest(folder)  # knowledge, workflows: as first loaded
        self._changed = asyncio.Condition()
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    # -- one pass ----------------------------------------------------------------------------

    async def reload(self) -> ReloadReport:
        """Build every desk file again and swap in the desks that changed."""
        scan = await asyncio.to_thread(_scan, self.folder, list(self.desks.values()))
        report = ReloadReport(broken=scan.broken, gone=scan.gone)
        support_changed, self._support = scan.support != self._support, scan.support
        for name, desk in scan.built.items():
            current = self.desks.get(name)
            if current is None:
                report.added.append(name)
            elif current.config == desk.config and not support_changed:
                continue
            else:
                report.updated.append(name)
                self.retired.append(current)
            self.desks[name] = desk
        await self._prepare([self.desks[name] for name in [*report.added, *report.updated]])
        self._log(report)
        self.last = report
        async with self._changed:
            self.passes += 1
            self._changed.notify_all()
        return report

    async def wait_for_pass(self, after: int) -> None:
        """Wait until more than `after` passes have run (tests, and whoever edits files)."""
        async with self._changed:
            await self._changed.wait_for(lambda: self.passes > after)

    # -- watching ----------------------------------------------------------------------------

    def start(self) -> None:
        """Watch the folder in the background until `aclose`."""
        self._task = asyncio.create_task(self._watch(), name="desk-reload")

    async def aclose(self) -> None:
        self._stop.set()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        for desk in self.retired:
            with contextlib.suppress(Exception):
                await desk.aclose()

    async def _watch(self) -> None:
        import watchfiles

        log.info("watching %s for desk changes", self.folder)
        async for _ in watchfiles.awatch(
            self.folder, stop_event=self._stop, debounce=self.debounce_ms, recursive=True
        ):
            try:
                await self.reload()
            except Exception:  # a reload never takes the server down
                log.exception("reloading the desks of %s failed", self.folder)

    async def _prepare(self, desks: list[Desk]) -> None:
        if not desks or self.prepare is None:
            return
        try:
            await self.prepare(desks)
        except Exception:
            log.exception("loading the voice models of %s", ", ".join(d.name for d in desks))

    @staticmethod
    def _log(report: ReloadReport) -> None:
        # a reload that worked is news, not a problem: INFO (serve --reload shows it)
        for name in report.updated:
            log.info("desk %s reloaded: new calls use it; live calls keep theirs", name)
        for name in report.added:
            log.info("desk %s added: served from the next call", name)
        for name in report.gone:
            log.warning("desk %s: its file is gone; it serves until the restart", name)
        for error in report.broken.values():
            log.error("%s\n(the desk keeps serving its last good version)", error)


@dataclass
class _Scan:
    built: dict[str, Desk] = field(default_factory=dict)
    broken: dict[str, str] = field(default_factory=dict)
    gone: list[str] = field(default_factory=list)
    support: str = ""


def _scan(folder: Path, serving: list[Desk]) -> _Scan:
    """Build each desk file of `folder` on its own (blocking: run it in a thread)."""
    found = scan_desk_folder(folder)
    scan = _Scan(built=found.desks, broken=found.broken, support=_support_digest(folder))
    for desk in serving:
        source = desk.config.source
        if desk.name not in scan.built and source is not None and not source.exists():
            scan.gone.append(desk.name)
    return scan


def _support_digest(folder: Path) -> str:
    """A digest of the files below `folder` other than its desk files."""
    digest = hashlib.sha256()
    for path in sorted(folder.rglob("*")):
        if not path.is_file() or (path.parent == folder and path.suffix == ".toml"):
            continue
        with contextlib.suppress(OSError):
            digest.update(str(path.relative_to(folder)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()
