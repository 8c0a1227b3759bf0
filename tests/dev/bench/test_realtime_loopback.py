"""The relay bench's loopback Realtime model, in its child process: answers the session and
earns model audio for the caller's audio, in the formats the session asked for."""

from __future__ import annotations

import base64
import json

from websockets.asyncio.client import connect

from voicehub_dev.fakes.openai_realtime import (
    MODEL_BYTES_PER_MS,
    MULAW_BYTES_PER_MS,
    LoopbackRealtimeModel,
)


async def test_each_append_earns_its_audio_back_in_deltas_of_the_asked_size() -> None:
    model = LoopbackRealtimeModel(delta_ms=20)
    await model.start()
    try:
        url = model.base_url.replace("http://", "ws://") + "/realtime?model=any"
        for audio_format, per_ms in (
            ("audio/pcm", MODEL_BYTES_PER_MS),
            ("audio/pcmu", MULAW_BYTES_PER_MS),
        ):
            async with connect(url) as ws:
                fmt = {"format": {"type": audio_format}}
                await ws.send(
                    json.dumps(
                        {
                            "type": "session.update",
                            "session": {"audio": {"input": fmt, "output": fmt}},
                        }
                    )
                )
                kinds = [json.loads(await ws.recv())["type"] for _ in range(2)]
                assert kinds == ["session.updated", "response.created"]
                frame = base64.b64encode(bytes(40 * per_ms)).decode()  # 40 ms of caller audio
                await ws.send(json.dumps({"type": "input_audio_buffer.append", "audio": frame}))
                deltas = [json.loads(await ws.recv()) for _ in range(2)]  # two of 20 ms
                assert {d["type"] for d in deltas} == {"response.output_audio.delta"}
                assert all(len(base64.b64decode(d["delta"])) == 20 * per_ms for d in deltas)
    finally:
        await model.stop()
