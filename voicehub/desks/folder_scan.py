"""A desk folder built file by file: the desks that build, and every file that does not.

    scan = scan_desk_folder(Path("channels"))
    scan.desks     # name -> Desk, for each file that loads and builds
    scan.broken    # file -> its error, each line `file:line: field.path: what is wrong`

The server starts on the good desks and reports the broken ones (`voicehub serve`, `/ready`),
and its reloader rescans the same way; `load_desks` is the strict form (the first error
raises). A desk is broken when its file does not load or build, when its name is taken by
an earlier file (in file-name order), or when it transfers to a desk that is not served
(perhaps one that is broken itself).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from voicehub.desks.locate import with_lines
from voicehub.desks.transfer import TransferConfig, check_transfer_desks
from voicehub.errors import ConfigError

if TYPE_CHECKING:
    from voicehub.desks.desk import Desk

__all__ = ["DeskScan", "scan_desk_folder"]


@dataclass
class DeskScan:
    """The desks of a folder that build, by name, and the broken files, by path."""

    desks: dict[str, Desk] = field(default_factory=dict)
    broken: dict[str, str] = field(default_factory=dict)

    def problems(self) -> str:
        """Every broken file's error, one after the other."""
        return "\n".join(self.broken.values())


def scan_desk_folder(folder: Path) -> DeskScan:
    """Build each `*.toml` directly in `folder` on its own (blocking: desk files read their
    knowledge). ConfigError only when `folder` is not a folder."""
    from voicehub.desks.desk import build_desk
    from voicehub.desks.loading import load_desk_file

    if not folder.is_dir():
        raise ConfigError(f"{folder}: no such desk folder")
    scan = DeskScan()
    sources: dict[str, Path] = {}
    for path in sorted(folder.glob("*.toml")):
        try:
            desk = build_desk(load_desk_file(path))
        except ConfigError as exc:
            scan.broken[str(path)] = with_lines(str(exc))
            continue
        if desk.name in scan.desks:
            scan.broken[str(path)] = (
                f"{path}: name: desk name {desk.name!r} is already used by "
                f"{sources[desk.name]}; desk names must be unique"
            )
            continue
        scan.desks[desk.name], sources[desk.name] = desk, path
    _drop_broken_transfers(scan, sources)
    return scan


def _drop_broken_transfers(scan: DeskScan, sources: dict[str, Path]) -> None:
    """Move each desk transferring to a desk not served to `broken`, until none does (one
    dropped may be another's target)."""
    dropped = True
    while dropped:
        dropped = False
        for name, desk in list(scan.desks.items()):
            served = {other: _Named(other) for other in scan.desks if other != name}
            try:
                check_transfer_desks({**served, name: desk.config})
            except ConfigError as exc:
                scan.broken[str(sources[name])] = with_lines(str(exc))
                del scan.desks[name]
                dropped = True


@dataclass(frozen=True)
class _Named:
    """A served desk as a transfer target: its name is all the check reads of it."""

    name: str
    source: Path | None = None
    transfer: TransferConfig | None = None
