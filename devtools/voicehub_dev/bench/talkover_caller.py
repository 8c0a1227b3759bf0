"""A lean WebSocket caller for the `delivery_talkover` bench: exact 20 ms pacing both ways.

`voicehub call`'s client sends silence in 100 ms messages like an open microphone; this one
sends every frame on its own 20 ms deadline, so a caller offset is as precise as the loop
allows. It plays the agent's audio on a virtual speaker (chunks back to back from their
arrival), acks each speech mark when the audio before it has played, drops what has not
played on `clear`, and keeps what the talk-over figure needs: the played intervals of the
agent's delivery audio and the send times of the caller's voiced frames.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from voicehub.core.jobs import TaskSet
from voicehub.voice.events import FRAME_BYTES, FRAME_SECONDS, SAMPLE_RATE

VOICED_RMS = 328.0  # -40 dBFS: a synthesized caller is clean, louder frames are speech


def voiced(frame: bytes) -> bool:
    """Whether a caller frame carries speech (its level is above -40 dBFS)."""
    samples = np.frombuffer(frame, dtype="<i2").astype(np.float64)
    return bool(samples.size) and float(np.sqrt(np.mean(samples * samples))) > VOICED_RMS


@dataclass
class Played:
    """Agent audio on the virtual speaker, from `start` to `end` (loop seconds)."""

    start: float
    end: float
    delivery: bool  # sent between a delivery attempt and its outcome


@dataclass
class CallerRecord:
    """What one bench call saw."""

    room_id: str = ""
    played: list[Played] = field(default_factory=list)
    voiced_sent: list[float] = field(default_factory=list)
    attempts: list[float] = field(default_factory=list)  # delivery_attempt arrivals
    first_delivery_audio: list[float] = field(default_factory=list)  # one per attempt heard
    outcomes: list[str] = field(default_factory=list)
    acks: list[float] = field(default_factory=list)
    # The exactly-once window: the result's last playout ack sent -> its "delivered" outcome
    # (written to the store before the outcome event is sent).
    ack_to_delivered: list[float] = field(default_factory=list)

    def talkover(self) -> float:
        """Seconds of delivery audio played over the caller's voiced frames."""
        total = 0.0
        for interval in self.played:
            if not interval.delivery:
                continue
            for sent in self.voiced_sent:
                overlap = min(interval.end, sent + FRAME_SECONDS) - max(interval.start, sent)
                total += max(0.0, overlap)
        return total


class TalkoverCaller:
    """One call to `url`; `speak(pcm16, at)` starts the caller's words at loop time `at`."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.record = CallerRecord()
        self.news = asyncio.Event()
        self._ws: ClientConnection | None = None
        self._speech: deque[bytes] = deque()
        self._speak_at = float("inf")
        self._play_end = 0.0
        self._in_delivery = False
        self._heard_attempt = False
        self._acks = TaskSet("talk-over caller: playout acks")
        self._tasks: list[asyncio.Task[None]] = []

    async def __aenter__(self) -> TalkoverCaller:
        self._ws = await connect(self.url, max_size=2**20, compression=None)
        self._tasks = [asyncio.create_task(self._receive()), asyncio.create_task(self._mic())]
        return self

    async def __aexit__(self, *exc: object) -> None:
        for task in [*self._tasks, *self._acks]:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if self._ws is not None:
            await self._ws.close()

    def now(self) -> float:
        return asyncio.get_running_loop().time()

    def speak(self, pcm16: bytes, at: float) -> None:
        """Queue the caller's words to start at loop time `at` (on a frame deadline)."""
        padded = pcm16 + bytes(-len(pcm16) % FRAME_BYTES)
        self._speech.extend(padded[i : i + FRAME_BYTES] for i in range(0, len(padded), FRAME_BYTES))
        self._speak_at = at

    async def wait(self, predicate: Any, timeout: float) -> bool:
        """Wait until `predicate()` holds (re-checked on every message); False on timeout."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not predicate():
            self.news.clear()
            left = deadline - loop.time()
            if left <= 0:
                return False
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.news.wait(), left)
        return True

    async def _mic(self) -> None:
        assert self._ws is not None
        silence = bytes(FRAME_BYTES)
        loop = asyncio.get_running_loop()
        next_at = loop.time()
        with contextlib.suppress(ConnectionClosed):
            while True:
                frame = silence
                if self._speech and next_at >= self._speak_at:
                    frame = self._speech.popleft()
                await self._ws.send(frame)
                if frame is not silence and voiced(frame):
                    self.record.voiced_sent.append(loop.time())
                next_at += FRAME_SECONDS
                delay = next_at - loop.time()
                if delay > 0:
                    await asyncio.sleep(delay)

    async def _receive(self) -> None:
        assert self._ws is not None
        with contextlib.suppress(ConnectionClosed):
            async for message in self._ws:
                now = self.now()
                if isinstance(message, bytes):
                    self._audio(message, now)
                else:
                    self._event(json.loads(message), now)
                self.news.set()

    def _audio(self, pcm16: bytes, now: float) -> None:
        start = max(now, self._play_end)
        self._play_end = start + len(pcm16) / 2 / SAMPLE_RATE
        self.record.played.append(Played(start, self._play_end, self._in_delivery))
        if self._in_delivery and self._heard_attempt:
            self._heard_attempt = False
            self.record.first_delivery_audio.append(now - self.record.attempts[-1])

    def _event(self, event: dict[str, Any], now: float) -> None:
        kind = event.get("type")
        if kind == "session":
            self.record.room_id = str(event.get("room_id", ""))
        elif kind == "speech_mark":
            self._acks.start(self._ack(str(event["id"]), self._play_end - now), name="ack")
        elif kind == "clear":
            self._acks.cancel()
            for interval in self.record.played:  # what had not played is dropped
                interval.end = min(interval.end, now)
            self.record.played = [p for p in self.record.played if p.end > p.start]
            self._play_end = now
        elif kind == "delivery_attempt":
            self.record.attempts.append(now)
            self._in_delivery = self._heard_attempt = True
        elif kind == "delivery":
            self.record.outcomes.append(str(event.get("outcome")))
            if event.get("outcome") == "delivered" and self.record.acks:
                self.record.ack_to_delivered.append(now - self.record.acks[-1])
            self._in_delivery = self._heard_attempt = False

    async def _ack(self, mark_id: str, delay: float) -> None:
        if delay > 0:
            await asyncio.sleep(delay)  # the audio before the mark is still playing
        assert self._ws is not None
        with contextlib.suppress(ConnectionClosed):
            await self._ws.send(json.dumps({"type": "playout", "id": mark_id}))
            self.record.acks.append(self.now())
        self.news.set()
