"""Caller audio that arrives in a burst is heard exactly like paced audio.

The server's voice stack (`OfflineStack`: batched Silero, PocketSphinx, Piper, the
research desk's scripted agent) on an in-memory transport, with three more calls open on the
batcher (so Silero windows wait for the 20 ms tick, as on a busy server). Each call: an
open microphone (silence from the start), the greeting, then one utterance with a second of
silence, delivered either paced (a 20 ms frame every 20 ms) or as `voicehub call --fast`
sends it (one-second messages, back to back). Every call must give the same final
transcript, the same answer and the research result.

What went wrong on livekit's AgentSession: the STT decodes a burst inline in milliseconds
while the VAD goes a window at a time; on a loaded server livekit committed the turn on the
STT's final before the VAD had even seen the speech start, then the VAD's late start of the
*same* utterance interrupted the reply and its tool call, and the caller heard nothing (4
of 45 `--fast` calls). voicehub's engine opens the turn on the recognizer's first words, the
VAD's late start continues that same turn, turn decisions wait for a VAD that lags, and a
turn cut too early is joined again before its reply is heard: every burst is heard and
answered once, as paced audio is, by concurrent callers on a busy batcher.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import pytest_asyncio

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from tests.support.speech import spoken
from voicehub.core.store.sqlite import SQLiteStore
from voicehub.desks.desk import Desk, load_desks
from voicehub.desks.offline_stack import OfflineStack
from voicehub.desks.voice_stack import CallSpec
from voicehub.hub import Hub
from voicehub.testing import MemoryTransport
from voicehub.voice.audio import frame_bytes
from voicehub.voice.engine.session import PipelineVoiceSession
from voicehub.voice.events import AgentState, Transcript, UserState

pytestmark = pytest.mark.asyncio(loop_scope="module")

RATE = 16000
FRAME = frame_bytes(RATE)
BURST = 50 * FRAME  # the fast client's message: one second of audio
CHANNELS = Path(__file__).resolve().parents[3] / "channels"
LINES = ("could you research heat pumps for me please", "please research solar panels")
# Per line; all the burst calls run at once (concurrent callers, the batcher shared).
BURST_CALLS = 2


@pytest.fixture(scope="module")
def desk() -> Desk:
    return load_desks(CHANNELS)["research"]


@pytest.fixture(scope="module")
def speech() -> dict[str, bytes]:
    """Each line, then a second of silence (the fast client's trailing burst)."""
    audio = {}
    for line in LINES:
        pcm = spoken(line, rate=RATE)
        audio[line] = pcm + bytes(-len(pcm) % FRAME) + bytes(50 * FRAME)
    return audio


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def factory(desk: Desk) -> OfflineStack:
    factory = OfflineStack()
    await factory.prepare([desk])
    return factory


@pytest_asyncio.fixture(loop_scope="module")
async def hub(tmp_path: Path) -> AsyncIterator[Hub]:
    hub = Hub(store=SQLiteStore(tmp_path / "voicehub.db"), orchestration=None)
    await hub.start()
    yield hub
    await hub.aclose()


@dataclass
class Heard:
    """What one call made of the caller's utterance."""

    finals: list[str]  # the caller's final transcripts
    answer: str | None  # the agent's first line after the greeting
    results: int  # research results spoken (the answer's tool call ran)
    turns: int  # caller turns the engine committed


async def heard(
    hub: Hub,
    factory: OfflineStack,
    desk: Desk,
    room_id: str,
    pcm: bytes,
    *,
    burst: bool,
) -> Heard:
    """One call with an open microphone (silence from the start, like `voicehub call`):
    the greeting, then `pcm`; what was heard once the agent answered and the caller's
    turn is over (or after 60 s)."""
    transport = MemoryTransport(RATE, ack="immediate")
    session = await factory.start(await CallSpec.for_room(hub, desk, room_id, transport))
    assert isinstance(session, PipelineVoiceSession)
    transport.session = session

    def agent_lines() -> list[str]:
        return [e.text for e in transport.events_of(Transcript) if e.role == "assistant"]

    def listening() -> bool:
        states = transport.events_of(AgentState)
        return bool(agent_lines()) and bool(states) and states[-1].state == "listening"

    def results() -> int:  # the analysts' findings spoken: the answer's tool call ran
        return sum(1 for line in agent_lines() if line.startswith("Here is what I found"))

    def answered() -> bool:
        users = transport.events_of(UserState)
        return bool(users) and users[-1].state == "listening" and results() > 0

    speak = asyncio.Event()
    mic = asyncio.create_task(caller(session, pcm, speak, burst=burst))
    try:
        await transport.wait_for(listening, 30)  # the greeting was spoken and played
        speak.set()
        with contextlib.suppress(TimeoutError):  # nothing answered: the caller says so
            await transport.wait_for(answered, 60)
        finals = [e.text for e in transport.events_of(Transcript) if e.role == "user" and e.final]
        lines = agent_lines()[1:]
        return Heard(finals, lines[0] if lines else None, results(), session.engine.committed)
    finally:
        mic.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await mic
        await session.aclose()


async def caller(
    session: PipelineVoiceSession, pcm: bytes, speak: asyncio.Event, *, burst: bool
) -> None:
    """The caller's open microphone: silence in 100 ms messages on the caller's clock
    (absolute deadlines: the caller's pace, not a wait for behaviour); once `speak` is
    set, `pcm` paced or in one-second messages back to back; then silence again."""
    loop = asyncio.get_running_loop()
    at = loop.time()

    async def tick(seconds: float) -> None:
        nonlocal at
        at += seconds
        await asyncio.sleep(max(0.0, at - loop.time()))

    while not speak.is_set():
        await session.push_audio(bytes(5 * FRAME))
        await tick(0.1)
    size = BURST if burst else FRAME
    for start in range(0, len(pcm), size):
        await session.push_audio(pcm[start : start + size])
        if not burst:
            await tick(0.02)
    at = loop.time()
    while True:  # cancelled when the call ends
        await session.push_audio(bytes(5 * FRAME))
        await tick(0.1)


@contextlib.asynccontextmanager
async def loaded(factory: OfflineStack) -> AsyncIterator[None]:
    """A busy server: three more calls' VAD streams on the shared batcher, so batches
    wait for their tick and the VAD goes through a burst at about 1.6x real time."""
    streams = [factory.shared.call_vad("silero").stream() for _ in range(3)]
    try:
        yield
    finally:
        await asyncio.gather(*(stream.aclose() for stream in streams))


@pytest.mark.slow
async def test_burst_input_is_heard_like_paced_input(
    hub: Hub, factory: OfflineStack, desk: Desk, speech: dict[str, bytes]
) -> None:
    paced: dict[str, Heard] = {}
    for number, line in enumerate(LINES):
        heard_paced = await heard(hub, factory, desk, f"paced-{number}", speech[line], burst=False)
        topic = line.split("research ")[1].removesuffix(" for me please")
        assert len(heard_paced.finals) == 1 and topic in heard_paced.finals[0], heard_paced
        assert heard_paced.answer is not None and topic in heard_paced.answer, heard_paced
        assert heard_paced.results == 1, heard_paced
        paced[line] = heard_paced
    # then every line in bursts, by concurrent callers on a busy server
    callers = [
        (line, f"burst-{number}-{attempt}")
        for number, line in enumerate(LINES)
        for attempt in range(BURST_CALLS)
    ]
    async with loaded(factory):
        bursts = await asyncio.gather(
            *(heard(hub, factory, desk, room, speech[line], burst=True) for line, room in callers)
        )
    for (line, room), burst in zip(callers, bursts, strict=True):
        expected = paced[line]
        assert (burst.finals, burst.answer, burst.results) == (
            expected.finals,
            expected.answer,
            expected.results,
        ), (line, room)
        # one turn, or (the VAD far behind a burst on a loaded machine) a turn cut and
        # joined again before its reply was heard: either way heard and answered once
        assert burst.turns >= expected.turns == 1
