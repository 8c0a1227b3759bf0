"""The desks served in this process for `voicehub test` without `--url`: the real server
(`create_app`, the embedded voice stack) on a free 127.0.0.1 port, in this event loop, on a
store in a temporary folder, stopped when the scenarios are done."""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

from voicehub.server.app import create_app
from voicehub.server.in_loop import serving_in_loop
from voicehub.server.settings import ServerSettings

__all__ = ["serving"]


@contextlib.asynccontextmanager
async def serving(desk_folder: Path) -> AsyncIterator[str]:
    """Serve the desks of `desk_folder` until the block ends; yields the base URL."""
    with tempfile.TemporaryDirectory(prefix="voicehub-test-") as folder:
        settings = ServerSettings(
            channels_dir=desk_folder, db_path=Path(folder) / "voicehub.db", log_level="warning"
        )
        async with serving_in_loop(create_app(settings), settings) as port:
            yield f"http://127.0.0.1:{port}"
