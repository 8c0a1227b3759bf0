"""`voicehub bench --only delivery_talkover`: is a result ever spoken over the caller?

The offset sweep of issue 15, through the real server (uvicorn, the WebSocket call
endpoint) on the embedded stack (Silero, PocketSphinx, Piper, the scripted agent): each call
gets a result queued with `WaitForIdle(buffer=1.0)` while the greeting plays; once the
greeting's playout is acked, the caller starts speaking (Piper's voice) `offset` seconds
later, for offsets from 0.7 to 1.25 s around the 1.0 s buffer. The caller is the lean
client of `talkover_caller` (a frame every 20 ms both ways, a virtual speaker that acks
marks as it plays).

Figures, over all calls: `max_ms` and `median_ms` of talk-over (delivery audio played while
the caller's voiced frames were sent), and `decision_to_audio_ms` (median time from the
delivery attempt's event to the delivery's first audio at the client; both travel the same
socket, so this is the server's gap). `ack_to_delivered_ms`: from the result's last playout
ack to its `delivered` outcome event, which the server sends after writing the status: the
window in which a crash would speak the result again (issue 15, item 5).
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from voicehub.delivery.policy import WaitForIdle
from voicehub.voice.events import FRAME_BYTES, SAMPLE_RATE
from voicehub_dev.bench.talkover_caller import TalkoverCaller, voiced

BUFFER = 1.0
OFFSETS = [round(0.7 + 0.05 * i, 2) for i in range(12)]  # 0.7 .. 1.25 s
QUICK_OFFSETS = [0.7, 0.9, 0.95, 1.0, 1.05, 1.25]
CALLER_WORDS = "wait a moment, I have one more question about my order"
RESULT = "Here is what the analysts found: heat pumps move heat instead of making it."
GREETING = "Hello, bench desk."

_DESK = f'''
name = "talkover"
title = "Talk-over bench"
description = "A desk whose results wait for a one second gap."
greeting = "{GREETING}"

[voice]
vad = "silero"
stt = "pocketsphinx"
tts = "piper"

[delivery]
strategy = "wait_for_idle"
buffer = {BUFFER}
mode = "say"

[[agents]]
id = "desk"
role = "bench desk"
description = "Answers every turn with one short line."
instructions = "Answer briefly."

[agents.scripted]
fallback = "Of course, go on."
'''


def _caller_speech() -> bytes:
    """The caller's words, from their first voiced frame (the offset is when voice starts)."""
    from voicehub.voice.providers.offline import synthesize

    pcm = synthesize(CALLER_WORDS, voice="piper", sample_rate=SAMPLE_RATE)
    pcm += bytes(-len(pcm) % FRAME_BYTES)
    frames = [pcm[i : i + FRAME_BYTES] for i in range(0, len(pcm), FRAME_BYTES)]
    first = next(i for i, frame in enumerate(frames) if voiced(frame))
    return b"".join(frames[first:])


@contextlib.asynccontextmanager
async def _server(folder: Path) -> AsyncIterator[tuple[str, Any]]:
    """The real server on 127.0.0.1 (a free port) serving the bench desk: (ws url, hub)."""
    import uvicorn

    from voicehub.desks.desk import load_desks
    from voicehub.server.app import create_app, uvicorn_config
    from voicehub.server.settings import ServerSettings

    (folder / "channels").mkdir()
    (folder / "channels" / "talkover.toml").write_text(_DESK)
    settings = ServerSettings(
        host="127.0.0.1",
        port=0,
        channels_dir=folder / "channels",
        db_path=folder / "voicehub.db",
        log_level="warning",
    )
    app = create_app(settings, desks=load_desks(settings.channels_dir))

    class Server(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            yield  # Ctrl-C belongs to the bench command

    server = Server(uvicorn_config(app, settings))
    serving = asyncio.create_task(server.serve())
    while not server.started:
        if serving.done():
            await serving  # raises the startup error
            raise RuntimeError("the server did not start")
        await asyncio.sleep(0.05)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"ws://127.0.0.1:{port}", app.state.parts.board.hub
    finally:
        server.should_exit = True
        await asyncio.wait_for(serving, 30)


async def _one_call(url: str, hub: Any, number: int, offset: float, speech: bytes) -> Any:
    """One call of the sweep; returns what its caller saw."""
    conversation = f"talkover-{number}"
    async with TalkoverCaller(f"{url}/desks/talkover/call?conversation={conversation}") as call:
        record = call.record
        if not await call.wait(lambda: bool(record.room_id), 30):
            raise RuntimeError("the bench call got no session event")
        await hub.delivery.deliver(record.room_id, RESULT, strategy=WaitForIdle(buffer=BUFFER))
        if not await call.wait(lambda: bool(record.acks), 30):  # the greeting has played
            raise RuntimeError("the bench call's greeting was never played out")
        call.speak(speech, record.acks[0] + offset)
        if not await call.wait(lambda: "delivered" in record.outcomes, 60):
            raise RuntimeError(f"the result was not delivered (offset {offset} s)")
    return record


async def run(store: str = "sqlite", quick: bool = False) -> dict[str, Any]:
    """The `delivery_talkover` section: about 10 s per offset (12 offsets, 6 when quick)."""
    del store  # the server's own SQLite file
    started = time.perf_counter()
    speech = await asyncio.to_thread(_caller_speech)
    offsets = QUICK_OFFSETS if quick else OFFSETS
    talkover_ms: list[float] = []
    to_audio_ms: list[float] = []
    attempts: list[int] = []
    window_ms: list[float] = []
    with tempfile.TemporaryDirectory(prefix="voicehub-talkover-") as folder:
        async with _server(Path(folder)) as (url, hub):
            for number, offset in enumerate(offsets):
                record = await _one_call(url, hub, number, offset, speech)
                talkover_ms.append(round(record.talkover() * 1000, 1))
                to_audio_ms += [gap * 1000 for gap in record.first_delivery_audio]
                attempts.append(len(record.attempts))
                window_ms += [gap * 1000 for gap in record.ack_to_delivered]
    figures = {
        "max_ms": max(talkover_ms),
        "median_ms": round(statistics.median(talkover_ms), 1),
        "decision_to_audio_ms": round(statistics.median(to_audio_ms), 1),
        "decision_to_audio_max_ms": round(max(to_audio_ms), 1),
        # exactly once: a crash inside this window speaks the result again on reconnect
        "ack_to_delivered_ms": round(statistics.median(window_ms), 1),
        "ack_to_delivered_max_ms": round(max(window_ms), 1),
        "calls_talked_over": sum(1 for ms in talkover_ms if ms > 0),
        "calls": len(offsets),
        "per_offset_ms": dict(zip([f"{o:.2f}" for o in offsets], talkover_ms, strict=True)),
        "attempts_per_call": round(float(np.mean(attempts)), 2),
        "buffer_s": BUFFER,
        "quick": quick,
        "section_seconds": round(time.perf_counter() - started, 1),
    }
    return {"delivery_talkover": figures}
