"""The server's parts, built in one place: `build_server` opens the store, `ServerParts`
builds every part on it.

    parts = await build_server(settings, desks, voice)   # the store opened, all parts built
    await parts.start()                                   # set running, in order
    ...                                                   # routes read `parts_of(request)`
    await parts.aclose()                                  # stopped, in reverse

Each part is given what it needs when it is constructed, in dependency order; what watches
the calls is subscribed to the call lifecycle here, in one list, in the order it sees them
(the metrics wrap a call's transport before the recording sees it). The app's lifespan
(`voicehub.server.app`) builds, starts, yields and closes them; its routes and middleware
find them with `voicehub.server.app_state.parts_of`.
"""

from __future__ import annotations

import gc
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from voicehub.core.clock import Clock, SystemClock
from voicehub.core.redaction import Redactor, redact_logs
from voicehub.core.store.choice import describe_store
from voicehub.core.tracing import NO_TRACING
from voicehub.desks.call_admission import CallAdmission, LoadMeter
from voicehub.desks.privacy import process_redactor
from voicehub.desks.runtime import ProcessRuntime
from voicehub.hub import new_instance_id
from voicehub.recordings.folder import RecordingFolder
from voicehub.server.access import AccessTokens
from voicehub.server.admission_memory import MemoryGuard
from voicehub.server.call_metrics import CallMetrics
from voicehub.server.call_recordings import CallRecordings
from voicehub.server.call_starts import CallStartLimits
from voicehub.server.call_telemetry import CallTelemetry
from voicehub.server.calls import Switchboard
from voicehub.server.desk_reload import DeskReloader
from voicehub.server.drain import Drain
from voicehub.server.entry_gate import Door
from voicehub.server.erasure import ConversationEraser
from voicehub.server.loop_health import LoopHealth
from voicehub.server.metrics import ServerMetrics
from voicehub.server.retention import RetentionSweeper
from voicehub.server.telephony import Telephony
from voicehub.server.webrtc import WebRTCDesk
from voicehub.telephony.carriers import (
    carrier_calls,
    carrier_redirectors,
    load_verifiers,
    voice_path,
)
from voicehub.telephony.line import public_url
from voicehub.telephony.stream_tokens import StreamTokens
from voicehub.telephony.twilio.callback import dialer_from
from voicehub.telephony.twilio.takeover import PhoneTakeover
from voicehub.voice.providers.offline.recognizer_load import offline_recognizer_load

if TYPE_CHECKING:
    from voicehub.desks.desk import Desk
    from voicehub.desks.voice_stack import VoiceStack
    from voicehub.server.calls import LiveCall
    from voicehub.server.settings import ServerSettings
    from voicehub.telemetry.setup import Tracing, TracingSettings
    from voicehub.voice.transport import CallTransport

__all__ = ["ServerParts", "build_server"]

log = logging.getLogger("voicehub.server")


class ServerParts:
    """Everything one server runs, built on its opened `runtime` (see the module): each
    part constructed with what it needs, in dependency order. `metrics` wraps the
    runtime's store (so it comes first); `traces` is the tracing `OTEL_*` turned on (or
    None); `phone_clock` times stream tokens, keypad and call-back delays. `ready` turns
    True once `start` is done (`/ready` says so from then on)."""

    def __init__(
        self,
        settings: ServerSettings,
        runtime: ProcessRuntime,
        metrics: ServerMetrics,
        traces: Tracing | None = None,
        phone_clock: Clock | None = None,
    ) -> None:
        self.settings, self.runtime, self.metrics = settings, runtime, metrics
        clock = metrics.clock
        hub, calls = runtime.hub, runtime.calls
        self.board = board = Switchboard(calls, settings)
        self.access = AccessTokens(hub.store, clock, wall=hub.wall)
        self.telemetry = telemetry = CallTelemetry(hub, metrics, traces)
        folder = RecordingFolder(settings.recordings_folder, runtime.number_key)
        self.recordings = recordings = CallRecordings(hub, folder)
        self.retention = RetentionSweeper(
            ConversationEraser(hub.store, folder, wall=hub.wall),
            lambda: {name: desk.config.privacy.keep_days for name, desk in runtime.desks.items()},
            lambda room_id: room_id in calls.calls or room_id in hub.rooms,
            clock,
        )
        self.webrtc = webrtc = WebRTCDesk(board)
        self.drain = drain = Drain(
            clock, settings.drain_seconds, board, (webrtc.close_all,), runtime.peers_alive
        )

        phone_timer = phone_clock if phone_clock is not None else SystemClock()
        rest = dialer_from(settings)  # None: no REST API set up
        # Telnyx, Plivo and Vonage: their webhooks' verifiers (imported now, not at the first
        # call) and the REST call control of each whose credentials are set
        load_verifiers(settings.carriers)
        carriers = carrier_calls(settings.carriers, lambda path: public_url(settings, path))
        # Calls nobody carries are redirected back through their carrier's REST API
        self.takeover = takeover = PhoneTakeover(
            runtime.store,
            runtime.instance_id,
            {**({"twilio": rest} if rest is not None else {}), **carrier_redirectors(carriers)},
            lambda carrier, desk: public_url(settings, voice_path(carrier, desk)),
            phone_timer,
            wall=hub.wall,
        )
        self.telephony = telephony = Telephony(
            board,
            settings,
            phone_timer,
            rest,
            carriers,
            # signed under the store's secret: any instance lets in a stream another minted
            StreamTokens(phone_clock, secret=runtime.number_key),
            runtime.number_key,
            stream_ended=takeover.stream_ended if rest is not None else None,
            draining=lambda: drain.draining,
        )
        self.phone = telephony.line

        def live_calls() -> int:
            return len(calls.calls)

        def calls_counted() -> int:  # the calls admitted that are still starting too
            return live_calls() + meter.pending

        meter = LoadMeter(
            calls=live_calls,
            max_calls=settings.max_calls,
            parts={"recognizers": offline_recognizer_load(calls=calls_counted)},
        )
        self.memory = MemoryGuard()  # near its memory limit: no new calls
        self.admission = admission = CallAdmission(
            meter, settings.max_load, guards=(self.memory.busy,)
        )
        starts = (
            CallStartLimits(
                per_minute=settings.call_starts_per_minute,
                burst=settings.call_start_burst,
                clock=clock,
            )
            if settings.call_starts_per_minute is not None
            else None
        )
        self.door = Door(drain, admission, metrics.refused, starts)

        def lagged(lag: float) -> None:
            metrics.loop_lag.observe(lag)
            meter.observe_lag(lag)

        # how late the loop wakes a timer: for /health (`voicehub soak`), /metrics, the load
        self.loop_health = LoopHealth(clock, observe=lagged)
        # a desk file saved loads the models of its desk as the start did: at once when
        # prewarming, else on the desk's first call
        prepare = runtime.voice.prepare if settings.prewarm else None
        self.reloader = (
            DeskReloader(settings.channels_dir, runtime.desks, prepare=prepare)
            if settings.reload_desks
            else None
        )
        metrics.draining.set_function(lambda: float(drain.draining))
        for observer in (
            board.memory_observer,
            CallMetrics(metrics, board),
            telemetry,
            recordings,
            telephony,
            _Starts(meter),
            drain,
        ):
            calls.observe(observer)
        calls.tap(recordings)
        calls.observe_turns(telemetry)
        if takeover.redirectors:  # phone calls a lost instance carried are taken up here
            runtime.on_instance_lost(takeover.instance_lost)
        self.redactor = process_redactor(d.config.privacy for d in runtime.desks.values())
        self._unredact: Callable[[], None] | None = None
        self.ready = False

    async def start(self) -> None:
        """Start every part; the models load first (with `prewarm`)."""
        if self.redactor is not None and self._unredact is None:
            self._unredact = redact_logs(self.redactor)
        await self.runtime.start(prepare=self.settings.prewarm)
        self.telephony.start()
        if self.reloader is not None:
            self.reloader.start()
        # Models and modules loaded at start live as long as the process: out of the
        # collector's view, full collections stay short with many calls.
        gc.collect()
        gc.freeze()
        log.info(
            "serving desks %s from %s",
            ", ".join(sorted(self.runtime.desks)),
            describe_store(self.settings),
        )
        self.loop_health.start()  # from here: loading is done
        self.retention.start()
        self.ready = True

    async def aclose(self) -> None:
        """Stop every part; the calls are handed over (callers who come back go on
        elsewhere) and undelivered results stay in the store."""
        self.ready = False
        if self.reloader is not None:
            await self.reloader.aclose()
        await self.loop_health.aclose()
        await self.retention.aclose()
        await self.board.close_all()
        await self.webrtc.close_all()
        await self.telephony.aclose()
        await self.takeover.aclose()
        await self.recordings.aclose()
        await self.runtime.aclose()
        await self.telemetry.aclose()
        if self._unredact is not None:
            self._unredact()
            self._unredact = None


async def build_server(
    settings: ServerSettings,
    desks: dict[str, Desk],
    voice: VoiceStack,
    *,
    tracing: TracingSettings | None = None,
    phone_clock: Clock | None = None,
) -> ServerParts:
    """Open the store and build every part of the server on it (see the module).
    `tracing` turns traces on (`OTEL_*`); `phone_clock` times stream tokens, keypad and
    call-back delays (a virtual clock in tests)."""
    instance_id = settings.instance_id or new_instance_id()
    redactor = process_redactor(desk.config.privacy for desk in desks.values())
    traces = _start_tracing(tracing, instance_id, redactor)
    metrics = ServerMetrics(SystemClock())
    runtime = await ProcessRuntime.open(
        settings,
        desks,
        voice,
        wrap_store=metrics.timed,
        instance_id=instance_id,
        tracer=traces.tracer if traces is not None else NO_TRACING,
    )
    return ServerParts(settings, runtime, metrics, traces, phone_clock)


def _start_tracing(
    settings: TracingSettings | None, instance_id: str, redactor: Redactor | None
) -> Tracing | None:
    if settings is None:
        return None
    from voicehub.telemetry.setup import start_tracing

    resource = {"service.instance.id": instance_id}
    tracing = start_tracing(settings, resource=resource, redactor=redactor)
    log.info("tracing on: %s over %s", settings.exporter, settings.protocol)
    return tracing


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
