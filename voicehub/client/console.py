"""`voicehub console`: talk to a desk live from the terminal, with the computer's microphone
and speakers (PortAudio, through `sounddevice`).

It is a caller on the same WebSocket protocol as the browser's console page:

- the microphone's 16 kHz PCM16 goes out in 20 ms frames as the sound card delivers them;
- the agent's audio is queued for the speakers, and each `speech_mark` is acknowledged once
  the output device has actually played the audio before it (not when it arrived), so the
  server knows when the caller is idle and a result may be spoken; a `clear` (the caller
  talked over the agent) drops what has not played yet;
- every event worth a line (the words heard and spoken, tool calls, tasks, deliveries,
  errors) is printed as it happens, with seconds since the call started.

The sound card is reached only through `sounddevice`'s `RawInputStream` and
`RawOutputStream` with callbacks, which run on PortAudio's threads; a module with those two
classes can stand in for it (tests use file-backed ones).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import uuid
from collections import deque
from dataclasses import dataclass
from typing import Any, TextIO

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from voicehub.client.call import CallOptions
from voicehub.client.endings import CallRefused
from voicehub.client.report import CallReport, ReceivedEvent, describe_event
from voicehub.core.jobs import TaskSet
from voicehub.errors import MissingExtraError, ProtocolError, VoicehubError
from voicehub.transports.call_events import Hangup, Playout, parse_server_event
from voicehub.voice.events import (
    FRAME_BYTES,
    SAMPLE_RATE,
    CallError,
    CallSession,
    ClearAudio,
    SpeechMark,
    Transcript,
)

__all__ = ["ConsoleCall", "ConsoleOptions", "Speaker", "load_sounddevice"]

FRAME_SAMPLES = FRAME_BYTES // 2
_CLOSE_TIMEOUT = 2.0


def load_sounddevice() -> Any:
    """The `sounddevice` module, or an error that says what to install."""
    try:
        import sounddevice
    except ImportError as exc:
        raise MissingExtraError("sounddevice", "console") from exc
    except OSError as exc:  # the module is there, the PortAudio library is not
        raise VoicehubError(
            f"the console needs PortAudio, the sound library ({exc}): install it "
            "(Debian/Ubuntu: apt-get install libportaudio2; macOS: brew install portaudio)"
        ) from None
    return sounddevice


@dataclass
class ConsoleOptions:
    """Where to call, and which sound devices (None: the system's default ones)."""

    desk: str
    server: str = "http://127.0.0.1:8080"
    conversation: str | None = None
    token: str | None = None
    input_device: int | str | None = None
    output_device: int | str | None = None


class Speaker:
    """The agent's audio on its way to the output device. The socket side writes and marks;
    the device's callback (another thread) drains it and learns which marks have played."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queued = bytearray()
        self._written = 0  # bytes ever queued
        self._played = 0  # bytes ever handed to the device
        self._marks: deque[tuple[int, str]] = deque()  # (end offset, mark id)

    def write(self, pcm16: bytes) -> None:
        with self._lock:
            self._queued += pcm16
            self._written += len(pcm16)

    def mark(self, mark_id: str) -> None:
        """The audio written so far ends a speech: `fill` reports `mark_id` once played."""
        with self._lock:
            self._marks.append((self._written, mark_id))

    def clear(self) -> None:
        """Drop what has not played (the caller barged in); its marks are never reported."""
        with self._lock:
            self._played += len(self._queued)
            self._queued.clear()
            self._marks.clear()

    def fill(self, size: int) -> tuple[bytes, list[str]]:
        """`size` bytes for the device (silence where nothing is queued), and the marks
        whose audio has now been played."""
        with self._lock:
            chunk = bytes(self._queued[:size])
            del self._queued[:size]
            self._played += len(chunk)
            played: list[str] = []
            while self._marks and self._marks[0][0] <= self._played:
                played.append(self._marks.popleft()[1])
        return chunk + bytes(size - len(chunk)), played


class ConsoleCall:
    """One live call from the terminal: `await run()` until the server ends it or
    `hangup()` is called (Ctrl-C); the report tells how it ended."""

    def __init__(
        self, options: ConsoleOptions, *, sound: Any = None, out: TextIO | None = None
    ) -> None:
        if options.conversation is None:
            options.conversation = f"console-{uuid.uuid4().hex[:10]}"
        self.options = options
        self.sound = sound if sound is not None else load_sounddevice()
        self.out = out
        self.report = CallReport(desk=options.desk, conversation=options.conversation)
        self.speaker = Speaker()
        self._socket: ClientConnection | None = None
        self._mic: asyncio.Queue[bytes] = asyncio.Queue()
        self._hanging_up = False
        self._acks = TaskSet("the console's playout acks")
        self._t0 = 0.0

    async def run(self) -> CallReport:
        """Call, talk, and return the report once the call is over."""
        loop = asyncio.get_running_loop()
        call = CallOptions(desk=self.options.desk, server=self.options.server)
        call.conversation = self.options.conversation
        token = self.options.token
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._socket = socket = await connect(
            call.url(),
            additional_headers=headers,
            max_size=2**20,
            compression=None,
            close_timeout=_CLOSE_TIMEOUT,
        )
        self._t0 = loop.time()
        streams = self._open_streams(loop)
        sender = asyncio.create_task(self._send_microphone())
        try:
            for stream in streams:
                stream.start()
            await self._receive()
        finally:
            sender.cancel()
            for stream in streams:
                with contextlib.suppress(Exception):
                    stream.stop()
                    stream.close()
            with contextlib.suppress(asyncio.CancelledError):
                await sender
            await socket.close()
        if not self.report.events_of(CallSession):
            errors = [e.message for e in self.report.events_of(CallError)]
            reason = errors[0] if errors else self.report.close_reason
            raise CallRefused(
                f"the call was refused ({self.report.close_code}): {reason}", self.report
            )
        return self.report

    async def hangup(self) -> None:
        """Say goodbye the protocol way; `run` returns once the server closed the call."""
        self._hanging_up = True
        if self._socket is not None:
            with contextlib.suppress(ConnectionClosed):
                await self._socket.send(Hangup().to_wire())

    # -- the sound card ------------------------------------------------------------------

    def _open_streams(self, loop: asyncio.AbstractEventLoop) -> list[Any]:
        mic, speaker, socket = self._mic, self.speaker, self._socket
        assert socket is not None

        def heard(indata: Any, frames: int, time: Any, status: Any) -> None:
            loop.call_soon_threadsafe(mic.put_nowait, bytes(indata))

        def play(outdata: Any, frames: int, time: Any, status: Any) -> None:
            chunk, played = speaker.fill(len(outdata))
            outdata[:] = chunk
            if played:
                loop.call_soon_threadsafe(self._ack, played)

        common = {"samplerate": SAMPLE_RATE, "channels": 1, "dtype": "int16"}
        return [
            self.sound.RawInputStream(
                device=self.options.input_device,
                blocksize=FRAME_SAMPLES,
                callback=heard,
                **common,
            ),
            self.sound.RawOutputStream(
                device=self.options.output_device,
                blocksize=FRAME_SAMPLES,
                callback=play,
                **common,
            ),
        ]

    def _ack(self, mark_ids: list[str]) -> None:
        socket = self._socket
        if socket is None:
            return
        for mark_id in mark_ids:
            self._acks.start(_send_quietly(socket, Playout(id=mark_id).to_wire()), name="ack")

    async def _send_microphone(self) -> None:
        """Whole 20 ms frames, as the microphone delivers them."""
        assert self._socket is not None
        pending = bytearray()
        with contextlib.suppress(ConnectionClosed):
            while True:
                pending += await self._mic.get()
                whole = len(pending) - len(pending) % FRAME_BYTES
                if whole:
                    await self._socket.send(bytes(pending[:whole]))
                    del pending[:whole]

    # -- the server ----------------------------------------------------------------------

    async def _receive(self) -> None:
        socket = self._socket
        assert socket is not None
        try:
            async for message in socket:
                if isinstance(message, bytes):
                    self.speaker.write(message)
                    continue
                try:
                    event = parse_server_event(message)
                except ProtocolError:
                    continue  # a newer server's event: the call goes on
                self._on_event(event)
        except ConnectionClosed:
            pass
        finally:
            self.report.close_code = socket.close_code
            self.report.close_reason = socket.close_reason or ""
            self.report.closed_by_server = not self._hanging_up

    def _on_event(self, event: Any) -> None:
        at = asyncio.get_running_loop().time() - self._t0
        self.report.events.append(ReceivedEvent(at, event))
        if isinstance(event, SpeechMark):
            self.speaker.mark(event.id)
        elif isinstance(event, ClearAudio):
            self.speaker.clear()
        line = describe_event(event)
        if isinstance(event, Transcript) and event.final and event.role == "user":
            line = ("caller", line[1] if line else event.text)
        if line is not None and self.out is not None:
            print(f"{at:7.2f}  {line[0]:<8}  {line[1]}", file=self.out, flush=True)


async def _send_quietly(socket: ClientConnection, text: str) -> None:
    with contextlib.suppress(ConnectionClosed):
        await socket.send(text)
