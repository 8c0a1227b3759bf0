"""A loopback stand-in for the Realtime model, for the relay benchmark: a WebSocket server
in a child process (its CPU is not the relay's) that answers `session.update`, then keeps
one response speaking: every `input_audio_buffer.append` earns as much model audio as it
carries, sent in `response.output_audio.delta` events of `delta_ms` each once earned (the
relay batches its appends; the deltas keep their own size), so each paced frame crosses
the relay both ways.

The API does not document a delta's size. 20 ms (the default) is the worst case for the
relay (one event per frame); the test fake streams 100 ms deltas."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import multiprocessing
from multiprocessing.connection import Connection
from typing import Any

MODEL_BYTES_PER_MS = 48  # 24 kHz PCM16
MULAW_BYTES_PER_MS = 8  # audio/pcmu: G.711 at 8 kHz


def _delta(size: int) -> str:
    return json.dumps(
        {
            "type": "response.output_audio.delta",
            "event_id": "event_1",
            "response_id": "resp_1",
            "item_id": "item_1",
            "output_index": 0,
            "content_index": 0,
            "delta": base64.b64encode(bytes(size)).decode(),
        }
    )


async def _serve(ready: Connection, delta_ms: int) -> None:
    from websockets.asyncio.server import ServerConnection, serve
    from websockets.exceptions import ConnectionClosed

    async def handle(ws: ServerConnection) -> None:
        # the relay may close its call while deltas are still going out
        with contextlib.suppress(ConnectionClosed):
            await relay(ws)

    async def relay(ws: ServerConnection) -> None:
        per_ms = {"in": MODEL_BYTES_PER_MS, "out": MODEL_BYTES_PER_MS}
        delta = _delta(delta_ms * per_ms["out"])
        earned_ms = 0.0
        async for message in ws:
            event = json.loads(message)
            kind = event["type"]
            if kind == "session.update":
                audio = event["session"].get("audio", {})
                for way, key in (("in", "input"), ("out", "output")):
                    kind_of = audio.get(key, {}).get("format", {}).get("type")
                    per_ms[way] = MULAW_BYTES_PER_MS if kind_of == "audio/pcmu" else per_ms[way]
                delta = _delta(delta_ms * per_ms["out"])
                await ws.send(json.dumps({"type": "session.updated", "session": {}}))
                created = {"type": "response.created", "response": {"id": "resp_1"}}
                await ws.send(json.dumps(created))
            elif kind == "input_audio_buffer.append":
                audio_bytes = len(event["audio"]) * 3 // 4
                earned_ms += audio_bytes / per_ms["in"]
                while earned_ms >= delta_ms - 0.5:  # appends may be a sample short
                    earned_ms -= delta_ms
                    await ws.send(delta)

    async with serve(handle, "127.0.0.1", 0, max_size=None, compression=None) as server:
        ready.send(next(iter(server.sockets)).getsockname()[1])
        await asyncio.Future()


def _main(ready: Connection, delta_ms: int) -> None:
    asyncio.run(_serve(ready, delta_ms))


class LoopbackModel:
    """The stand-in's process; `base_url` for `AsyncOpenAI` once started. `delta_ms` is
    the model audio per `response.output_audio.delta`. Audio goes in the formats the
    session asked for (`audio/pcm` at 24 kHz, or `audio/pcmu`)."""

    def __init__(self, delta_ms: int = 20) -> None:
        if delta_ms <= 0:
            raise ValueError(f"delta_ms must be positive, got {delta_ms}")
        self.delta_ms = delta_ms
        self._process: Any = None
        self.base_url = ""

    def start(self) -> None:
        context = multiprocessing.get_context("spawn")
        parent, child = context.Pipe()
        self._process = context.Process(target=_main, args=(child, self.delta_ms), daemon=True)
        self._process.start()
        self.base_url = f"http://127.0.0.1:{parent.recv()}/v1"

    def stop(self) -> None:
        if self._process is not None:
            self._process.terminate()
            self._process.join(5)
