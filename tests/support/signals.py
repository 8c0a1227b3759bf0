"""Children that hear Ctrl-C as a terminal's would, and what a child does with its signals."""

from __future__ import annotations

import signal
from pathlib import Path


def terminal_ctrl_c() -> None:
    """`preexec_fn` for a child the test will Ctrl-C: SIGINT at its default, as a command
    started from a terminal has it, whatever this process inherited or was left with."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def signal_masks(pid: int) -> str:
    """The child's blocked, ignored and caught signal masks (for a failure message)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return f"process {pid} is gone"
    wanted = ("SigBlk", "SigIgn", "SigCgt")
    masks = [line for line in status.splitlines() if line.startswith(wanted)]
    return f"process {pid}: " + ", ".join(masks)
