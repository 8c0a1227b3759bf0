"""New calls refused while this process is near its memory limit; the live calls go on.

A process past its limit is killed by the kernel's OOM killer (a cgroup's `memory.max`),
or its allocations fail (`RLIMIT_AS`, `RLIMIT_DATA`: an onnxruntime or Piper buffer that
cannot be had ends the call, or the process): every call on it is lost at once. So near
the limit the instance stops taking calls, as when it is busy (`voicehub.server.entry_gate`:
1013 for a WebSocket, `<Reject reason="busy"/>` for Twilio...; `/ready` answers 503 busy,
so a balancer sends calls elsewhere), and takes them again once its memory is back down
(each call's end gives memory back: `voicehub.server.memory_trim`).

The limits read, each with what counts against it (the tightest one decides):

- cgroup v2 `memory.max` of the process's own cgroup (`0::/path` in /proc/self/cgroup),
  against `memory.current` less `inactive_file` (page cache the kernel takes back first);
- cgroup v1 `memory.limit_in_bytes` of its memory controller's cgroup, against
  `memory.usage_in_bytes` less `total_inactive_file`;
- the soft `RLIMIT_AS`, against the process's virtual size (`VmSize`);
- the soft `RLIMIT_DATA`, against its data segment (`VmData`).

With none of them set, nothing is refused. New calls are refused from `REFUSE_AT` of the
limit used, and admitted again below `ADMIT_BELOW` (so that one call's end does not let
in the call that crosses it again). A line is logged each time it turns.
"""

from __future__ import annotations

import logging
import resource
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "ADMIT_BELOW",
    "REFUSE_AT",
    "MemoryGuard",
    "MemoryReading",
    "cgroup_reading",
    "memory_readings",
    "memory_verdict",
    "rlimit_readings",
]

log = logging.getLogger("voicehub.server")

REFUSE_AT = 0.9
ADMIT_BELOW = 0.85
_UNLIMITED_V1 = 1 << 60  # cgroup v1 writes "no limit" as a huge page-aligned number


@dataclass(frozen=True)
class MemoryReading:
    """One limit this process has, and how much of it is used, in bytes."""

    source: str  # e.g. "cgroup memory.max", "RLIMIT_AS"
    used: int
    limit: int

    @property
    def share(self) -> float:
        return self.used / self.limit if self.limit > 0 else 1.0


def memory_verdict(
    readings: Sequence[MemoryReading],
    refusing: bool,
    refuse_at: float = REFUSE_AT,
    admit_below: float = ADMIT_BELOW,
) -> tuple[bool, str | None]:
    """Whether new calls are refused now, given whether they were (`refusing`), and why."""
    if not readings:
        return False, None
    worst = max(readings, key=lambda reading: reading.share)
    over = worst.share >= refuse_at or (refusing and worst.share >= admit_below)
    if not over:
        return False, None
    used, limit = worst.used / 1e6, worst.limit / 1e6
    return True, f"memory near its limit ({used:.0f} of {limit:.0f} MB, {worst.source})"


def _number(path: Path) -> int | None:
    try:
        text = path.read_text(encoding="ascii").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def _stat(path: Path, key: str) -> int:
    try:
        lines = path.read_text(encoding="ascii").splitlines()
    except OSError:
        return 0
    for line in lines:
        name, _, value = line.partition(" ")
        if name == key and value.strip().isdigit():
            return int(value)
    return 0


def _candidates(mount: Path, inside: str) -> list[Path]:
    """The cgroup's folder under `mount`, then `mount` itself (a container often mounts
    its own cgroup there, while /proc/self/cgroup names the host's path)."""
    path = mount / inside.lstrip("/")
    return [path, mount] if path != mount else [mount]


def cgroup_reading(
    root: Path = Path("/sys/fs/cgroup"), self_cgroup: Path = Path("/proc/self/cgroup")
) -> MemoryReading | None:
    """The memory limit of this process's cgroup (v2, else v1), or None when it has none."""
    try:
        lines = self_cgroup.read_text(encoding="ascii").splitlines()
    except OSError:
        return None
    for line in lines:  # v2: "0::/path"
        number, _, rest = line.partition(":")
        controllers, _, inside = rest.partition(":")
        if number != "0" or controllers:
            continue
        for folder in _candidates(root, inside):
            maximum = folder / "memory.max"
            if not maximum.exists():
                continue
            limit = _number(maximum)  # "max": none
            current = _number(folder / "memory.current")
            if limit is None or current is None:
                return None
            used = max(0, current - _stat(folder / "memory.stat", "inactive_file"))
            return MemoryReading("cgroup memory.max", used, limit)
    for line in lines:  # v1: "4:memory:/path"
        _, _, rest = line.partition(":")
        controllers, _, inside = rest.partition(":")
        if "memory" not in controllers.split(","):
            continue
        for folder in _candidates(root / "memory", inside):
            limit = _number(folder / "memory.limit_in_bytes")
            if limit is None:
                continue
            current = _number(folder / "memory.usage_in_bytes")
            if limit >= _UNLIMITED_V1 or current is None:
                return None
            used = max(0, current - _stat(folder / "memory.stat", "total_inactive_file"))
            return MemoryReading("cgroup memory.limit_in_bytes", used, limit)
    return None


def _status_bytes(status: Path, key: str) -> int | None:
    try:
        lines = status.read_text(encoding="ascii").splitlines()
    except OSError:
        return None
    for line in lines:
        name, _, value = line.partition(":")
        if name == key:
            amount, _, unit = value.strip().partition(" ")
            if amount.isdigit() and unit == "kB":
                return int(amount) * 1024
    return None


def rlimit_readings(
    getrlimit: Callable[[int], tuple[int, int]] = resource.getrlimit,
    status: Path = Path("/proc/self/status"),
) -> list[MemoryReading]:
    """`RLIMIT_AS` against the virtual size and `RLIMIT_DATA` against the data segment,
    each when its soft limit is set."""
    readings = []
    for name, number, key in (
        ("RLIMIT_AS", resource.RLIMIT_AS, "VmSize"),
        ("RLIMIT_DATA", resource.RLIMIT_DATA, "VmData"),
    ):
        soft, _ = getrlimit(number)
        if soft == resource.RLIM_INFINITY or soft < 0:
            continue
        used = _status_bytes(status, key)
        if used is not None:
            readings.append(MemoryReading(name, used, soft))
    return readings


def memory_readings() -> list[MemoryReading]:
    """Every memory limit this process has now, read afresh (a limit may be changed while
    it runs: `prlimit --pid`, a cgroup's `memory.max` written)."""
    cgroup = cgroup_reading()
    return [*([cgroup] if cgroup is not None else []), *rlimit_readings()]


class MemoryGuard:
    """`busy()`: why a new call is refused for memory now, or None; logs each turn."""

    def __init__(
        self,
        read: Callable[[], Sequence[MemoryReading]] = memory_readings,
        refuse_at: float = REFUSE_AT,
        admit_below: float = ADMIT_BELOW,
    ) -> None:
        if not 0 < admit_below <= refuse_at <= 1:
            raise ValueError(
                f"memory thresholds need 0 < admit_below ({admit_below}) <= refuse_at "
                f"({refuse_at}) <= 1"
            )
        self.read = read
        self.refuse_at, self.admit_below = refuse_at, admit_below
        self.refusing = False

    def busy(self) -> str | None:
        readings = self.read()
        refusing, reason = memory_verdict(readings, self.refusing, self.refuse_at, self.admit_below)
        if refusing and not self.refusing:
            log.warning("%s: new calls refused, live calls go on", reason)
        elif self.refusing and not refusing:
            worst = max(readings, key=lambda reading: reading.share, default=None)
            used = f" ({worst.used / 1e6:.0f} of {worst.limit / 1e6:.0f} MB)" if worst else ""
            log.warning("memory back under its limit%s: new calls admitted again", used)
        self.refusing = refusing
        return reason
