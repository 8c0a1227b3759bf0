"""Observability figures (`voicehub bench --only observability`): what tracing and recording
cost a call, measured on the code that runs in the server.

- ``tracing_us_per_turn``: CPU for the tracing of one answered turn with an exporter
  configured (the SDK's in-memory exporter behind voicehub's bounded batch processor): the
  turn's span from its `TurnLatency`, one traced tool call (`Tool.invoke` of a trivial
  tool: its span, arguments, result) and a delivery attempt's span, minus the same work
  with tracing off. ``tracing_us_per_turn_off``: what tracing off adds to a turn: the
  `tracer.enabled` reads of the traced steps (a tool call, a delivery's stamp), timed
  against an empty loop; the frame path has no tracing code at all.
- ``tracing_share_of_turn_cpu``: the first figure over the voice path's CPU for a turn of
  5 s of caller audio (250 frames at ``voice_us_per_frame``, the voice bench's figure,
  passed in here as a constant: rerun `--only voice` to update it).
- ``recording_us_per_frame``: the extra CPU of a recorded call per 20 ms frame each way
  (the caller's frame through the recorded session, the agent's through the recorded
  transport, onto the tape), against the same frames through the bare objects; and
  ``recording_write_us_per_frame``: the stereo interleave at the call's end, per frame.
- ``recording_seal_us_per_audio_second``: what sealing a call's recording at rest adds to
  writing it, per second of stereo 16 kHz audio: `RecordingFolder.save` (WAV and
  transcript, AES-256-GCM, written whole) against writing the same files unsealed as
  before (`wave` straight to the file), on real files in a temporary folder; and
  ``recording_open_us_per_audio_second``: what opening one adds to reading it back
  (`RecordingFolder.read`, as the REST view serves it, against reading the plain file).

Rounds alternate the variants (A, B, A, B ...) so a machine shared with other work drifts
alike for both; each figure is the median over rounds.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
import wave
from pathlib import Path
from typing import Any

from voicehub.agents.tools import ToolContext, tool
from voicehub.core.clock import SystemClock
from voicehub.core.events import ChannelType, Event, EventKind
from voicehub.core.hooks import HookContext, HookTrigger
from voicehub.core.tracing import NO_TRACING
from voicehub.hub import Hub
from voicehub.recordings.folder import RecordingFolder
from voicehub.recordings.tape import CallTape
from voicehub.recordings.taps import RecordedSession, RecordedTransport
from voicehub.voice.engine.latency import TurnLatency

# A call's CPU per 20 ms frame on the engine (`voice.engine_us_per_frame`, docs/benchmarks.md):
# the share of a turn's CPU tracing adds is taken against it.
VOICE_US_PER_FRAME = 93.8
_TURN_FRAMES = 250  # a 5 s caller turn


@tool
def look_up(topic: str) -> str:
    """Look a topic up."""
    return f"notes on {topic}"


async def _turns(hub: Hub, spans: Any, count: int) -> float:
    """CPU seconds for `count` turns of traced work (or untraced, with tracing off)."""
    context = ToolContext(hub=hub, room_id="bench:call", agent_id="desk", call_id="c")
    observer = spans.turn_spans("bench:call", hub.clock) if spans is not None else None
    before = Event(
        kind=EventKind.DELIVERY,
        text="result",
        source="delivery",
        role="assistant",
        source_type=ChannelType.SYSTEM,
        room_id="bench:call",
        metadata={"delivery_id": "d", "strategy": "immediate", "attempt": 1},
    )
    after = before.with_metadata(outcome="delivered", final=True)
    started = time.process_time()
    for turn in range(count):
        await look_up.invoke('{"topic": "heat pumps"}', context)
        if observer is not None:
            observer.turn_measured(
                TurnLatency(
                    room_id="bench:call",
                    turn=turn,
                    speech_ended_at=hub.clock.now() - 0.8,
                    end_of_turn_delay=0.3,
                    stt_final_delay=0.2,
                    llm_ttft=0.1,
                    tts_ttfb=0.15,
                    voice_to_voice=0.7,
                )
            )
            for trigger, event in (
                (HookTrigger.BEFORE_DELIVER, before),
                (HookTrigger.AFTER_DELIVER, after),
            ):
                await hub.hooks.run(trigger, event, HookContext(hub, "bench:call", trigger))
    return time.process_time() - started


async def _tracing(quick: bool) -> dict[str, float]:
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from voicehub.telemetry.call_spans import CallSpans
    from voicehub.telemetry.setup import TracingSettings, start_tracing

    count = 200 if quick else 2000
    rounds = 5 if quick else 9
    on, off = [], []
    for _ in range(rounds):
        exporter = InMemorySpanExporter()
        tracing = start_tracing(TracingSettings(schedule_delay_millis=50), exporter=exporter)
        async with Hub(clock=SystemClock()) as traced:
            traced.tracer = tracing.tracer
            spans = CallSpans(traced, tracing.tracer)
            spans.call_started("bench:call", {"voicehub.desk": "bench"})
            on.append(await _turns(traced, spans, count))
        tracing.shutdown()
        async with Hub(clock=SystemClock()) as plain:
            assert plain.tracer is NO_TRACING
            off.append(await _turns(plain, None, count))
    traced_us = statistics.median(on) / count * 1e6
    plain_us = statistics.median(off) / count * 1e6
    per_turn = max(0.0, traced_us - plain_us)
    return {
        "tracing_us_per_turn": round(per_turn, 2),
        "untraced_turn_work_us": round(plain_us, 2),
        "tracing_share_of_turn_cpu": round(per_turn / (VOICE_US_PER_FRAME * _TURN_FRAMES), 5),
        "voice_us_per_frame": VOICE_US_PER_FRAME,
    }


class _Sink:
    """The bare transport and session a recorded call wraps: they only count."""

    sample_rate = 16000
    room_id = "bench:call"
    activity: Any = None

    def __init__(self) -> None:
        self.bytes = 0

    async def send_audio(self, pcm16: bytes) -> None:
        self.bytes += len(pcm16)

    async def push_audio(self, pcm16: bytes) -> None:
        self.bytes += len(pcm16)


async def _frames(caller: Any, agent: Any, frame: bytes, count: int) -> float:
    started = time.process_time()
    for _ in range(count):
        await caller.push_audio(frame)
        await agent.send_audio(frame)
    return time.process_time() - started


async def _recording(quick: bool) -> dict[str, float]:
    frames = 3000 if quick else 30000  # a minute / ten minutes of call
    rounds = 5 if quick else 9
    frame = bytes(640)
    bare_times, taped_times, write_times = [], [], []
    for _ in range(rounds):
        sink = _Sink()
        bare_times.append(await _frames(sink, sink, frame, frames))
        tape = CallTape(SystemClock(), 16000, audio=True, transcript=True)
        session = RecordedSession(sink, tape)  # type: ignore[arg-type]
        transport = RecordedTransport(sink, tape)  # type: ignore[arg-type]
        taped_times.append(await _frames(session, transport, frame, frames))
        started = time.process_time()
        tape.stereo()
        write_times.append(time.process_time() - started)
    extra = (statistics.median(taped_times) - statistics.median(bare_times)) / frames
    return {
        "recording_us_per_frame": round(max(0.0, extra) * 1e6, 3),
        "recording_write_us_per_frame": round(statistics.median(write_times) / frames * 1e6, 3),
        "unrecorded_frame_us": round(statistics.median(bare_times) / frames * 1e6, 3),
    }


def _plain_save(folder: Path, stem: str, stereo: bytes, transcript: str) -> None:
    """A call's files as they were written before sealing."""
    with wave.open(str(folder / f"{stem}.wav"), "wb") as out:
        out.setnchannels(2)
        out.setsampwidth(2)
        out.setframerate(16000)
        out.writeframes(stereo)
    (folder / f"{stem}.json").write_text(transcript, encoding="utf-8")


def _sealing(quick: bool) -> dict[str, float]:
    seconds = 60 if quick else 600  # one call of a minute / ten minutes
    rounds = 5 if quick else 9
    stereo = os.urandom(seconds * 16000 * 4)  # the cipher's cost does not depend on the audio
    transcript = '{"entries": [' + ", ".join(['{"at": 1.0, "text": "a turn"}'] * 200) + "]}"
    saved: dict[str, list[float]] = {"plain": [], "sealed": [], "read": [], "opened": []}
    with tempfile.TemporaryDirectory(prefix="voicehub-seal-bench-") as root:
        folder = RecordingFolder(Path(root), os.urandom(32))
        plain = Path(root) / "plain"
        plain.mkdir()
        for number in range(rounds):
            started = time.process_time()
            _plain_save(plain, f"call-{number}", stereo, transcript)
            saved["plain"].append(time.process_time() - started)
            started = time.process_time()
            stem = folder.save("bench:call", 1_700_000_000.0 + number, stereo=stereo,
                               sample_rate=16000, transcript=transcript)  # fmt: skip
            saved["sealed"].append(time.process_time() - started)
            started = time.process_time()
            (plain / f"call-{number}.wav").read_bytes()
            saved["read"].append(time.process_time() - started)
            started = time.process_time()
            folder.read("bench:call", f"{stem}.wav")
            saved["opened"].append(time.process_time() - started)
    median = {name: statistics.median(times) for name, times in saved.items()}
    return {
        "recording_seal_us_per_audio_second": round(
            max(0.0, median["sealed"] - median["plain"]) / seconds * 1e6, 1
        ),
        "recording_unsealed_save_us_per_audio_second": round(median["plain"] / seconds * 1e6, 1),
        "recording_open_us_per_audio_second": round(
            max(0.0, median["opened"] - median["read"]) / seconds * 1e6, 1
        ),
    }


def _off_check_us(hub: Hub, count: int = 1_000_000) -> float:
    """What tracing off costs a traced step: one `tracer.enabled` read (minus the loop)."""
    started = time.perf_counter()
    for _ in range(count):
        if hub.tracer.enabled:
            break
    checked = time.perf_counter() - started
    started = time.perf_counter()
    for _ in range(count):
        pass
    empty = time.perf_counter() - started
    return max(0.0, checked - empty) / count * 1e6


async def run(store: str, quick: bool) -> dict[str, Any]:
    tracing = await _tracing(quick)
    async with Hub(clock=SystemClock()) as plain:
        # per turn: the tool call's check and the delivery's stamp check
        tracing["tracing_us_per_turn_off"] = round(2 * _off_check_us(plain), 4)
    recording = await _recording(quick)
    return {"observability": {**tracing, **recording, **_sealing(quick)}}
