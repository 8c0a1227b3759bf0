"""How to type `voicehub` in the user's shell, for the hints the commands print."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

__all__ = ["command_name"]


def command_name() -> str:
    """How to type `voicehub` in this shell: plain when it is on PATH, else its path
    (`make run` runs `.venv/bin/voicehub`, which a fresh shell does not find)."""
    invoked = Path(sys.argv[0])
    if invoked.name != "voicehub":  # `python -m voicehub.cli`
        return f"{_typed(Path(sys.executable), 'python')} -m voicehub.cli"
    return _typed(invoked, "voicehub")


def _typed(program: Path, name: str) -> str:
    found = shutil.which(name)
    if found is not None and Path(found).absolute() == program.absolute():
        return name
    try:
        return str(program.absolute().relative_to(Path.cwd()))
    except ValueError:
        return str(program)
