"""Run the real server (uvicorn on 127.0.0.1, a free port) inside a test's event loop.

    async with running_server(settings, voice=...) as server:
        server.url          # http://127.0.0.1:<port>
        server.switchboard  # the hub, desks and live calls, for white-box checks

Leaving the block shuts uvicorn down the ordinary way (lifespan shutdown included).

`brief_research_desk()` is the research desk for tests whose transport plays the agent's
audio in real time (WebRTC, the browser): the same two analysts, but the second confirms
in one line instead of reading the same entry again, so the result plays in about 11 s,
not 21.
"""

from __future__ import annotations

import contextlib
import tomllib
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from starlette.applications import Starlette

from voicehub.core.clock import Clock
from voicehub.desks.config import DeskConfig
from voicehub.desks.desk import Desk, build_desk
from voicehub.desks.voice_stack import VoiceStack
from voicehub.server.app import create_app
from voicehub.server.app_state import running_parts
from voicehub.server.calls import Switchboard
from voicehub.server.in_loop import LoopServer, serving_in_loop
from voicehub.server.parts import ServerParts
from voicehub.server.settings import ServerSettings

CHANNELS = Path(__file__).resolve().parents[1] / "channels"
_SECOND_READING = 'reply = "I checked our notes as well. {result}"'


def brief_research_desk() -> Desk:
    """`channels/research.toml` with analyst-b's reply cut to its first sentence (it still
    runs its lookup): the result is analyst-a's finding, then a short confirmation."""
    text = (CHANNELS / "research.toml").read_text()
    assert _SECOND_READING in text, "analyst-b's reply changed: update brief_research_desk"
    text = text.replace(_SECOND_READING, 'reply = "I checked our notes as well."')
    return build_desk(DeskConfig.model_validate(tomllib.loads(text)), base_dir=CHANNELS)


_Server = LoopServer  # uvicorn that says when it listens (the fakes serve on it too)


@dataclass
class RunningServer:
    """A server started by `running_server`."""

    app: Starlette
    port: int

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}"

    @property
    def parts(self) -> ServerParts:
        parts = running_parts(self.app)
        assert parts is not None, "the server has not started"
        return parts

    @property
    def switchboard(self) -> Switchboard:
        return self.parts.board

    async def get(self, path: str, **options: Any) -> httpx.Response:
        async with httpx.AsyncClient(base_url=self.url, timeout=10) as client:
            return await client.get(path, **options)


@contextlib.asynccontextmanager
async def running_server(
    settings: ServerSettings,
    *,
    voice: VoiceStack | None = None,
    desks: Mapping[str, Desk] | None = None,
    phone_clock: Clock | None = None,
) -> AsyncIterator[RunningServer]:
    """Serve `settings` (host forced to 127.0.0.1, port to a free one) until the block ends."""
    settings = settings.model_copy(update={"log_level": "warning"})
    app = create_app(settings, voice=voice, desks=desks, phone_clock=phone_clock)
    async with serving_in_loop(app, settings) as port:
        yield RunningServer(app, port)
