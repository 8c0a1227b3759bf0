"""Run a measurement on one CPU: every thread of the process (the event loop, the VAD's
batch threads, the recognizers' threads) pinned to it, so "calls per core" means one core,
not the loop's core plus what helper threads take from the other."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

__all__ = ["pinned_to_one_cpu"]


def _threads() -> list[int]:
    try:
        return [int(tid.name) for tid in Path("/proc/self/task").iterdir()]
    except OSError:  # not Linux: the calling thread only
        return [0]


@contextlib.contextmanager
def pinned_to_one_cpu(cpu: int | None = None) -> Iterator[str]:
    """Pin every thread (and those started inside) to `cpu` (default: the lowest allowed);
    yields a description for the figures ("unpinned: ..." where pinning is not possible)."""
    if not hasattr(os, "sched_setaffinity"):
        yield "unpinned: this platform cannot pin threads"
        return
    allowed = os.sched_getaffinity(0)
    target = min(allowed) if cpu is None else cpu
    saved: dict[int, set[int]] = {}
    for tid in _threads():
        with contextlib.suppress(OSError):  # a thread that ended meanwhile
            saved[tid] = os.sched_getaffinity(tid)
            os.sched_setaffinity(tid, {target})
    try:
        yield f"pinned to CPU {target} (all {len(saved)} threads, and threads started since)"
    finally:
        for tid, cpus in saved.items():
            with contextlib.suppress(OSError):
                os.sched_setaffinity(tid, cpus)
        for tid in _threads():  # threads started while pinned
            if tid not in saved:
                with contextlib.suppress(OSError):
                    os.sched_setaffinity(tid, allowed)
