"""Voice-to-voice latency on the embedded stack (the `voice` bench section's first part).

One voicehub `LiveKitVoiceSession` with Silero (or WebRTC) VAD, PocketSphinx, the scripted
agent and Piper, over an in-memory transport that confirms playout at once. The caller's
words are synthesized by Piper and paced on the real clock, one 20 ms frame every 20 ms;
latency runs from the push of the caller's last voiced frame to the first agent audio frame
at the transport.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from voicehub.agents.agent import Agent
from voicehub.agents.scripted import ScriptedLLM
from voicehub.desks.turns import scripted_words_complete
from voicehub.hub import Hub
from voicehub.voice.audio import frame_bytes
from voicehub.voice.engine.session import EngineOptions
from voicehub.voice.engine.turn_engine import TurnEngineSettings, TurnPolicy
from voicehub.voice.events import AgentState, ServerEvent, Transcript, UserState
from voicehub.voice.providers.offline import PiperTTS, PocketSphinxSTT, load_vad, synthesize
from voicehub.voice.providers.offline.vad import VADKind
from voicehub.voice.turns.setup import TurnSetup, turn_setup
from voicehub_dev.bench.stats import summary_ms
from voicehub_dev.bench.voice_load import sqlite_or_memory
from voicehub_dev.fakes.voice_providers import LoopbackTransport, VoicehubCall

RATE = 16000
FRAME = frame_bytes(RATE)
TICK = 0.02
SILENCE = bytes(FRAME)

# Turn-taking for the latency figure, public options only. livekit counts the endpointing
# delay from the end of speech, like the VAD's silence, so the longer of the two decides;
# endpointing is set below the VAD's silence to add nothing. voicehub's defaults are
# 0.35 s and 0.3 s (measured too, as "silero_defaults").
TUNED = {"vad_min_silence_s": 0.25, "min_endpointing_delay_s": 0.2}
DEFAULTS = {"vad_min_silence_s": 0.35, "min_endpointing_delay_s": 0.3}

# (the caller says, a keyword the STT should hear, the agent's answer)
TURNS: list[tuple[str, str, str]] = [
    ("what is the weather like in paris today", "weather", "It looks sunny in Paris today."),
    ("please book a table for two at seven", "book", "Done, your table for two is booked."),
    ("can you research solar panels for me", "solar", "I will look into solar panels."),
    ("I would like to check my account balance", "balance", "Your balance is forty dollars."),
    ("tell me the opening hours of the library", "library", "The library opens at nine."),
    ("how long does shipping take to london", "shipping", "Shipping to London takes a week."),
    ("please cancel my appointment for tomorrow", "cancel", "Your appointment is cancelled."),
    ("what time does the train to berlin leave", "train", "The train leaves at noon."),
]
WARMUP_TURN = ("hello can you hear me", "hello", "Yes, I can hear you.")

# A desk's settings as shipped: Silero with its default silence, `turn = "model"` (Smart
# Turn, `max_turn_silence` 2 s), and `stt = "auto"` (Whisper): `v2v_shipped`.
SHIPPED = {"vad_min_silence_s": 0.35, "min_endpointing_delay_s": 0.0}


def frames_of(pcm16: bytes) -> list[bytes]:
    """`pcm16` as 20 ms frames (the last one padded with silence)."""
    padded = pcm16 + bytes(-len(pcm16) % FRAME)
    return [padded[i : i + FRAME] for i in range(0, len(padded), FRAME)]


def last_voiced(frames: Sequence[bytes]) -> int:
    """Index of the last frame whose level is within 40 dB of the loudest frame's."""
    levels = [
        float(np.sqrt(np.mean(np.frombuffer(f, np.int16).astype(np.float64) ** 2))) for f in frames
    ]
    floor = max(levels) / 100.0
    return max(i for i, level in enumerate(levels) if level > floor)


class PacedCaller:
    """Feeds one call a frame every 20 ms: queued speech, else silence."""

    def __init__(self, push: Callable[[bytes], Awaitable[None]]) -> None:
        self._push = push
        self._queue: deque[tuple[bytes, asyncio.Future[float] | None]] = deque()

    def say(self, pcm16: bytes) -> asyncio.Future[float]:
        """Queue an utterance; the future gets the `perf_counter` time right after its
        last voiced frame was pushed: the end of the caller's speech."""
        frames = frames_of(pcm16)
        last = last_voiced(frames)
        done: asyncio.Future[float] = asyncio.get_running_loop().create_future()
        for i, frame in enumerate(frames):
            self._queue.append((frame, done if i == last else None))
        return done

    async def run(self) -> None:
        """Push frames until cancelled (absolute deadlines: lateness is caught up)."""
        loop = asyncio.get_running_loop()
        start, k = loop.time(), 0
        while True:
            if (delay := start + k * TICK - loop.time()) > 0:
                await asyncio.sleep(delay)
            frame, done = self._queue.popleft() if self._queue else (SILENCE, None)
            await self._push(frame)
            if done is not None:
                done.set_result(time.perf_counter())
            k += 1


def _desk_agent() -> Agent:
    rules = [{"match": [kw], "say": reply} for _, kw, reply in (WARMUP_TURN, *TURNS)]
    return Agent(id="desk", llm=ScriptedLLM(rules, fallback="Sorry, could you say that again?"))


async def v2v_latency(
    store: str,
    folder: Path,
    turns: int,
    vad_kind: VADKind,
    tuning: dict[str, float],
    *,
    providers: tuple[Any, Any] | None = None,
    before_turn: Callable[[str], None] | None = None,
    turns_setup: TurnSetup | None = None,
    whole_requests: bool = True,
) -> dict[str, Any]:
    """End of caller speech (its last voiced frame pushed) to the first agent audio frame at
    the transport: Piper + PocketSphinx + `vad_kind` + the scripted agent, turn by turn.
    The first turn warms the pipeline up and is not counted. `providers` replaces the
    offline (STT, TTS); `before_turn` gets each turn's words before the caller says them;
    `turns_setup` replaces the VAD-only turns of `tuning` (a desk's turn policy and model);
    `whole_requests`: words the agent answers as they stand hold the turn for the model only
    briefly, as on a desk (`voicehub.desks.turns.desk_words_complete`); False: the model
    alone holds it, up to the ceiling."""
    if providers is None:
        stt, tts = PocketSphinxSTT(), PiperTTS()
        await asyncio.to_thread(stt.prewarm)
        await asyncio.to_thread(tts.prewarm)
    else:
        stt, tts = providers
    vad = load_vad(vad_kind, min_silence_duration=tuning["vad_min_silence_s"])
    policy = (
        turns_setup.settings
        if turns_setup is not None
        else TurnPolicy(
            mode="vad",
            vad_silence=tuning["vad_min_silence_s"] + tuning["min_endpointing_delay_s"],
        )
    )
    script = [WARMUP_TURN, *TURNS[:turns]]
    speech = [await asyncio.to_thread(synthesize, text, "piper", RATE) for text, _, _ in script]
    latencies: list[float] = []
    stages: dict[str, list[float]] = {stage: [] for stage in _STAGES}
    understood = unanswered = 0
    name = f"latency-{vad_kind}-{tuning['vad_min_silence_s']}"
    agent = _desk_agent()
    judged: dict[str, Any] = {}
    if whole_requests and isinstance(agent.llm, ScriptedLLM):
        judged["words_complete"] = scripted_words_complete([agent.llm])
    async with Hub(store=sqlite_or_memory(store, folder)(name)) as hub:
        call = VoicehubCall(
            hub,
            name,
            agent,
            keep_events=True,
            stt=stt,
            tts=tts,
            vad=vad,
            options=EngineOptions(turn=TurnEngineSettings(policy=policy)),
            end_of_turn=turns_setup.model if turns_setup is not None else None,
            **judged,
        )
        await call.start()
        caller = PacedCaller(call.push)
        feeder = asyncio.create_task(caller.run())
        try:
            for index, ((words, keyword, _), pcm) in enumerate(zip(script, speech, strict=True)):
                call.transport.events.clear()
                if before_turn is not None:
                    before_turn(words)
                ended = await caller.say(pcm)
                reply = await _segment_after(call.transport, ended, timeout=6.0)
                if reply is None and index == 0:
                    raise RuntimeError("the warm-up turn got no reply: see the warnings above")
                if reply is None:
                    unanswered += 1
                elif index > 0:
                    latencies.append(reply - ended)
                    understood += _heard(call.transport, keyword)
                    for stage, at in _stage_times(call.transport, ended).items():
                        stages[stage].append(at - ended)
                await _until_idle(call, timeout=15.0)
                await asyncio.sleep(0.5)  # the caller pauses; silence keeps flowing
        finally:
            feeder.cancel()
            await call.aclose()
    if not latencies:
        raise RuntimeError(f"no turn was answered ({vad_kind} VAD): see the warnings above")
    figures = summary_ms(latencies)
    return {
        **{key: figures[key] for key in ("median", "p95", "max")},
        "turns": len(latencies),
        "latencies_ms": [round(t * 1000, 1) for t in latencies],  # each turn's, in order
        "unanswered": unanswered,
        "understood": understood,  # the STT's final held the turn's keyword
        # where the time goes: median time from the end of speech to each event
        "stages_median_ms": {
            stage: round(statistics.median(times) * 1000, 1)
            for stage, times in stages.items()
            if times
        },
        **tuning,
    }


# client events marking each stage of a turn, timed as the client sees them (they queue
# behind the room's transcript writes): name -> does this event mark it
_STAGES: dict[str, Callable[[ServerEvent], bool]] = {
    "vad_end_of_speech": lambda e: isinstance(e, UserState) and e.state == "listening",
    "stt_final": lambda e: isinstance(e, Transcript) and e.final,
    "llm_started": lambda e: isinstance(e, AgentState) and e.state == "thinking",
}


def _stage_times(transport: LoopbackTransport, since: float) -> dict[str, float]:
    """When each stage's client event reached the transport (the first after `since`)."""
    times: dict[str, float] = {}
    for stage, marks_stage in _STAGES.items():
        for at, event in transport.events:
            if at > since and marks_stage(event):
                times[stage] = at
                break
    return times


async def _segment_after(
    transport: LoopbackTransport, since: float, timeout: float
) -> float | None:
    """When the first agent audio segment after `since` reached the transport."""
    deadline = time.perf_counter() + timeout
    while not (later := [at for at in transport.segment_starts if at > since]):
        transport.new_segment.clear()
        try:
            await asyncio.wait_for(transport.new_segment.wait(), deadline - time.perf_counter())
        except TimeoutError:
            return None
    return later[0]


def _heard(transport: LoopbackTransport, keyword: str) -> int:
    finals = [
        e.text.lower()
        for _, e in transport.events
        if isinstance(e, Transcript) and e.role == "user" and e.final
    ]
    return int(any(keyword in text for text in finals))


async def _until_idle(call: VoicehubCall, timeout: float) -> None:
    activity = call.session.activity

    async def wait() -> None:
        snapshot = activity.snapshot()
        while not snapshot.is_idle:
            snapshot = await activity.wait_for_change(snapshot.version)

    await asyncio.wait_for(wait(), timeout)


async def v2v_shipped(store: str, folder: Path, turns: int) -> dict[str, Any]:
    """`v2v_latency` with a desk's settings as shipped (`SHIPPED`): the accurate recognizer
    (Whisper, as `stt = "auto"` picks it) and the end-of-turn model."""
    from voicehub.voice.providers.offline import WhisperSTT

    stt, tts = WhisperSTT(), PiperTTS()
    await asyncio.to_thread(stt.prewarm)
    await asyncio.to_thread(tts.prewarm)
    setup = await asyncio.to_thread(turn_setup, "model", 2.0, owner="the v2v bench")
    if setup.model is None:
        raise RuntimeError("the end-of-turn model did not load: see the warning above")
    figures = await v2v_latency(
        store, folder, turns, "silero", SHIPPED, providers=(stt, tts), turns_setup=setup
    )
    return {**figures, "stt": "whisper", "turn": "model"}
