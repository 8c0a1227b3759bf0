"""`voicehub bench --only failover`: what a caller notices when the instance carrying their call
dies or is drained. Three `voicehub serve` processes on one Redis behind a balancer
(`failover_fleet`); every killed or drained instance is replaced in the background.

- `gap_ms.<transport>`: SIGKILL of the instance serving a call, after the greeting, to the
  first agent audio from the instance that took it up ("sorry, I lost you for a moment"), as
  the caller's side measures it: the WebSocket client of `voicehub call` (it reconnects
  through the balancer) and a Twilio-protocol caller (it follows the TwiML's `<Redirect>`).
- `handover_gap_ms.<transport>`: SIGTERM (a drain) to a seamless hand-over: the old line's
  close to the call being live on the new instance (WebSocket: its session event; Twilio:
  the new media stream open and started, Twilio's side of it).
- `kills`: calls, one after another, each asking for research, their instance SIGKILLed
  mid-reply, mid-tool (analyst-b's model is slow) or mid-delivery, in turn: calls ended (the
  caller could not go on), results lost (not delivered once the call settled), results
  spoken twice (heard delivered more than once).

`VOICEHUB_BENCH_FAILOVER_SAMPLES` (gaps per transport, default 5) and
`VOICEHUB_BENCH_FAILOVER_KILLS` (default 20; 0 measures the gaps only) change the counts.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from voicehub.client.call import CallClient, CallOptions, caller_audio
from voicehub.client.reconnect import Backoff
from voicehub.client.twilio import TwilioCaller
from voicehub.client.twilio_call import TwilioCall
from voicehub.core.store.base import DeliveryStatus
from voicehub.voice.events import CallSession, DeliveryAttempt, DeliveryOutcome, TaskStarted
from voicehub_dev.bench.failover_fleet import (
    AUTH_TOKEN,
    PUBLIC_URL,
    TIMINGS,
    Fleet,
    desk_files,
    redis_url,
    slow_model,
)

REQUEST = "could you research heat pumps for me please"
PHASES = ("reply", "tool", "delivery")
SPEED = 8.0  # the callers' speakers play 8 times real time: calls are short, gaps are not


def _options(fleet: Fleet, desk: str, conversation: str) -> CallOptions:
    return CallOptions(
        desk=desk,
        server=fleet.balancer.url,
        conversation=conversation,
        playout_speed=SPEED,
        quiet=0.5,
        reconnect=Backoff(first=0.05, give_up_after=60),
    )


Phases = dict[str, float]


async def _claimed_at(fleet: Fleet, room: str, old: str, wall_at_kill: float) -> float:
    """Seconds from the kill (at `wall_at_kill`, epoch) to another instance's claim of the
    call: its record names the new owner and was written at (its `updated_at`)."""
    await fleet.owner(room, not_=old)
    record = await fleet.store.get_call(room)
    assert record is not None
    return record.updated_at - wall_at_kill


def _ms(phases: dict[str, float]) -> Phases:
    return {name: round(seconds * 1000, 1) for name, seconds in phases.items()}


async def websocket_gap(fleet: Fleet, *, drain: bool) -> tuple[float, Phases]:
    """One call: after the greeting, kill (or drain) its instance; the gap in ms, and (a
    kill) its phases in ms: the caller noticing (the socket closed), reconnecting (the
    backoff and failed attempts), connecting (the new socket accepted), the claim (the
    store's record names the new instance; from the socket open), the session event, and
    the first agent audio (from the session event)."""
    conversation = f"gap-ws-{time.monotonic_ns()}"
    room = f"research:{conversation}"
    phases: dict[str, float] = {}
    async with CallClient(_options(fleet, "research", conversation)) as call:
        await call.wait_for_turn()
        owner = await fleet.owner(room)
        moment, wall = call.now(), time.time()
        owner.drain() if drain else owner.kill()
        claim = asyncio.ensure_future(_claimed_at(fleet, room, owner.name, wall))
        if drain:
            fleet.replace()
            await call.wait_for(lambda: len(call.report.events_of(CallSession)) == 2, 60)
            reconnector = call.reconnector
            assert reconnector is not None
            gap = reconnector.history[-1].gap
            assert gap is not None
            claim.cancel()
        else:
            segments = call.report.segments
            await call.wait_for(lambda: any(s.first_audio_at > moment for s in segments), 60)
            first = min(s.first_audio_at for s in segments if s.first_audio_at > moment)
            gap = first - moment
            assert call.reconnector is not None
            drop = call.reconnector.history[-1]
            assert drop.live_at is not None and drop.opened_at is not None
            claimed = moment + await claim
            phases = {
                "notice": drop.closed_at - moment,
                "reconnect": drop.tried_at[-1] - drop.closed_at,
                "connect": drop.opened_at - drop.tried_at[-1],
                "claim": claimed - drop.opened_at,
                "session": drop.live_at - claimed,
                "first_audio": first - drop.live_at,
            }
            fleet.replace()  # after the gap: a deployment starts it on another machine
        await call.hangup()
    return round(gap * 1000, 1), _ms(phases)


async def twilio_gap(fleet: Fleet, *, drain: bool) -> tuple[float, Phases]:
    """A phone call: after the greeting, kill (or drain) its instance; the gap in ms, and
    (a kill) its phases in ms: Twilio noticing (the stream's socket closed), the redirect
    (the voice webhook's TwiML fetched), connecting (the new stream open and started), the
    claim (the record names the new instance; from the stream open) and the first agent
    audio (from the claim)."""
    phone = TwilioCall(
        TwilioCaller(fleet.balancer.url, PUBLIC_URL, AUTH_TOKEN), playout_speed=SPEED
    )
    caller = f"+1555{time.monotonic_ns() % 10**7:07d}"
    await phone.dial("research", caller)
    phases: dict[str, float] = {}
    claim: asyncio.Future[float] | None = None
    try:
        room = f"research:{phone.line.answer.parameters['conversation']}"
        await phone.line.wait_quiet(0.5, timeout=60)
        owner = await fleet.owner(room)
        moment, wall = phone.clock.now(), time.time()
        owner.drain() if drain else owner.kill()
        claim = asyncio.ensure_future(_claimed_at(fleet, room, owner.name, wall))
        if drain:
            fleet.replace()
        await phone.wait_for_stream(1, timeout=60)
        if drain:
            old, new = phone.legs[-2], phone.legs[-1]
            assert old.closed_at is not None
            gap = new.opened_at - old.closed_at
            claim.cancel()
        else:
            played = phone.line.played
            for _ in range(1200):
                if (first := played.first_audio_after(moment)) is not None:
                    break
                await asyncio.sleep(0.05)
            else:
                raise TimeoutError("no agent audio after the kill")
            gap = first - moment
            old, new = phone.legs[-2], phone.legs[-1]
            assert old.closed_at is not None and new.requested_at is not None
            claimed = moment + await claim
            phases = {
                "notice": old.closed_at - moment,
                "redirect": new.requested_at - old.closed_at,
                "connect": new.opened_at - new.requested_at,
                "claim": claimed - new.opened_at,
                "first_audio": first - claimed,
            }
            fleet.replace()  # after the gap: a deployment starts it on another machine
    finally:
        if claim is not None:
            claim.cancel()  # a sample that failed does not leave it polling a closed store
        await phone.hang_up()
    return round(gap * 1000, 1), _ms(phases)


async def kill_mid_call(fleet: Fleet, speech: bytes, phase: str) -> dict[str, int]:
    """A call asking for research, its instance SIGKILLed at `phase`: what went wrong."""
    conversation = f"kill-{phase}-{time.monotonic_ns()}"
    room = f"research-slow:{conversation}"
    found = {"ended": 0, "lost": 0, "twice": 0}
    async with CallClient(_options(fleet, "research-slow", conversation)) as call:
        await call.wait_for_turn()
        await call.say(speech, REQUEST)
        said_at = call.now()
        report = call.report
        if phase == "reply":
            await call.wait_for(lambda: any(s.first_audio_at > said_at for s in report.segments))
        elif phase == "tool":
            await call.wait_for(lambda: len(report.events_of(TaskStarted)) == 2)
        else:
            await call.wait_for(lambda: bool(report.events_of(DeliveryAttempt)), 120)
            attempted = call.now()
            await call.wait_for(lambda: any(s.first_audio_at >= attempted for s in report.segments))
        owner = await fleet.owner(room)
        owner.kill()
        fleet.replace()
        with contextlib.suppress(TimeoutError):
            await call.wait_for(lambda: len(report.events_of(CallSession)) >= 2 or call.closed, 60)

        async def settled() -> bool:
            stored = await fleet.store.list_deliveries(room_id=room)
            return bool(stored) and all(d.status is DeliveryStatus.DELIVERED for d in stored)

        for _ in range(600):  # the store, polled: up to 2 minutes
            if call.closed or await settled():
                break
            await asyncio.sleep(0.2)
        with contextlib.suppress(Exception):
            await call.settle(30)
        found["ended"] = int(call.closed)
        await call.hangup()
    stored = await fleet.store.list_deliveries(room_id=room)
    found["lost"] = sum(d.status is not DeliveryStatus.DELIVERED for d in stored) + (not stored)
    heard = [e.delivery_id for e in report.events_of(DeliveryOutcome) if e.outcome == "delivered"]
    found["twice"] = sum(heard.count(i) > 1 for i in set(heard))
    return found


def _median_phases(samples: list[Phases]) -> Phases:
    """Each phase's median over the samples (medians need not add up to the gap's)."""
    return {name: statistics.median(s[name] for s in samples) for name in samples[0]}


async def run(store: str, quick: bool) -> dict[str, Any]:
    samples, kills = (2, 3) if quick else (5, 20)
    samples = int(os.environ.get("VOICEHUB_BENCH_FAILOVER_SAMPLES", samples))
    kills = int(os.environ.get("VOICEHUB_BENCH_FAILOVER_KILLS", kills))
    speech = caller_audio(text=REQUEST)
    with tempfile.TemporaryDirectory(prefix="bench-failover-") as directory:
        folder = Path(directory)
        async with redis_url(store, folder) as url, slow_model(delay=3.0) as model:
            channels = desk_files(folder, model.base_url)
            async with Fleet(folder, channels, url, size=3) as fleet:
                gaps: dict[str, list[float]] = {"websocket": [], "twilio": []}
                split: dict[str, list[Phases]] = {"websocket": [], "twilio": []}
                handovers: dict[str, list[float]] = {"websocket": [], "twilio": []}
                for _ in range(samples):
                    for transport, measure in (
                        ("websocket", websocket_gap),
                        ("twilio", twilio_gap),
                    ):
                        await fleet.ready(3)
                        gap, phases = await measure(fleet, drain=False)
                        gaps[transport].append(gap)
                        split[transport].append(phases)
                        await fleet.ready(3)
                        handovers[transport].append((await measure(fleet, drain=True))[0])
                tally = {"calls": 0, "ended": 0, "lost": 0, "twice": 0}
                by_phase = {
                    phase: {"calls": 0, "ended": 0, "lost": 0, "twice": 0} for phase in PHASES
                }
                for number in range(kills):
                    await fleet.ready(2)
                    phase = PHASES[number % len(PHASES)]
                    found = await kill_mid_call(fleet, speech, phase)
                    for counts in (tally, by_phase[phase]):
                        counts["calls"] += 1
                        for key, value in found.items():
                            counts[key] += value
    return {
        "failover": {
            "gap_ms": {t: statistics.median(v) for t, v in gaps.items()},
            "gap_ms_max": {t: max(v) for t, v in gaps.items()},
            "gap_phases_ms": {t: _median_phases(v) for t, v in split.items()},
            "handover_gap_ms": {t: statistics.median(v) for t, v in handovers.items()},
            "handover_gap_ms_max": {t: max(v) for t, v in handovers.items()},
            "samples_ms": {"gap": gaps, "gap_phases": split, "handover_gap": handovers},
            "kills": {
                "count": tally["calls"],
                "calls_ended": tally["ended"],
                "results_lost": tally["lost"],
                "spoken_twice": tally["twice"],
                "by_phase": by_phase,
            },
            "settings": {
                "samples_per_transport": samples,
                "instance_timeout_s": float(TIMINGS["VOICEHUB_INSTANCE_TIMEOUT"]),
                "playout_speed": SPEED,
            },
        }
    }
