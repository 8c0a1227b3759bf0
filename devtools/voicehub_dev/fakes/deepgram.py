"""A protocol-faithful fake Deepgram on 127.0.0.1 (PROTOCOLS.md section 2), for the real SDK.

Two real servers, as Deepgram's own client environment has two bases (`url` serves both:
WebSocket upgrades on it are piped to the WebSocket server, as a gateway would):

- `ws_url` (the SDK environment's `production`): a `websockets` server with the live listen
  socket `/v1/listen` (see `fake_deepgram_listen` for what it "recognizes": energy segmentation
  of the audio it receives, words from transcripts the test registered; there is no real
  recognizer) and the Aura speak socket `/v1/speak` (`Speak`/`Flush`/`Clear`/`Close` in,
  binary audio, `Metadata`, `Flushed` and `Cleared` out);
- `rest_url` (the environment's `base`): HTTP/1.1 `POST /v1/speak` returning raw audio, and
  `GET /v1/projects` (the key's projects: what a key check calls).

Speech audio is real: Piper renders the text (at the asked rate; mu-law when asked).
Auth is `Authorization: Token <api_key>`; a bad key is a 401 at the handshake or on the POST.
Faults switch per test: `reject` (statuses for the next handshakes or requests: 429, 503),
`drop_listen_after` (abort the next listen socket after that many seconds of audio, with
no close frame, as a network drop), `drop_listens()` (abort every listen socket open
now), `idle_timeout` (close a listen socket that got neither audio nor KeepAlive for that
long, as Deepgram's NET-0001 after 10 s); `speak_pace` paces
the speak socket's audio (0: as fast as Piper renders; 1: real time), so a barge-in can
arrive while a reply is still streaming. Provider delays (the `cloud_pipeline` bench):
`listen_delay` holds every listen message back that many seconds (the recognizer's latency
and the network's), in order, without holding up the audio; `speak_delay` is the time to
first byte of each speak flush and REST request.
"""

from __future__ import annotations

import asyncio
import functools
import json
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http import HTTPStatus
from types import TracebackType
from typing import Any, Self
from urllib.parse import parse_qs, urlsplit

from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response

from voicehub.core.jobs import TaskSet
from voicehub.voice.audio import lin2ulaw
from voicehub_dev.fakes.deepgram_listen import ListenParams, ListenState

Synthesizer = Callable[[str, int], bytes]  # (text, sample_rate) -> PCM16


@functools.lru_cache(maxsize=64)
def piper_speech(text: str, sample_rate: int) -> bytes:
    """Real speech for `text` (Piper), cached: tests speak the same lines again."""
    from voicehub.voice.providers.offline import synthesize

    return synthesize(text, voice="piper", sample_rate=sample_rate)


@dataclass
class ListenSession:
    """What one listen connection saw."""

    params: ListenParams
    audio_bytes: int = 0
    audio_messages: int = 0
    audio: bytearray | None = None  # what was received, when the fake keeps audio
    controls: list[str] = field(default_factory=list)  # KeepAlive, Finalize, CloseStream
    sent: list[dict[str, Any]] = field(default_factory=list)
    dropped: bool = False


@dataclass
class SpeakSession:
    """What one speak connection saw."""

    query: dict[str, list[str]]
    messages: list[dict[str, Any]] = field(default_factory=list)
    audio_bytes: int = 0
    closed: bool = False  # the connection ended


class FakeDeepgram:
    """The fake; an async context manager binding two free ports on 127.0.0.1."""

    def __init__(
        self,
        *,
        api_key: str = "dg-test-key",
        synthesize: Synthesizer = piper_speech,
        chunk_seconds: float = 0.1,
    ) -> None:
        self.api_key = api_key
        self.transcripts: deque[str] = deque()
        self.reject: deque[int] = deque()
        self.drop_listen_after: float | None = None
        self.idle_timeout = 10.0
        self.speak_pace = 0.0  # seconds per second of speech audio sent (1.0: real time)
        self.listen_delay = 0.0  # seconds each listen message is held back
        self.speak_delay = 0.0  # seconds to the first audio of a flush or REST request
        self.listens: list[ListenSession] = []
        self._open_listens: dict[int, tuple[ListenSession, ServerConnection]] = {}
        self.speaks: list[SpeakSession] = []
        self.rest_requests: list[dict[str, Any]] = []
        self._notifying = TaskSet("fake Deepgram: waiters' wake-ups")
        self.handshakes: list[tuple[str, int]] = []  # (path, status)
        self.extensions: list[str] = []  # each handshake's Sec-WebSocket-Extensions offer
        self.keep_audio = False  # record each listen socket's audio (tests; costs memory)
        # text each listen socket sends first, as it is (tests: types a parser must skip)
        self.listen_preamble: list[str] = []
        # known lines (`fake_deepgram_listen.line_keys`): heard by their audio, not in order
        self.lines: dict[bytes, str] | None = None
        self._synthesize = synthesize
        self._chunk_seconds = chunk_seconds
        self._ws: Server | None = None
        self._http: asyncio.Server | None = None
        self._changed = asyncio.Condition()

    @property
    def ws_url(self) -> str:
        assert self._ws is not None
        return f"ws://127.0.0.1:{self._ws.sockets[0].getsockname()[1]}"

    @property
    def url(self) -> str:
        """One base URL for REST and WebSockets (a self-hosted Deepgram's `base_url`)."""
        return self.rest_url

    @property
    def rest_url(self) -> str:
        assert self._http is not None
        return f"http://127.0.0.1:{self._http.sockets[0].getsockname()[1]}"

    async def __aenter__(self) -> Self:
        self._ws = await serve(self._on_socket, "127.0.0.1", 0, process_request=self._handshake)
        self._http = await asyncio.start_server(self._on_http, "127.0.0.1", 0)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        assert self._ws is not None and self._http is not None
        self._ws.close()
        await self._ws.wait_closed()
        self._http.close()
        await self._http.wait_closed()

    async def wait_for(self, predicate: Callable[[], bool], timeout: float = 20.0) -> None:
        """Wait until `predicate()` holds, re-checked after everything the fake receives."""

        async def until() -> None:
            async with self._changed:
                await self._changed.wait_for(predicate)

        await asyncio.wait_for(until(), timeout)

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    # -- WebSocket ------------------------------------------------------------------------

    def _handshake(self, connection: ServerConnection, request: Request) -> Response | None:
        path = urlsplit(request.path).path
        self.extensions.append(request.headers.get("Sec-WebSocket-Extensions", ""))
        status = HTTPStatus.OK
        if path not in ("/v1/listen", "/v1/speak"):
            status = HTTPStatus.NOT_FOUND
        elif request.headers.get("Authorization") != f"Token {self.api_key}":
            status = HTTPStatus.UNAUTHORIZED
        elif self.reject:
            status = HTTPStatus(self.reject.popleft())
        self.handshakes.append((path, int(status)))
        self._notifying.start(self._notify(), name="notify")  # for `wait_for`
        if status is HTTPStatus.OK:
            return None
        response = connection.respond(status, json.dumps(_error_body(status)) + "\n")
        response.headers["dg-error"] = _error_body(status)["err_msg"]
        return response

    async def _on_socket(self, connection: ServerConnection) -> None:
        assert connection.request is not None
        target = urlsplit(connection.request.path)
        query = parse_qs(target.query)
        if target.path == "/v1/listen":
            await self._listen(connection, query)
        else:
            await self._speak(connection, query)

    def drop_listens(self) -> int:
        """Abort every listen socket open now, with no close frame (a network drop, mid
        utterance when the caller is speaking); returns how many."""
        for session, connection in list(self._open_listens.values()):
            session.dropped = True
            connection.transport.abort()
        return len(self._open_listens)

    async def _listen(self, connection: ServerConnection, query: dict[str, list[str]]) -> None:
        session = ListenSession(ListenParams.from_query(query))
        if self.keep_audio:
            session.audio = bytearray()
        self.listens.append(session)
        self._open_listens[id(session)] = (session, connection)
        await self._notify()
        state = ListenState(session.params, self.transcripts, self.lines)
        drop_after, self.drop_listen_after = self.drop_listen_after, None

        delay = self.listen_delay
        outbox: asyncio.Queue[tuple[float, dict[str, Any]]] = asyncio.Queue()
        loop = asyncio.get_running_loop()

        async def deliver() -> None:  # in order, each `delay` after it was produced
            while True:
                due, message = await outbox.get()
                if (wait := due - loop.time()) > 0:
                    await asyncio.sleep(wait)
                session.sent.append(message)
                await connection.send(json.dumps(message))

        delivering = asyncio.create_task(deliver()) if delay > 0 else None
        for text in self.listen_preamble:
            await connection.send(text)

        async def send(messages: list[dict[str, Any]]) -> None:
            for message in messages:
                if delivering is not None:
                    outbox.put_nowait((loop.time() + delay, message))
                    continue
                session.sent.append(message)
                await connection.send(json.dumps(message))

        try:
            while True:
                try:
                    frame = await asyncio.wait_for(connection.recv(), self.idle_timeout)
                except TimeoutError:
                    await connection.close(1011, "NET-0001: no audio received")
                    return
                if isinstance(frame, bytes):
                    session.audio_bytes += len(frame)
                    session.audio_messages += 1
                    if session.audio is not None:
                        session.audio += frame
                    await send(state.feed(frame))
                    if drop_after is not None and state.audio_time >= drop_after:
                        session.dropped = True
                        connection.transport.abort()  # no close frame: a network drop
                        return
                else:
                    kind = json.loads(frame).get("type")
                    session.controls.append(kind)
                    if kind == "Finalize":
                        await send(state.finalize())
                    elif kind == "CloseStream":
                        await send(state.close())
                        await connection.close()
                        return
                await self._notify()
        except ConnectionClosed:
            pass
        finally:
            self._open_listens.pop(id(session), None)
            if delivering is not None:
                delivering.cancel()
            await self._notify()

    async def _speak(self, connection: ServerConnection, query: dict[str, list[str]]) -> None:
        session = SpeakSession(query)
        self.speaks.append(session)
        await self._notify()
        rate = int(query.get("sample_rate", ["24000"])[0])
        encoding = query.get("encoding", ["linear16"])[0]
        text: list[str] = []
        sequence = 0
        await connection.send(
            json.dumps(
                {
                    "type": "Metadata",
                    "request_id": "fake-speak",
                    "model_name": query.get("model", ["aura-2-thalia-en"])[0],
                    "model_version": "2025-01-01.0",
                    "model_uuid": "00000000-fake-0000-0000-000000000000",
                }
            )
        )
        width = 2 if encoding == "linear16" else 1
        step = max(1, int(rate * self._chunk_seconds) * width)
        streaming: list[asyncio.Task[None]] = []  # one per Flush, in order

        async def stream_audio(
            words: str, sequence: int, before: asyncio.Task[None] | None
        ) -> None:
            if before is not None:
                await asyncio.wait({before})
            await asyncio.sleep(self.speak_delay)
            audio = await self._audio(words, rate, encoding) if words else b""
            for start in range(0, len(audio), step):
                await connection.send(audio[start : start + step])
                session.audio_bytes += len(audio[start : start + step])
                await asyncio.sleep(self.speak_pace * self._chunk_seconds)
            await connection.send(json.dumps({"type": "Flushed", "sequence_id": sequence}))

        try:
            async for frame in connection:
                message = json.loads(frame)
                session.messages.append(message)
                kind = message.get("type")
                if kind == "Speak":
                    text.append(str(message.get("text", "")))
                elif kind == "Flush":
                    words, text = " ".join(text).strip(), []
                    before = streaming[-1] if streaming else None
                    streaming.append(asyncio.create_task(stream_audio(words, sequence, before)))
                    sequence += 1
                elif kind == "Clear":  # drop the text and the audio not yet sent
                    text = []
                    for task in streaming:
                        task.cancel()
                    streaming.clear()
                    await connection.send(json.dumps({"type": "Cleared", "sequence_id": sequence}))
                    sequence += 1
                elif kind == "Close":
                    await asyncio.gather(*streaming, return_exceptions=True)
                    await connection.close()
                    break
                await self._notify()
        except ConnectionClosed:
            pass
        finally:
            for task in streaming:
                task.cancel()
            session.closed = True
            await self._notify()

    async def _audio(self, text: str, rate: int, encoding: str) -> bytes:
        pcm = await asyncio.to_thread(self._synthesize, text, rate)
        return lin2ulaw(pcm) if encoding == "mulaw" else pcm

    # -- REST -----------------------------------------------------------------------------

    async def _on_http(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except asyncio.IncompleteReadError:
                    return
                line, *lines = head.decode("latin-1").rstrip("\r\n").split("\r\n")
                method, target, _ = line.split(" ", 2)
                headers = {}
                for header in lines:
                    name, _, value = header.partition(":")
                    headers[name.strip().lower()] = value.strip()
                if headers.get("upgrade", "").lower() == "websocket":
                    await self._pipe(reader, writer, head)  # one base URL serves both
                    return
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                status, content_type, payload = await self._rest(method, target, headers, body)
                writer.write(
                    (
                        f"HTTP/1.1 {status} {HTTPStatus(status).phrase}\r\n"
                        f"content-type: {content_type}\r\ncontent-length: {len(payload)}\r\n"
                        "dg-request-id: fake-rest\r\n\r\n"
                    ).encode()
                    + payload
                )
                await writer.drain()
                await self._notify()
        except ConnectionError:
            pass
        finally:
            writer.close()

    async def _pipe(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, head: bytes
    ) -> None:
        port = int(self.ws_url.rsplit(":", 1)[1])
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", port)
        up_writer.write(head)

        async def pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            try:
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
                dst.close()  # a clean end stays clean
            except ConnectionError:
                dst.transport.abort()  # an aborted socket stays aborted

        await asyncio.gather(pump(reader, up_writer), pump(up_reader, writer))

    async def _rest(
        self, method: str, target: str, headers: dict[str, str], body: bytes
    ) -> tuple[int, str, bytes]:
        url = urlsplit(target)
        query = parse_qs(url.query)
        record: dict[str, Any] = {"method": method, "path": url.path, "query": query}
        self.rest_requests.append(record)
        status = HTTPStatus.OK
        known = (method, url.path) in (("POST", "/v1/speak"), ("GET", "/v1/projects"))
        if not known:
            status = HTTPStatus.NOT_FOUND
        elif headers.get("authorization") != f"Token {self.api_key}":
            status = HTTPStatus.UNAUTHORIZED
        elif self.reject:
            status = HTTPStatus(self.reject.popleft())
        record["status"] = int(status)
        if status is not HTTPStatus.OK:
            return int(status), "application/json", json.dumps(_error_body(status)).encode()
        if url.path == "/v1/projects":  # what key checks call: the key's projects
            projects = {"projects": [{"project_id": "fake-project", "name": "Fake"}]}
            return 200, "application/json", json.dumps(projects).encode()
        text = str(json.loads(body).get("text", ""))
        record["text"] = text
        rate = int(float(query.get("sample_rate", ["24000"])[0]))
        await asyncio.sleep(self.speak_delay)
        audio = await self._audio(text, rate, query.get("encoding", ["linear16"])[0])
        return 200, "audio/l16", audio


def _error_body(status: HTTPStatus) -> dict[str, str]:
    codes = {401: "INVALID_AUTH", 429: "TOO_MANY_REQUESTS", 404: "NOT_FOUND"}
    messages = {401: "Invalid credentials.", 429: "Too many requests. Please try again later."}
    return {
        "err_code": codes.get(status, "INTERNAL_SERVER_ERROR"),
        "err_msg": messages.get(status, status.phrase),
        "request_id": "fake-error",
    }
