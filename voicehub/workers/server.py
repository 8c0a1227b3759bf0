"""`voicehub worker`: the desks as a livekit-agents worker (`WorkerOptions`/`AgentServer`).

The worker registers with LiveKit under its agent name (explicit dispatch only), accepts a
job when the job names one of its desks (`voicehub.workers.dispatch`), and reports its load
as voicehub's live calls over its capacity (`voicehub.workers.load`). Each job runs
`DeskEntrypoint` in a process of its own: the `ProcessRuntime` `voicehub serve` runs too (a
hub on the store, SQLite or the Redis `serve` shares; its heartbeat, recovery of lost
instances' work, announcements and call lifecycle), the desk's voice stack, and a `DeskJob`
serving the room's callers. When the job ends (the room closed, or LiveKit ended it), the
call ends, background workers get `shutdown_grace` seconds to finish into the outbox, and
the runtime closes; held results wait in the store for the caller's return. A job that
dies with its caller still in the room is taken up: a sweeping instance (another job, or
the worker's own `standby_runtime`) dispatches the agent to the room again
(`voicehub.workers.redispatch`) and takes the job's tasks over.

The entrypoint and the request handler are picklable objects: livekit-agents hands them to
each job process it starts.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import tempfile
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from voicehub.core.jobs import cancel_and_wait
from voicehub.desks.desk import build_desk
from voicehub.desks.loading import load_desk_folder
from voicehub.desks.runtime import ProcessRuntime
from voicehub.desks.voice_stack import VoiceStack, default_voice_stacks
from voicehub.errors import ConfigError
from voicehub.telephony.livekit_sip import SipAccess, SipControls
from voicehub.voice.providers import vendor_import
from voicehub.workers.dispatch import DispatchError, choose_desk
from voicehub.workers.job import CallRoom, DeskJob
from voicehub.workers.load import CallLoad, machine_cpu
from voicehub.workers.redispatch import LINE_AGENT, LINE_METADATA, LINE_ROOM, RoomRedispatch
from voicehub.workers.settings import WorkerSettings
from voicehub.workers.telemetry import JobTelemetry, job_tracer

with vendor_import("livekit-agents"):
    from livekit import agents

if TYPE_CHECKING:
    from livekit.agents import JobContext, JobRequest

    from voicehub.core.clock import Clock

__all__ = ["DeskEntrypoint", "DeskRequest", "build_server", "run_worker"]

log = logging.getLogger("voicehub.workers")

DESK_ATTRIBUTE = "voicehub.desk"
"""Participant attribute naming the desk the agent in a room speaks for."""


def served_desks(settings: WorkerSettings) -> list[str]:
    """The desks this worker serves; their files are validated here (ConfigError naming a
    broken file or an unknown `desk`)."""
    names = sorted(load_desk_folder(settings.channels_dir))
    if settings.desk is not None and settings.desk not in names:
        raise ConfigError(
            f"{settings.channels_dir}: no desk {settings.desk!r} "
            f"(desks: {', '.join(names) or 'none'})"
        )
    return [settings.desk] if settings.desk is not None else names


class DeskRequest:
    """Accepts a job whose desk this worker serves; rejects it, saying why, otherwise."""

    def __init__(self, desks: list[str]) -> None:
        self.desks = desks

    async def __call__(self, request: JobRequest) -> None:
        job = request.job
        try:
            desk = choose_desk(self.desks, metadata=job.metadata, room_name=job.room.name)
        except DispatchError as exc:
            log.warning("job %s in room %s rejected: %s", job.id, job.room.name, exc)
            await request.reject(terminate=False)  # another worker may serve it
            return
        await request.accept(
            identity=f"voicehub-{desk}-{job.id}",
            name=desk,
            attributes={DESK_ATTRIBUTE: desk},
        )


class DeskEntrypoint:
    """Runs one job: the chosen desk on a hub over the worker's store.

    `voice` and `room` replace the registered voice stacks and the WebRTC room (the
    tests' stand-ins); both must be None in a real worker whose jobs run in processes.
    """

    def __init__(
        self,
        settings: WorkerSettings,
        desks: list[str],
        load: CallLoad,
        *,
        voice: Callable[[], VoiceStack] | None = None,
        room: Callable[[JobContext], CallRoom] | None = None,
    ) -> None:
        self.settings, self.desks, self.load = settings, desks, load
        self._voice, self._room = voice, room

    async def __call__(self, ctx: JobContext) -> None:
        job = ctx.job
        name = choose_desk(self.desks, metadata=job.metadata, room_name=job.room.name)
        desk = build_desk(load_desk_folder(self.settings.channels_dir)[name])
        voice = self._voice() if self._voice is not None else default_voice_stacks()
        # the same runtime as `voicehub serve`: heartbeat, recovery, announcements, calls
        # each job process is an instance of its own (its heartbeat, its leases)
        instance = f"{self.settings.instance_id or 'worker'}-{job.id}"[:64]
        runtime = await ProcessRuntime.open(
            self.settings, {name: desk}, voice, instance_id=instance, tracer=job_tracer()
        )
        # turn histograms; traces when OTEL_* ask
        runtime.calls.observe_turns(JobTelemetry(runtime.hub))
        await runtime.start()
        controls: SipControls | None = None
        if self._room is not None:
            room = self._room(ctx)
        else:
            from livekit.agents import AutoSubscribe

            from voicehub.workers.room import LiveKitCallRoom

            await ctx.connect(auto_subscribe=AutoSubscribe.AUDIO_ONLY)
            room = LiveKitCallRoom(ctx)
            controls = sip_controls(ctx, self.settings, runtime.hub.clock)
        redispatch_lost_rooms(runtime, self.settings)
        line = {
            LINE_ROOM: job.room.name,
            LINE_AGENT: self.settings.registered_name,
            LINE_METADATA: job.metadata,
        }
        desk_job = DeskJob(
            runtime.calls,
            desk,
            room,
            self.load,
            number_key=runtime.number_key,
            line=line,
            controls=controls,
        )
        runner = asyncio.create_task(desk_job.run(), name=f"voicehub-desk-{name}")
        # A transferred caller ends the agent's part: the job leaves the room.
        runner.add_done_callback(lambda done: _left_after_transfer(ctx, done))

        async def shut_down(reason: str) -> None:
            await cancel_and_wait(runner)
            if not await desk_job.wait_for_background_work(self.settings.shutdown_grace):
                log.warning("job %s: background work still running at shutdown", job.id)
            await runtime.aclose()
            log.info("job %s (desk %s) ended: %s", job.id, name, reason)

        ctx.add_shutdown_callback(shut_down)
        log.info("job %s: desk %s in room %s", job.id, name, job.room.name)


def redispatch_lost_rooms(runtime: ProcessRuntime, settings: WorkerSettings) -> None:
    """When `runtime`'s sweep finds an instance lost, dispatch an agent again to the rooms
    of its LiveKit calls whose caller stayed (`voicehub.workers.redispatch`)."""
    if not (settings.url and settings.api_key and settings.api_secret):
        return
    redispatch = RoomRedispatch(
        runtime.store,
        runtime.instance_id,
        url=settings.url,
        api_key=settings.api_key,
        api_secret=settings.api_secret,
        wall=runtime.hub.wall,
    )
    runtime.on_instance_lost(redispatch.instance_lost)


@contextlib.asynccontextmanager
async def standby_runtime(settings: WorkerSettings) -> AsyncIterator[ProcessRuntime]:
    """The worker process's own runtime, beside livekit's worker: it serves no call, but
    its sweeps take over the work of lost instances (a job process that died, with no other
    job left to notice) and dispatch agents back to their rooms."""
    folder = load_desk_folder(settings.channels_dir)
    desks = {name: build_desk(folder[name]) for name in served_desks(settings)}
    instance = f"{settings.instance_id or 'worker'}-{uuid.uuid4().hex[:8]}"
    runtime = await ProcessRuntime.open(
        settings, desks, default_voice_stacks(installed=False), instance_id=instance
    )
    await runtime.start(prepare=False)
    try:
        redispatch_lost_rooms(runtime, settings)
        yield runtime
    finally:
        await runtime.aclose()


def sip_controls(ctx: JobContext, settings: WorkerSettings, clock: Clock) -> SipControls:
    """Transfers and keypad tones in the job's room, through livekit's SIP API."""
    room = ctx.room
    access = None
    if settings.url and settings.api_key and settings.api_secret:
        access = SipAccess(settings.url, settings.api_key, settings.api_secret)

    async def publish_dtmf(code: int, digit: str) -> None:
        await room.local_participant.publish_dtmf(code=code, digit=digit)

    return SipControls(room_name=room.name, access=access, publish_dtmf=publish_dtmf, clock=clock)


def _left_after_transfer(ctx: JobContext, runner: asyncio.Task[None]) -> None:
    if not runner.cancelled() and runner.exception() is None:
        ctx.shutdown("the caller was transferred")


def build_server(
    settings: WorkerSettings,
    *,
    executor: str = "process",
    num_idle_processes: int = 1,
    voice: Callable[[], VoiceStack] | None = None,
    room: Callable[[JobContext], CallRoom] | None = None,
) -> tuple[agents.AgentServer, CallLoad]:
    """The livekit `AgentServer` for `settings` and the call load it reports.

    `executor` is "process" (each job in a process, as in production) or "thread";
    `voice` and `room` go to `DeskEntrypoint` (stand-ins, thread executor only).
    """
    desks = served_desks(settings)
    if not desks:
        raise ConfigError(f"{settings.channels_dir}: no desk files (*.toml) to serve")
    executor_type = agents.JobExecutorType(executor)
    metrics = metrics_options(settings)
    cpu = machine_cpu if settings.max_load is not None else None
    load = CallLoad(settings.capacity, context=_mp_context(executor_type), cpu=cpu)
    entrypoint = DeskEntrypoint(settings, desks, load, voice=voice, room=room)
    options = agents.WorkerOptions(
        entrypoint_fnc=entrypoint,
        request_fnc=DeskRequest(desks),
        load_fnc=load.load,
        load_threshold=min(load.threshold(), settings.max_load or 1.0),
        agent_name=settings.registered_name,
        job_executor_type=executor_type,
        num_idle_processes=num_idle_processes,
        shutdown_process_timeout=settings.shutdown_grace + 10.0,
        ws_url=settings.url,
        api_key=settings.api_key,
        api_secret=settings.api_secret,
        port=settings.http_port,
        **metrics,
    )
    return agents.AgentServer.from_server_options(options), load


def metrics_options(settings: WorkerSettings) -> dict[str, Any]:
    """The `WorkerOptions` of livekit's Prometheus endpoint in multiprocess mode: each job
    process writes its figures (the per-turn histograms) to files in one folder, the
    endpoint sums them."""
    if settings.metrics_port is None:
        return {}
    folder = settings.metrics_dir or Path(tempfile.mkdtemp(prefix="voicehub-worker-metrics-"))
    # set before any job process starts (and imports prometheus_client): they inherit it
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(folder)
    return {"prometheus_port": settings.metrics_port, "prometheus_multiproc_dir": str(folder)}


def _mp_context(executor: Any) -> Any:
    import multiprocessing

    # the counter must come from the context livekit starts job processes with
    return multiprocessing.get_context("forkserver" if executor.value == "process" else None)


def run_worker(settings: WorkerSettings, *, ready: Callable[[str], None] | None = None) -> None:
    """Register with LiveKit and serve jobs until interrupted (then drain)."""
    settings.check_server()
    server, _load = build_server(settings)

    def registered(worker_id: str, *_info: Any) -> None:
        if ready is not None:
            ready(worker_id)

    server.on("worker_registered", registered)

    async def main() -> None:
        async with standby_runtime(settings):
            try:
                await server.run(devmode=False)
            finally:
                await server.aclose()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main())
