"""The ASGI app: desk calls over WebSocket, a read-only REST view, and the console page.

    app = create_app(ServerSettings(channels_dir=Path("channels")))
    serve(settings)   # uvicorn on settings.host:settings.port

One `ProcessRuntime` per process (`voicehub.desks.runtime`: store, hub, heartbeat,
recovery, announcements, call lifecycle; SQLite, or Redis shared by several instances); each
call's room runs its desk's orchestration (see `voicehub.server.calls`). Routes:

    GET  /                          the console page (call a desk with the microphone)
    GET  /static/...                its script, worklet and style
    WS   /desks/{desk}/call         a call (protocol: `voicehub.transports.websocket`)
    POST /desks/{desk}/webrtc       a WebRTC call (signaling: `voicehub.server.webrtc`)
    GET  /health, /api/...          see `voicehub.server.api`
    GET  /api/rooms/{id}/recordings desks with [record] (see `voicehub.server.recording_api`)
    DELETE /api/rooms/{id}          delete a conversation (see `voicehub.server.conversation_api`)
    GET  /ready, /metrics           readiness and Prometheus (see `voicehub.server.probes`)
    POST /twilio/{desk}/voice       phone calls (see `voicehub.telephony.twilio.webhooks`)

Shutdown ends the calls (their delivery detaches, so undelivered results are held in the
store) and closes the hub; a restarted server speaks them when the conversation calls back.
SIGTERM drains first (`voicehub.server.drain`): no new calls, live ones are handed over to
another instance (or may finish). Above `max_load` (or `max_calls`) new calls are refused
busy (`voicehub.server.entry_gate`, `voicehub.desks.call_admission`).
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import FileResponse
from starlette.routing import Mount, Route, WebSocketRoute
from starlette.staticfiles import StaticFiles
from starlette.websockets import WebSocket

from voicehub.desks.desk import Desk
from voicehub.desks.folder_scan import DeskScan, scan_desk_folder
from voicehub.desks.voice_stack import VoiceStack, default_voice_stacks
from voicehub.errors import ConfigError
from voicehub.server.access_gate import AccessGate
from voicehub.server.api import api_routes
from voicehub.server.app_state import keep, keep_scan, parts_of, running_parts
from voicehub.server.conversation_api import conversation_routes
from voicehub.server.entry_gate import Door, EntryGate
from voicehub.server.parts import build_server
from voicehub.server.probes import probe_routes
from voicehub.server.recording_api import recording_routes
from voicehub.server.settings import ServerSettings
from voicehub.server.telephony import telephony_routes
from voicehub.server.webrtc import webrtc_routes
from voicehub.telemetry.setup import tracing_from_env
from voicehub.telephony.twilio.webhooks import twilio_routes

if TYPE_CHECKING:
    import uvicorn

    from voicehub.core.clock import Clock
    from voicehub.server.access import AccessTokens
    from voicehub.server.drain import Drain

__all__ = ["WEB_DIR", "create_app", "serve", "uvicorn_config"]

log = logging.getLogger("voicehub.server")

WEB_DIR = Path(__file__).resolve().parent / "web"


def create_app(
    settings: ServerSettings,
    *,
    voice: VoiceStack | None = None,
    desks: Mapping[str, Desk] | None = None,
    phone_clock: Clock | None = None,
) -> Starlette:
    """Build the app. Desks load now, file by file: the good ones are served and each
    broken file is logged (file:line, what is wrong) and listed by `/ready` and `/health`;
    with no good desk at all, ConfigError lists every error. The store, hub, voice models
    and the rest open when the app starts (its lifespan:
    `voicehub.server.parts.build_server`). `voice` runs the calls: the registered voice
    stacks by default (closed with the app; a stack passed in is the caller's to close).
    `phone_clock` times stream tokens and call-back delays (a virtual clock in tests)."""
    scan = DeskScan(dict(desks)) if desks is not None else scan_desk_folder(settings.channels_dir)
    loaded = scan.desks
    if not loaded and scan.broken:
        raise ConfigError(
            f"{settings.channels_dir}: no desk file builds, nothing to serve:\n{scan.problems()}"
        )
    if not loaded:
        raise ConfigError(f"{settings.channels_dir}: no desk files (*.toml) to serve")
    for problem in scan.broken.values():
        log.error("desk file not served: %s", problem)
    stacks = voice if voice is not None else default_voice_stacks(batch_vad=settings.batch_vad)
    tracing = tracing_from_env()  # OTEL_* variables; a bad value fails here, naming it

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        parts = await build_server(
            settings, loaded, stacks, tracing=tracing, phone_clock=phone_clock
        )
        keep(app, parts)
        try:
            await parts.start()
            yield
        finally:
            await parts.aclose()
            if voice is None:
                await stacks.aclose()

    def door() -> Door | None:
        parts = running_parts(app)
        return parts.door if parts is not None else None

    routes = [
        Route("/", index),
        Mount("/static", StaticFiles(directory=WEB_DIR), name="static"),
        WebSocketRoute("/desks/{desk}/call", call),
        *webrtc_routes(),
        *conversation_routes(),
        *api_routes(),
        *recording_routes(),
        *probe_routes(),
        *twilio_routes(),
        *telephony_routes(),
    ]

    def access() -> AccessTokens | None:
        parts = running_parts(app)
        return parts.access if parts is not None else None

    middleware = [
        Middleware(AccessGate, tokens=access, shared=lambda: settings.token),
        Middleware(EntryGate, door=door),
    ]
    app = Starlette(routes=routes, lifespan=lifespan, middleware=middleware)
    keep_scan(app, scan)
    return app


async def index(request: Request) -> FileResponse:
    """The console page."""
    return FileResponse(WEB_DIR / "index.html", headers={"Cache-Control": "no-cache"})


async def call(websocket: WebSocket) -> None:
    """One call to a desk."""
    await parts_of(websocket).board.handle(websocket, websocket.path_params["desk"])


def uvicorn_config(app: Starlette, settings: ServerSettings) -> uvicorn.Config:
    """uvicorn settings for `app`: the WebSocket size limit sits above the app's own, so
    a merely oversized message gets the app's clear close reason."""
    import uvicorn

    return uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        ws_max_size=2 * max(settings.max_audio_bytes, settings.max_text_bytes),
        ws_per_message_deflate=False,  # PCM does not compress; save the CPU
        log_level=settings.log_level,
        loop="asyncio",  # the loop the tests run on; uvloop gains little here
        timeout_graceful_shutdown=5,
    )


def serve(
    settings: ServerSettings, *, ready: Callable[[str, DeskScan], None] | None = None
) -> bool:
    """Run the server until interrupted (refuses a public address without a token); True
    when it stopped by draining (SIGTERM), False when it stopped at once (Ctrl-C).

    `ready` is called with the server's URL once it accepts connections (with the port
    the system chose when `settings.port` is 0) and the desks it started with (served and
    broken).
    """
    import uvicorn

    settings.check_bind()
    app = create_app(settings)
    config = uvicorn_config(app, settings)

    def draining() -> Drain | None:
        parts = running_parts(app)
        return parts.drain if parts is not None else None

    class Server(uvicorn.Server):
        loop: asyncio.AbstractEventLoop | None = None

        async def startup(self, sockets: Any = None) -> None:
            self.loop = asyncio.get_running_loop()
            await super().startup(sockets=sockets)
            if self.started and ready is not None:
                bound = [s.getsockname() for server in self.servers for s in server.sockets]
                port = bound[0][1] if bound else settings.port
                ready(settings.model_copy(update={"port": port}).base_url, app.state.desk_scan)

        def handle_exit(self, sig: int, frame: Any) -> None:
            # The first SIGTERM of a running server drains; uvicorn would stop at once (and
            # re-raise the signal, so the process would not exit 0).
            drain = draining()
            if (
                sig != signal.SIGTERM
                or drain is None
                or drain.draining
                or not self.started
                or self.loop is None
            ):
                super().handle_exit(sig, frame)
                return
            drain.draining = True  # /ready answers 503 from now on
            self.loop.call_soon_threadsafe(drain.begin, self._stop)

        def _stop(self) -> None:
            self.should_exit = True

    Server(config).run()
    drain = draining()
    return drain is not None and drain.draining
