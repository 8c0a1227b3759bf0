"""A soak run from start to accounting: the server (started here or at a URL), the
callers, the health sampler, then each conversation's deliveries read back from the API."""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from voicehub.errors import VoicehubError
from voicehub_dev.soak.accounting import CallLog, SoakTally, account
from voicehub_dev.soak.caller import CallerLines, SoakCaller
from voicehub_dev.soak.deliveries import stored_deliveries, wait_for_no_calls
from voicehub_dev.soak.options import SoakOptions
from voicehub_dev.soak.server_process import HealthSample, HealthSampler, ServerProcess

__all__ = ["SoakResult", "run_soak", "stored_deliveries"]


@dataclass
class SoakResult:
    """What a run measured."""

    options: SoakOptions
    server: str
    seconds: float
    tally: SoakTally
    samples: list[HealthSample] = field(default_factory=list)
    logs: list[CallLog] = field(default_factory=list)
    stuck_calls: int = 0  # live on the server 2 minutes after every caller hung up
    provider_cpu_seconds: float | None = None  # the fake Deepgram's CPU (--stack cloud)


async def run_soak(
    options: SoakOptions,
    *,
    folder: Path | None = None,
    channels: Path | None = None,
    lines: CallerLines | None = None,
    server_environment: dict[str, str] | None = None,
) -> SoakResult:
    """Run `options`; `folder` keeps the started server's store and log (a temporary
    folder by default), `lines` the callers' synthesized words (made once if not given),
    `server_environment` variables the started server gets on top of this process's."""
    words = lines if lines is not None else await asyncio.to_thread(CallerLines.synthesize)
    with contextlib.ExitStack() as stack:
        if folder is None:
            folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="soak-")))
        limit = ["--max-calls", str(options.max_calls)] if options.max_calls else []
        process = (
            None if options.url else ServerProcess(folder, channels, server_environment, limit)
        )
        try:
            server = options.url.rstrip("/") if options.url else await _start(process)
            return await _soak(options, server, process, words)
        finally:
            if process is not None:
                await process.stop()


async def _check_server(server: str, desk: str, token: str | None) -> None:
    """Fail at once, with the reason, if the server is not there or lacks the desk."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        async with httpx.AsyncClient(base_url=server, timeout=30, headers=headers) as http:
            desks = (await http.get("/health")).raise_for_status().json()["desks"]
    except (httpx.HTTPError, ValueError, KeyError) as exc:
        raise VoicehubError(f"{server} does not answer /health as voicehub does: {exc}") from None
    if desk not in desks:
        raise VoicehubError(f"{server} has no desk {desk!r}; it serves {', '.join(desks)}")


async def _start(process: ServerProcess | None) -> str:
    assert process is not None
    return await process.start()


async def _soak(
    options: SoakOptions, server: str, process: ServerProcess | None, lines: CallerLines
) -> SoakResult:
    await _check_server(server, options.desk, options.token)
    sampler = HealthSampler(server, options.sample_every, process, options.token)
    sampling = asyncio.create_task(sampler.run())
    callers = [SoakCaller(index, options, server, lines) for index in range(options.calls)]
    started = time.monotonic()
    until = asyncio.get_running_loop().time() + options.minutes * 60
    try:
        await asyncio.gather(*(caller.run(until) for caller in callers))
    finally:
        sampling.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await sampling
    seconds = time.monotonic() - started
    # A loaded server may still be ending the last calls (a result it was speaking goes
    # back to held): read the store once it has none left.
    stuck = await wait_for_no_calls(server, options.token)
    async with httpx.AsyncClient(base_url=server, timeout=10) as http:
        await sampler.sample(http, seconds)  # the state after the last call
    conversations = [caller.conversation for caller in callers]
    stored = await stored_deliveries(server, options.desk, conversations, options.token)
    logs = [log for caller in callers for log in caller.calls]
    tally = account(logs, stored)
    return SoakResult(options, server, seconds, tally, sampler.samples, logs, stuck_calls=stuck)
