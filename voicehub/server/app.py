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
    GET  /ready, /metrics           readiness and Prometheus (see `voicehub.server.probes`)
    POST /twilio/{desk}/voice       phone calls (see `voicehub.telephony.twilio.webhooks`)

Shutdown ends the calls (their delivery detaches, so undelivered results are held in the
store) and closes the hub; a restarted server speaks them when the conversation calls back.
SIGTERM drains first (`voicehub.server.drain`): no new calls, live ones are handed over to
another instance (or may finish). Above `max_load` (or `max_calls`) new calls are refused
busy (`voicehub.server.entry_gate`, `voicehub.desks.admission`).
"""

from __future__ import annotations

import asyncio
import gc
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

from voicehub.core.clock import Clock, SystemClock
from voicehub.core.store.choice import describe_store
from voicehub.desks.admission import Admission, LoadMeter
from voicehub.desks.desk import Desk, load_desks
from voicehub.desks.runtime import ProcessRuntime
from voicehub.desks.voice_stack import OfflineSessionFactory, SessionFactory
from voicehub.errors import ConfigError
from voicehub.recordings.folder import RecordingFolder
from voicehub.server.api import api_routes
from voicehub.server.call_recordings import CallRecordings
from voicehub.server.call_telemetry import CallTelemetry
from voicehub.server.calls import Switchboard
from voicehub.server.desk_reload import DeskReloader
from voicehub.server.drain import Drain
from voicehub.server.entry_gate import Door, EntryGate
from voicehub.server.loop_health import LoopHealth
from voicehub.server.metrics import ServerMetrics
from voicehub.server.probes import probe_routes
from voicehub.server.recording_api import recording_routes
from voicehub.server.settings import ServerSettings
from voicehub.server.telephony import Telephony, telephony_routes
from voicehub.server.webrtc import WebRTCDesk, webrtc_routes
from voicehub.telemetry.setup import tracing_from_env
from voicehub.telephony.stream_tokens import StreamTokens
from voicehub.telephony.twilio.takeover import PhoneTakeover
from voicehub.telephony.twilio.webhooks import PhoneLine, twilio_routes
from voicehub.voice.providers.offline.recognizer_load import offline_recognizer_load

if TYPE_CHECKING:
    import uvicorn

    from voicehub.server.calls import LiveCall
    from voicehub.voice.transport import CallTransport

__all__ = ["WEB_DIR", "create_app", "serve", "uvicorn_config"]

log = logging.getLogger("voicehub.server")

WEB_DIR = Path(__file__).resolve().parent / "web"


def create_app(
    settings: ServerSettings,
    *,
    session_factory: SessionFactory | None = None,
    desks: Mapping[str, Desk] | None = None,
    phone_clock: Clock | None = None,
) -> Starlette:
    """Build the app. Desks load now (a broken desk file raises ConfigError naming it);
    the store, hub and voice models open when the app starts (its lifespan).
    `phone_clock` times stream tokens and call-back delays (a virtual clock in tests)."""
    loaded = dict(desks) if desks is not None else load_desks(settings.channels_dir)
    if not loaded:
        raise ConfigError(f"{settings.channels_dir}: no desk files (*.toml) to serve")
    factory = (
        session_factory
        if session_factory is not None
        else OfflineSessionFactory(batch_vad=settings.batch_vad)
    )
    drain = Drain(SystemClock(), settings.drain_seconds)
    door = Door(drain)  # new calls: refused while draining or busy (`EntryGate`)
    tracing = tracing_from_env()  # OTEL_* variables; a bad value fails here, naming it

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        metrics = app.state.metrics = ServerMetrics(SystemClock())
        runtime = app.state.runtime = ProcessRuntime(
            settings, loaded, factory, wrap_store=metrics.timed
        )
        await runtime.start(prepare=settings.prewarm)
        board = Switchboard(runtime.calls, settings)
        metrics.watch(board)
        hub = runtime.hub
        telemetry = CallTelemetry.start(hub, board, factory, metrics, tracing)
        folder = RecordingFolder(settings.recordings_folder)
        app.state.recordings = recordings = CallRecordings(hub, folder)  # desks with [record]
        board.observers.append(recordings)
        board.session_taps.append(recordings)
        clock = phone_clock if phone_clock is not None else SystemClock()
        # signed under the store's secret: any instance lets in a stream another one minted
        tokens = StreamTokens(phone_clock, secret=runtime.number_key)
        app.state.phone = line = PhoneLine(board, settings, tokens, runtime.number_key, clock=clock)
        app.state.telephony = telephony = Telephony(
            line, board, settings, clock, draining=lambda: drain.draining
        )
        takeover = app.state.phone_takeover = _phone_takeover(runtime, line, telephony, clock)
        if takeover is not None:
            line.stream_ended = takeover.stream_ended
            runtime.on_instance_lost(takeover.instance_lost)
        app.state.callbacks, app.state.transfers = telephony.callbacks, telephony.transfers
        telephony.start()
        app.state.webrtc = WebRTCDesk(board)

        def live_calls() -> int:
            return len(board.calls)

        meter = LoadMeter(
            calls=live_calls,
            max_calls=settings.max_calls,
            parts={"recognizers": offline_recognizer_load(calls=live_calls)},
        )
        board.observers.append(_Starts(meter))
        app.state.admission = door.admission = Admission(meter, settings.max_load)
        door.refused = metrics.refused

        def lagged(lag: float) -> None:
            metrics.loop_lag.observe(lag)
            meter.observe_lag(lag)

        # how late the loop wakes a timer: for /health (`voicehub soak`), /metrics, the load
        app.state.loop_health = loop_health = LoopHealth(metrics.clock, observe=lagged)
        drain.watch(board, app.state.webrtc.close_all, peers=runtime.peers_alive)
        app.state.reloader = reloader = _desk_reloader(settings, loaded, factory)
        metrics.draining.set_function(lambda: float(drain.draining))
        app.state.switchboard = board  # last: /ready says ready from here on
        # Models and modules loaded at start live as long as the process: move them out of
        # the collector's view, so full collections stay short with many calls (measured:
        # pauses of 20-190 ms at 75 calls without it).
        gc.collect()
        gc.freeze()
        log.info("serving desks %s from %s", ", ".join(sorted(loaded)), describe_store(settings))
        loop_health.start()  # from here: loading is done
        try:
            yield
        finally:
            if reloader is not None:
                await reloader.aclose()
            await loop_health.aclose()
            await board.close_all()  # handed over: callers who come back go on elsewhere
            await app.state.webrtc.close_all()
            await telephony.aclose()
            if takeover is not None:
                await takeover.aclose()
            await recordings.aclose()
            await runtime.aclose()  # undelivered results stay in the store
            await telemetry.aclose()

    routes = [
        Route("/", index),
        Mount("/static", StaticFiles(directory=WEB_DIR), name="static"),
        WebSocketRoute("/desks/{desk}/call", call),
        *webrtc_routes(),
        *api_routes(),
        *recording_routes(),
        *probe_routes(),
        *twilio_routes(),
        *telephony_routes(),
    ]
    app = Starlette(routes=routes, lifespan=lifespan, middleware=[Middleware(EntryGate, door=door)])
    app.state.drain, app.state.token = drain, settings.token
    return app


class _Starts:
    """Tells the load meter each call that started (admitted calls count until then)."""

    def __init__(self, meter: LoadMeter) -> None:
        self.meter = meter

    def call_started(self, call: LiveCall, transport: CallTransport) -> CallTransport:
        self.meter.started()
        return transport

    def call_accepted(self, call: LiveCall) -> None:
        return None

    def call_ended(self, call: LiveCall) -> None:
        return None


def _desk_reloader(
    settings: ServerSettings, desks: dict[str, Desk], factory: SessionFactory
) -> DeskReloader | None:
    """With `--reload`: watch the desk folder, swapping changed desks into `desks`."""
    if not settings.reload_desks:
        return None
    reloader = DeskReloader(settings.channels_dir, desks, prepare=factory.prepare)
    reloader.start()
    return reloader


def _phone_takeover(
    runtime: ProcessRuntime, line: PhoneLine, telephony: Telephony, clock: Clock
) -> PhoneTakeover | None:
    """Taking up phone calls no instance carries, when the REST API is set up."""
    if telephony.rest is None:
        return None
    return PhoneTakeover(
        runtime.store,
        runtime.instance_id,
        telephony.rest,
        lambda desk: line.public(f"/twilio/{desk}/voice?resume=1"),
        clock,
        wall=runtime.hub.wall,
    )


async def index(request: Request) -> FileResponse:
    """The console page."""
    return FileResponse(WEB_DIR / "index.html", headers={"Cache-Control": "no-cache"})


async def call(websocket: WebSocket) -> None:
    """One call to a desk."""
    board: Switchboard = websocket.app.state.switchboard
    await board.handle(websocket, websocket.path_params["desk"])


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


def serve(settings: ServerSettings, *, ready: Callable[[str], None] | None = None) -> bool:
    """Run the server until interrupted (refuses a public address without a token); True
    when it stopped by draining (SIGTERM), False when it stopped at once (Ctrl-C).

    `ready` is called with the server's URL once it accepts connections (with the port
    the system chose when `settings.port` is 0).
    """
    import uvicorn

    settings.check_bind()
    app = create_app(settings)
    config = uvicorn_config(app, settings)
    drain: Drain = app.state.drain

    class Server(uvicorn.Server):
        loop: asyncio.AbstractEventLoop | None = None

        async def startup(self, sockets: Any = None) -> None:
            self.loop = asyncio.get_running_loop()
            await super().startup(sockets=sockets)
            if self.started and ready is not None:
                bound = [s.getsockname() for server in self.servers for s in server.sockets]
                port = bound[0][1] if bound else settings.port
                ready(settings.model_copy(update={"port": port}).base_url)

        def handle_exit(self, sig: int, frame: Any) -> None:
            # The first SIGTERM of a running server drains; uvicorn would stop at once (and
            # re-raise the signal, so the process would not exit 0).
            if sig != signal.SIGTERM or drain.draining or not self.started or self.loop is None:
                super().handle_exit(sig, frame)
                return
            drain.draining = True  # /ready answers 503 from now on
            self.loop.call_soon_threadsafe(drain.begin, self._stop)

        def _stop(self) -> None:
            self.should_exit = True

    Server(config).run()
    return drain.draining
