"""A protocol-faithful fake of the OpenAI Realtime API (GA shapes, PROTOCOLS.md section 1).

A real WebSocket server on 127.0.0.1 (free port) that the real `openai` SDK reaches with
`AsyncOpenAI(base_url=server.base_url)`. What it does, per connection:

- `session.created` on connect; `session.update` merges the session and answers the whole
  of it in `session.updated`, or an `error` (wrong `type`, nested tools, a new voice after
  the model has spoken);
- audio in the session's formats: 24 kHz PCM16 (`audio/pcm`) or G.711 mu-law at 8 kHz
  (`audio/pcmu`), each way as `session.update` set it;
- server VAD on the *energy* of the audio appended (as 24 kHz PCM16, 20 ms windows):
  `speech_started` / `speech_stopped` / `committed` and the user item, with the caller's
  words recognized offline (PocketSphinx) as the input transcription; with
  `interrupt_response` a caller turn cancels the running response (`turn_detected`);
- responses in the canonical sequences A and B: what to say or call comes from `brain`, the
  audio is synthesized offline (Piper, 24 kHz) and streamed in 100 ms deltas, as fast as
  the socket takes them; `hold` (an Event) pauses a response after `hold_after` deltas so a
  test can barge in while it is still running;
- `response.cancel`, `conversation.item.create` / `.truncate`, and `error` events for bad
  input (unknown types, bad JSON, a second active response, truncating past the audio).

Tests read `received` (every client event), wait with `wait_for`, and break things with
`send_raw` (a malformed event), `drop` (the connection dies), `fail` (a server `error`
event, then the server closes with 1011, as the API does on an internal error) and
`refuse` (the next handshakes are rejected with an HTTP status: 429, 503).

`LoopbackRealtimeModel` is the same API cut to what the relay benchmark needs, in a child
process of its own (its CPU is not the relay's): it answers `session.update`, then keeps
one response speaking, each `input_audio_buffer.append` earning as much model audio as it
carries, sent in `response.output_audio.delta` events of `delta_ms` each, so every paced
frame crosses the relay both ways. The API does not document a delta's size: 20 ms (the
default) is the relay's worst case, one event per frame; `FakeRealtimeServer` streams
100 ms deltas.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import copy
import itertools
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any

import numpy as np
from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.datastructures import Headers
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response

from voicehub.voice.audio import lin2ulaw, resample_pcm16, ulaw2lin
from voicehub_dev.fakes.child_process import ChildFake, serving_until_told

RATE = 24000
WINDOW = 480  # samples in 20 ms
DELTA_BYTES = 4800  # 100 ms
MULAW_DELTA_BYTES = 800  # 100 ms of audio/pcmu


@dataclass
class Say:
    text: str


@dataclass
class Call:
    name: str
    arguments: dict[str, Any]


@dataclass
class Turn:
    """What the brain sees: the conversation so far and the instructions in force."""

    items: list[dict[str, Any]]
    instructions: str
    response: dict[str, Any]
    tools: list[str]

    @property
    def last(self) -> dict[str, Any]:
        return self.items[-1] if self.items else {}

    def last_text(self) -> str:
        """The text of the last item (a transcript, an input_text, or a tool output)."""
        item = self.last
        if item.get("type") == "function_call_output":
            return str(item.get("output", ""))
        parts = item.get("content") or [{}]
        return str(parts[0].get("text") or parts[0].get("transcript") or "")


Brain = Callable[[Turn], list[Say | Call]]

DEFAULT_SESSION: dict[str, Any] = {
    "type": "realtime",
    "object": "realtime.session",
    "model": "gpt-realtime",
    "output_modalities": ["audio"],
    "instructions": "",
    "tools": [],
    "tool_choice": "auto",
    "audio": {
        "input": {
            "format": {"type": "audio/pcm", "rate": RATE},
            "transcription": None,
            "turn_detection": {
                "type": "server_vad",
                "threshold": 0.5,
                "prefix_padding_ms": 300,
                "silence_duration_ms": 500,
                "create_response": True,
                "interrupt_response": True,
            },
        },
        "output": {"format": {"type": "audio/pcm", "rate": RATE}, "voice": "marin"},
    },
}


def _merge(base: dict[str, Any], update: dict[str, Any]) -> None:
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            _merge(base[key], value)
        else:
            base[key] = value


class FakeRealtimeServer:
    """Serves the Realtime API on 127.0.0.1; one `_Session` per connection."""

    def __init__(self, brain: Brain, *, energy_threshold: float = 400.0) -> None:
        self.brain = brain
        self.energy_threshold = energy_threshold
        self.received: list[dict[str, Any]] = []
        self.sent: list[dict[str, Any]] = []
        self.sessions: list[_Session] = []
        self.hold: asyncio.Event | None = None
        self.hold_after = 1  # deltas sent before a hold
        self.hold_text: str | None = None  # hold only speech containing this text
        self.refuse_updates: str | None = None  # error message for every session.update
        self.requests: list[str] = []
        self.refusals: list[int] = []  # HTTP statuses for the next handshakes
        self.refused = 0
        self._server: Server | None = None
        self._changed = asyncio.Condition()
        self._ids = itertools.count(1)
        self._audio_cache: dict[str, bytes] = {}

    async def __aenter__(self) -> FakeRealtimeServer:
        self._server = await serve(
            self._handle, "127.0.0.1", 0, max_size=None, process_request=self._handshake
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    @property
    def base_url(self) -> str:
        assert self._server is not None
        port = next(iter(self._server.sockets)).getsockname()[1]
        return f"http://127.0.0.1:{port}/v1"

    def new_id(self, prefix: str) -> str:
        return f"{prefix}_{next(self._ids)}"

    async def speech(self, text: str) -> bytes:
        if text not in self._audio_cache:
            from voicehub.voice.providers.offline import synthesize

            self._audio_cache[text] = await asyncio.to_thread(synthesize, text, "piper", RATE)
        return self._audio_cache[text]

    # -- test controls ---------------------------------------------------------------------

    def of_type(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.received if e.get("type") == kind]

    async def wait_for(self, predicate: Callable[[], bool], timeout: float = 30.0) -> None:
        async def until() -> None:
            async with self._changed:
                await self._changed.wait_for(predicate)

        await asyncio.wait_for(until(), timeout)

    async def notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    async def send_raw(self, text: str) -> None:
        """Send `text` as is to the latest connection (a malformed event)."""
        await self.sessions[-1].ws.send(text)

    async def drop(self) -> None:
        """Kill the latest connection without a closing handshake (close code 1006)."""
        self.sessions[-1].ws.transport.abort()

    async def fail(self, message: str = "The server had an error") -> None:
        """A `server_error` event on the latest connection, then a 1011 close."""
        session = self.sessions[-1]
        detail = {"type": "server_error", "code": "server_error", "message": message}
        await session.emit({"type": "error", "error": {**detail, "param": None, "event_id": None}})
        await session.ws.close(1011, "internal error")

    def refuse(self, *statuses: int) -> None:
        """Reject the next handshakes with these HTTP statuses, one each."""
        self.refusals.extend(statuses)

    # -- connections -----------------------------------------------------------------------

    async def _handshake(self, ws: ServerConnection, request: Request) -> Response | None:
        if not self.refusals:
            return None
        status = self.refusals.pop(0)
        self.refused += 1
        await self.notify()
        body = json.dumps({"error": {"message": f"refused with {status}"}}).encode()
        headers = Headers([("Content-Type", "application/json")])
        return Response(status, "Refused", headers, body)

    async def _handle(self, ws: ServerConnection) -> None:
        assert ws.request is not None
        self.requests.append(ws.request.path)
        session = _Session(self, ws)
        self.sessions.append(session)
        try:
            await session.run()
        except ConnectionClosed:
            pass  # dropped or failed on purpose
        finally:
            session.closed()
            await self.notify()


@dataclass
class _Response:
    id: str
    body: dict[str, Any]
    cancelled: str | None = None
    task: asyncio.Task[None] | None = None
    output: list[dict[str, Any]] = field(default_factory=list)
    stopped: asyncio.Event = field(default_factory=asyncio.Event)

    def cancel(self, reason: str) -> None:
        self.cancelled = self.cancelled or reason
        self.stopped.set()


class _Session:
    def __init__(self, server: FakeRealtimeServer, ws: ServerConnection) -> None:
        self.server, self.ws = server, ws
        self.config = copy.deepcopy(DEFAULT_SESSION)
        self.config["id"] = server.new_id("sess")
        self.items: list[dict[str, Any]] = []
        self.audio_ms: dict[str, int] = {}  # assistant item -> ms of audio produced
        self.active: _Response | None = None
        self.spoken = False
        self.buffer = bytearray()  # appended audio not yet committed
        self.position = 0  # samples appended since the connection opened
        self.pending = np.zeros(0, dtype=np.int16)  # audio not yet a whole VAD window
        self.speaking_since: int | None = None
        self.quiet = 0
        self.loud = 0
        self.user_item: str | None = None

    def closed(self) -> None:
        """The connection ended: a running response stops (its socket is gone)."""
        if self.active is not None:
            self.active.cancel("client_cancelled")
            if self.active.task is not None:
                self.active.task.cancel()

    async def emit(self, event: dict[str, Any]) -> None:
        self.server.sent.append(event)
        await self.ws.send(json.dumps({"event_id": self.server.new_id("event"), **event}))

    async def error(self, code: str, message: str, client_event: dict[str, Any] | None) -> None:
        event_id = client_event.get("event_id") if isinstance(client_event, dict) else None
        detail = {"type": "invalid_request_error", "code": code, "message": message}
        await self.emit({"type": "error", "error": {**detail, "param": None, "event_id": event_id}})

    async def run(self) -> None:
        await self.emit({"type": "session.created", "session": self.config})
        async for message in self.ws:
            try:
                event = json.loads(message)
            except ValueError:
                await self.error("invalid_json", "the event is not JSON", None)
                continue
            self.server.received.append(event)
            handler = getattr(self, "on_" + str(event.get("type")).replace(".", "_"), None)
            if handler is None:
                await self.error("invalid_type", f"unknown event type {event.get('type')!r}", event)
            else:
                await handler(event)
            await self.server.notify()

    # -- client events -----------------------------------------------------------------------

    def holds(self, text: str) -> bool:
        wanted = self.server.hold_text
        return self.server.hold is not None and (wanted is None or wanted in text)

    async def on_session_update(self, event: dict[str, Any]) -> None:
        session = event.get("session") or {}
        if self.server.refuse_updates is not None:
            await self.error("invalid_value", self.server.refuse_updates, event)
            return
        if session.get("type") != "realtime":
            await self.error("invalid_value", "session.type must be 'realtime'", event)
            return
        if any("function" in tool or "name" not in tool for tool in session.get("tools", [])):
            await self.error("invalid_value", "GA function tools are flat", event)
            return
        voice = session.get("audio", {}).get("output", {}).get("voice")
        if voice and voice != self.config["audio"]["output"]["voice"] and self.spoken:
            await self.error("cannot_update_voice", "voice cannot change after audio", event)
            return
        _merge(self.config, session)
        await self.emit({"type": "session.updated", "session": self.config})

    async def on_input_audio_buffer_append(self, event: dict[str, Any]) -> None:
        try:
            audio = base64.b64decode(event["audio"], validate=True)
        except (KeyError, ValueError):
            await self.error("invalid_value", "audio must be base64", event)
            return
        if _is_pcmu(self.config["audio"]["input"]):  # the fake hears it as 24 kHz PCM16
            audio = resample_pcm16(ulaw2lin(audio), 8000, RATE)
        self.buffer += audio
        samples = np.concatenate((self.pending, np.frombuffer(audio, dtype=np.int16)))
        whole = len(samples) // WINDOW * WINDOW
        self.pending = samples[whole:]
        for start in range(0, whole, WINDOW):
            window = samples[start : start + WINDOW].astype(np.float64)
            self.position += WINDOW
            await self.vad(float(np.sqrt(np.mean(window * window))))

    async def vad(self, energy: float) -> None:
        detection = self.config["audio"]["input"]["turn_detection"]
        if detection is None:
            return
        ms = self.position * 1000 // RATE
        if self.speaking_since is None:
            self.loud = self.loud + 1 if energy > self.server.energy_threshold else 0
            if self.loud >= 3:  # 60 ms of sound
                self.speaking_since, self.quiet = ms - 60, 0
                self.user_item = self.server.new_id("item")
                await self.emit(
                    {
                        "type": "input_audio_buffer.speech_started",
                        "audio_start_ms": self.speaking_since,
                        "item_id": self.user_item,
                    }
                )
                if detection.get("interrupt_response") and self.active is not None:
                    self.active.cancel("turn_detected")
            return
        self.quiet = self.quiet + 1 if energy <= self.server.energy_threshold else 0
        if self.quiet * 20 >= detection.get("silence_duration_ms", 500):
            self.speaking_since = None
            self.loud = 0
            item_id = self.user_item
            await self.emit(
                {
                    "type": "input_audio_buffer.speech_stopped",
                    "audio_end_ms": ms,
                    "item_id": item_id,
                }
            )
            await self.commit(item_id, answer=bool(detection.get("create_response")))

    async def commit(self, item_id: str | None, *, answer: bool) -> None:
        audio, self.buffer = bytes(self.buffer), bytearray()
        item_id = item_id or self.server.new_id("item")
        previous = self.items[-1]["id"] if self.items else None
        await self.emit(
            {
                "type": "input_audio_buffer.committed",
                "item_id": item_id,
                "previous_item_id": previous,
            }
        )
        content = {"type": "input_audio", "transcript": None}
        item = {"id": item_id, "type": "message", "role": "user", "content": [content]}
        await self.add_item(item)
        if self.config["audio"]["input"].get("transcription"):
            from voicehub.voice.providers.offline import transcribe

            text = await asyncio.to_thread(transcribe, audio, RATE)
            content["transcript"] = text
            await self.emit(
                {
                    "type": "conversation.item.input_audio_transcription.completed",
                    "item_id": item_id,
                    "content_index": 0,
                    "transcript": text,
                    "usage": {"type": "duration", "seconds": len(audio) / 2 / RATE},
                }
            )
        if answer:
            await self.start_response({})

    async def on_input_audio_buffer_commit(self, event: dict[str, Any]) -> None:
        if not self.buffer:
            await self.error("input_audio_buffer_commit_empty", "buffer is empty", event)
            return
        await self.commit(None, answer=False)

    async def on_conversation_item_create(self, event: dict[str, Any]) -> None:
        item = dict(event.get("item") or {})
        kind, role = item.get("type"), item.get("role")
        if kind == "function_call_output":
            calls = {i.get("call_id") for i in self.items if i.get("type") == "function_call"}
            if item.get("call_id") not in calls:
                await self.error("invalid_value", "no function call with this call_id", event)
                return
        elif kind != "message" or role not in ("user", "system") or not item.get("content"):
            await self.error("invalid_value", f"cannot create a {kind}/{role} item", event)
            return
        item.setdefault("id", self.server.new_id("item"))
        await self.add_item(item)

    async def on_conversation_item_truncate(self, event: dict[str, Any]) -> None:
        item_id, end = event.get("item_id"), event.get("audio_end_ms")
        if item_id not in self.audio_ms:
            await self.error("invalid_value", "only assistant audio items can be truncated", event)
            return
        if not isinstance(end, int) or end < 0 or end > self.audio_ms[item_id]:
            await self.error("invalid_value", "audio_end_ms is past the end of the audio", event)
            return
        self.audio_ms[item_id] = end
        await self.emit(
            {
                "type": "conversation.item.truncated",
                "item_id": item_id,
                "content_index": event.get("content_index", 0),
                "audio_end_ms": end,
            }
        )

    async def on_response_create(self, event: dict[str, Any]) -> None:
        if self.active is not None:
            message = "Conversation already has an active response"
            await self.error("conversation_already_has_active_response", message, event)
            return
        await self.start_response(event.get("response") or {})

    async def on_response_cancel(self, event: dict[str, Any]) -> None:
        wanted = event.get("response_id")
        stale = wanted is not None and (self.active is None or self.active.id != wanted)
        if self.active is None or self.active.cancelled or stale:
            message = "Cancellation failed: no active response found"
            await self.error("response_cancel_not_active", message, event)
            return
        self.active.cancel("client_cancelled")

    # -- responses ---------------------------------------------------------------------------

    async def add_item(self, item: dict[str, Any]) -> None:
        previous = self.items[-1]["id"] if self.items else None
        self.items.append(item)
        for kind in ("conversation.item.added", "conversation.item.done"):
            await self.emit({"type": kind, "item": item, "previous_item_id": previous})

    async def start_response(self, body: dict[str, Any]) -> None:
        response = _Response(self.server.new_id("resp"), body)
        self.active = response
        response.task = asyncio.create_task(self.respond(response))

    def _shape(self, response: _Response, status: str) -> dict[str, Any]:
        shape: dict[str, Any] = {
            "id": response.id,
            "object": "realtime.response",
            "status": status,
            "output": response.output,
            "conversation_id": "conv_1",
            "output_modalities": ["audio"],
            "metadata": response.body.get("metadata"),
        }
        if status == "cancelled":
            shape["status_details"] = {"type": "cancelled", "reason": response.cancelled}
        return shape

    async def respond(self, response: _Response) -> None:
        await self.emit(
            {"type": "response.created", "response": self._shape(response, "in_progress")}
        )
        instructions = response.body.get("instructions") or self.config["instructions"]
        tools = [tool["name"] for tool in self.config["tools"]]
        turn = Turn(list(self.items), instructions, response.body, tools)
        for index, step in enumerate(self.server.brain(turn)):
            if response.cancelled:
                break
            if isinstance(step, Say):
                await self.say(response, index, step.text)
            else:
                await self.call(response, index, step)
        status = "cancelled" if response.cancelled else "completed"
        if self.active is response:
            self.active = None
        await self.emit({"type": "response.done", "response": self._shape(response, status)})
        await self.server.notify()

    async def say(self, response: _Response, index: int, text: str) -> None:
        audio = await self.server.speech(text)
        delta_bytes, bytes_per_ms = DELTA_BYTES, 2 * RATE // 1000
        if _is_pcmu(self.config["audio"]["output"]):
            audio = lin2ulaw(resample_pcm16(audio, RATE, 8000))
            delta_bytes, bytes_per_ms = MULAW_DELTA_BYTES, 8
        item_id = self.server.new_id("item")
        item: dict[str, Any] = {"id": item_id, "type": "message", "role": "assistant"}
        item.update(status="in_progress", content=[])
        scope = {"response_id": response.id, "item_id": item_id, "output_index": index}
        await self.emit({"type": "response.output_item.added", "item": item, **scope})
        await self.add_item(item)
        part = {"type": "audio", "transcript": ""}
        await self.emit(
            {"type": "response.content_part.added", "content_index": 0, "part": part, **scope}
        )
        self.audio_ms[item_id] = 0
        sent = 0
        for start in range(0, len(audio), delta_bytes):
            if response.cancelled:
                break
            chunk = audio[start : start + delta_bytes]
            words = text.split()
            share = " ".join(
                words[
                    len(words) * start // len(audio) : len(words)
                    * (start + len(chunk))
                    // len(audio)
                ]
            )
            await self.emit(
                {
                    "type": "response.output_audio_transcript.delta",
                    "delta": share,
                    "content_index": 0,
                    **scope,
                }
            )
            await self.emit(
                {
                    "type": "response.output_audio.delta",
                    "delta": base64.b64encode(chunk).decode(),
                    "content_index": 0,
                    **scope,
                }
            )
            self.spoken = True
            sent += len(chunk)
            self.audio_ms[item_id] = sent // bytes_per_ms
            if start == (self.server.hold_after - 1) * delta_bytes and self.holds(text):
                await self.server.notify()
                assert self.server.hold is not None
                waits = {
                    asyncio.create_task(self.server.hold.wait()),
                    asyncio.create_task(response.stopped.wait()),
                }
                await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
                for wait in waits:
                    wait.cancel()
            await asyncio.sleep(0)  # let a cancel or a caller's audio in
        heard = text if not response.cancelled else text[: len(text) * sent // max(1, len(audio))]
        await self.emit({"type": "response.output_audio.done", "content_index": 0, **scope})
        await self.emit(
            {
                "type": "response.output_audio_transcript.done",
                "transcript": heard,
                "content_index": 0,
                **scope,
            }
        )
        await self.emit(
            {
                "type": "response.content_part.done",
                "content_index": 0,
                "part": {"type": "audio", "transcript": heard},
                **scope,
            }
        )
        item.update(status="incomplete" if response.cancelled else "completed")
        item["content"] = [{"type": "output_audio", "transcript": heard}]
        await self.emit({"type": "response.output_item.done", "item": item, **scope})
        await self.emit({"type": "conversation.item.done", "item": item, "previous_item_id": None})
        response.output.append(item)

    async def call(self, response: _Response, index: int, step: Call) -> None:
        item_id, call_id = self.server.new_id("item"), self.server.new_id("call")
        arguments = json.dumps(step.arguments)
        item = {"id": item_id, "type": "function_call", "name": step.name, "call_id": call_id}
        item.update(arguments="", status="in_progress")
        scope = {"response_id": response.id, "item_id": item_id, "output_index": index}
        await self.emit({"type": "response.output_item.added", "item": item, **scope})
        await self.add_item(item)
        await self.emit(
            {
                "type": "response.function_call_arguments.delta",
                "call_id": call_id,
                "delta": arguments,
                **scope,
            }
        )
        await self.emit(
            {
                "type": "response.function_call_arguments.done",
                "call_id": call_id,
                "name": step.name,
                "arguments": arguments,
                **scope,
            }
        )
        item.update(arguments=arguments, status="completed")
        await self.emit({"type": "response.output_item.done", "item": item, **scope})
        await self.emit({"type": "conversation.item.done", "item": item, "previous_item_id": None})
        response.output.append(item)


def _is_pcmu(direction: dict[str, Any]) -> bool:
    return bool((direction.get("format") or {}).get("type") == "audio/pcmu")


# -- the loopback model of the relay benchmark -------------------------------------------

MODEL_BYTES_PER_MS = 48  # audio/pcm: PCM16 at 24 kHz
MULAW_BYTES_PER_MS = 8  # audio/pcmu: G.711 at 8 kHz


class LoopbackRealtimeModel:
    """The loopback stand-in's process (see the module); `base_url` for `AsyncOpenAI` once
    started. `delta_ms` is the model audio per `response.output_audio.delta`; audio goes in
    the formats the session asked for (`audio/pcm` at 24 kHz, or `audio/pcmu`)."""

    def __init__(self, delta_ms: int = 20) -> None:
        if delta_ms <= 0:
            raise ValueError(f"delta_ms must be positive, got {delta_ms}")
        self.delta_ms = delta_ms
        self.base_url = ""
        self._child = ChildFake(_serve_loopback, delta_ms)

    async def start(self) -> None:
        self.base_url = f"http://127.0.0.1:{await self._child.start()}/v1"

    async def stop(self) -> None:
        await self._child.stop()


def _loopback_delta(size: int) -> str:
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


def _serve_loopback(conn: Connection, delta_ms: int) -> None:
    asyncio.run(_loopback(conn, delta_ms))


async def _loopback(conn: Connection, delta_ms: int) -> None:
    async def handle(ws: ServerConnection) -> None:
        # the relay may close its call while deltas are still going out
        with contextlib.suppress(ConnectionClosed):
            await relay(ws)

    async def relay(ws: ServerConnection) -> None:
        per_ms = {"in": MODEL_BYTES_PER_MS, "out": MODEL_BYTES_PER_MS}
        delta = _loopback_delta(delta_ms * per_ms["out"])
        earned_ms = 0.0
        async for message in ws:
            event = json.loads(message)
            kind = event["type"]
            if kind == "session.update":
                audio = event["session"].get("audio", {})
                for way, key in (("in", "input"), ("out", "output")):
                    if _is_pcmu(audio.get(key, {})):
                        per_ms[way] = MULAW_BYTES_PER_MS
                delta = _loopback_delta(delta_ms * per_ms["out"])
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
        conn.send(next(iter(server.sockets)).getsockname()[1])
        await serving_until_told(conn)
