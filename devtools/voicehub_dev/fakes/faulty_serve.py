"""`voicehub` with every call's recognizer and voice wrapped in `speech_faults`, and the
event loop watched for a stall order, for the faults bench:

    VOICEHUB_DEV_FAULTS=/tmp/faults.json python -m voicehub_dev.fakes.faulty_serve serve ...

The arguments are `voicehub`'s. The control file may be missing or empty (no fault). The
product is not changed: the desk stacks' provider factories are wrapped, here only.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from voicehub_dev.fakes.speech_faults import FaultControl, FaultySTT, faulty_tts

__all__ = ["CONTROL_ENV", "install", "main"]

CONTROL_ENV = "VOICEHUB_DEV_FAULTS"


def install(control: FaultControl) -> None:
    """Wrap the offline and Deepgram stacks' recognizers and voices; start watching
    `control` on the server's loop once the first call's providers are made."""
    from voicehub.desks import deepgram_stack, offline_stack

    watching: list[asyncio.Task[None]] = []

    def watch() -> None:
        if not watching:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                return
            watching.append(loop.create_task(control.watch(), name="voicehub-dev-faults"))

    def stt(make: Callable[..., Any]) -> Callable[..., Any]:
        def made(*args: Any) -> Any:
            watch()
            return FaultySTT(make(*args), control)

        return made

    def tts(make: Callable[..., Any]) -> Callable[..., Any]:
        def made(*args: Any) -> Any:
            watch()
            return faulty_tts(make(*args), control)

        return made

    for module in (offline_stack, deepgram_stack):
        module.speech_to_text_for = stt(module.speech_to_text_for)  # type: ignore[attr-defined]
        module.new_tts = tts(module.new_tts)  # type: ignore[attr-defined]


def main() -> None:
    install(FaultControl(Path(os.environ.get(CONTROL_ENV, "/nonexistent"))))
    from voicehub.cli import main as voicehub_main

    sys.exit(voicehub_main(sys.argv[1:]))


if __name__ == "__main__":
    main()
