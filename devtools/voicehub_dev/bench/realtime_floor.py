"""The relay's floor in the `realtime` bench: what one relayed call costs with no audio work.

`FloorCall` opens the same `openai` SDK connection to the same loopback model and moves
the same messages as `RealtimeVoiceSession` does in the bench (`mulaw`: a phone line's,
G.711 both ways): appends at the relay's
cadence (a speech frame every 60 ms, quiet audio every 120 ms, as much 24 kHz audio as the
frames held) and every model delta read off the socket. It does nothing with them: no
speech evidence, batching logic, resampling, base64, JSON or playout. What is left is the
SDK, websockets and asyncio per message, which no relay on the SDK can go under; the bench
sets it beside the relay and the pipeline session.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
from typing import Any

from voicehub.voice.realtime.connection import ModelConnection
from voicehub_dev.bench.voice_latency import SILENCE

__all__ = ["FloorCall"]

_SPEECH_FRAMES, _QUIET_FRAMES = 3, 6  # the relay's 60 ms and 120 ms appends
_MODEL_FRAME = 2 * 24000 // 50  # 20 ms of PCM16 at the model's rate
_MULAW_FRAME = 8000 // 50  # 20 ms of audio/pcmu


def _append(frames: int, frame_bytes: int) -> str:
    audio = base64.b64encode(bytes(frames * frame_bytes)).decode("ascii")
    return '{"type":"input_audio_buffer.append","audio":"' + audio + '"}'


def _appends(frame_bytes: int) -> dict[int, str]:
    return {frames: _append(frames, frame_bytes) for frames in (_SPEECH_FRAMES, _QUIET_FRAMES)}


class FloorCall:
    """One call's messages over the SDK, nothing done with them (the paced loop's `Call`)."""

    def __init__(self, client: Any, model: str = "gpt-realtime", *, mulaw: bool = False) -> None:
        self._client, self._model = client, model
        self._mulaw = mulaw
        self._appends = _appends(_MULAW_FRAME if mulaw else _MODEL_FRAME)
        self._sdk: Any = None
        self._reader: asyncio.Task[None] | None = None
        self._frames = 0
        self.deltas = 0

    async def start(self) -> None:
        connection = await ModelConnection.open(self._client, self._model)
        self._sdk = connection.sdk_connection
        session: dict[str, Any] = {"type": "realtime"}
        if self._mulaw:
            pcmu = {"format": {"type": "audio/pcmu"}}
            session["audio"] = {"input": pcmu, "output": pcmu}
        await connection.send({"type": "session.update", "session": session})
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        recv = self._sdk.recv_bytes
        with contextlib.suppress(Exception):  # the connection closing ends it
            while True:
                await recv()
                self.deltas += 1

    async def push(self, pcm16: bytes) -> None:
        """Count the frame; the append its batch would send, when one is due."""
        self._frames += 1
        due = _QUIET_FRAMES if pcm16 == SILENCE else _SPEECH_FRAMES
        if self._frames >= due:
            self._frames = 0
            await self._sdk.send_raw(self._appends[due])

    async def aclose(self) -> None:
        if self._reader is not None:
            self._reader.cancel()
        if self._sdk is not None:
            with contextlib.suppress(Exception):
                await self._sdk.close()

    def replies(self) -> int:
        return 1 if self.deltas > 2 else 0  # past session.updated and response.created
