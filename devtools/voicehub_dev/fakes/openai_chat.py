"""A protocol-faithful fake of the OpenAI Chat Completions endpoint on a real 127.0.0.1 socket.

It speaks HTTP/1.1 with keep-alive and answers `POST {base_url}/chat/completions` the way
PROTOCOLS.md section 3.1 describes: SSE `data: <json>` chunks without `event:` lines, tool-call
fragments where only the first carries id/type/name, a `choices: []` usage chunk when
`stream_options.include_usage` is set, then `data: [DONE]`. It checks `Authorization: Bearer`,
rejects the history mistakes OpenAI rejects with 400, and records every request.

A script drives it: a list of steps consumed one per accepted request, or a callable computing
the step from the request.

    async with FakeOpenAIServer([Reply(text=("Hel", "lo"))]) as server:
        client = AsyncOpenAI(api_key=server.api_key, base_url=server.base_url)
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from http import HTTPStatus
from types import TracebackType
from typing import Any, Self

CREATED = 1_700_000_000


@dataclass(frozen=True)
class FakeToolCall:
    """A tool call the fake model makes; each `arguments` fragment goes out in its own chunk."""

    name: str
    arguments: Sequence[str] = ("{}",)
    id: str | None = None


@dataclass(frozen=True)
class Reply:
    """A model turn: text deltas, then tool calls, then finish_reason (and usage, if asked)."""

    text: Sequence[str] = ()
    tool_calls: Sequence[FakeToolCall] = ()
    finish_reason: str | None = None
    prompt_tokens: int = 12
    completion_tokens: int = 7
    delay: float = 0.0
    """Seconds the model takes before its first byte (a slow model, for benchmarks)."""


@dataclass(frozen=True)
class HTTPError:
    """Answer with an HTTP error status and an OpenAI-shaped `{"error": {...}}` body."""

    status: int
    message: str
    type: str = "server_error"
    code: str | None = None
    param: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class StreamError:
    """Stream the first `after_chunks` chunks of `reply`, then a data chunk holding an `error`."""

    message: str
    reply: Reply = field(default_factory=lambda: Reply(text=("Let me ", "check")))
    after_chunks: int = 2
    type: str = "server_error"
    code: str | None = None


@dataclass(frozen=True)
class Disconnect:
    """Stream the first `after_chunks` chunks of `reply`, then stop.

    `abrupt` aborts the TCP connection mid-body; otherwise the body ends cleanly, but with no
    finish_reason and no `[DONE]` (what a cutting proxy produces).
    """

    reply: Reply = field(default_factory=lambda: Reply(text=("Let me ", "check")))
    after_chunks: int = 2
    abrupt: bool = True


@dataclass(frozen=True)
class RawStream:
    """Send these SSE `data:` payloads verbatim (to mimic quirky OpenAI-compatible servers)."""

    data: Sequence[str]


@dataclass(frozen=True)
class Stall:
    """Accept the request and never answer (to exercise client timeouts)."""


Step = Reply | HTTPError | StreamError | Disconnect | RawStream | Stall


@dataclass(frozen=True)
class RecordedRequest:
    """One request the fake received: lower-cased headers and the decoded JSON body."""

    method: str
    path: str
    headers: Mapping[str, str]
    body: Any

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The `messages` array of the body."""
        return list(self.body["messages"])


Script = Sequence[Step] | Callable[[RecordedRequest], Step]


class FakeOpenAIServer:
    """The fake server; an async context manager that binds 127.0.0.1 on a free port."""

    def __init__(self, script: Script = (), *, api_key: str | None = "sk-test-fake") -> None:
        """`api_key=None` accepts any or no key, like a local vLLM/llama.cpp/Ollama server."""
        self.api_key = api_key
        self.requests: list[RecordedRequest] = []
        self._script = script
        self._next_step = 0
        self._served = 0
        self._server: asyncio.Server | None = None
        self._connections: dict[asyncio.Task[None], asyncio.StreamWriter] = {}
        self._stopping = asyncio.Event()
        self.port = 0

    @property
    def base_url(self) -> str:
        """What to pass as the SDK's `base_url`."""
        return f"http://127.0.0.1:{self.port}/v1"

    async def start(self) -> None:
        """Listen on a free port; connections are accepted once this returns."""
        self._server = await asyncio.start_server(self._on_connection, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        """Stop listening and drop every open connection."""
        if self._server is None:
            return
        self._server.close()
        # End handlers by closing their sockets rather than cancelling them: asyncio logs
        # cancelled connection handlers as errors on Python 3.11.
        self._stopping.set()
        for writer in self._connections.values():
            writer.transport.abort()
        await asyncio.gather(*self._connections, return_exceptions=True)
        await self._server.wait_closed()
        self._server = None

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.stop()

    # -- HTTP ------------------------------------------------------------------------------

    async def _on_connection(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections[task] = writer
        try:
            while await self._serve_one(reader, writer):
                pass
        except (ConnectionError, asyncio.IncompleteReadError):
            pass  # the client went away; nothing to answer
        finally:
            del self._connections[task]
            writer.close()

    async def _serve_one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        """Answer one request; False when the connection must end."""
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError:
            return False  # keep-alive connection closed by the client
        request_line, *header_lines = head.decode("latin-1").rstrip("\r\n").split("\r\n")
        method, path, _version = request_line.split(" ", 2)
        headers: dict[str, str] = {}
        for line in header_lines:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        raw_body = await reader.readexactly(int(headers.get("content-length", "0")))
        try:
            body: Any = json.loads(raw_body) if raw_body else None
        except ValueError:
            body = raw_body.decode("utf-8", "replace")
        request = RecordedRequest(method=method, path=path, headers=headers, body=body)
        self.requests.append(request)
        return await self._answer(request, writer)

    async def _answer(self, request: RecordedRequest, writer: asyncio.StreamWriter) -> bool:
        if request.method != "POST" or not request.path.endswith("/chat/completions"):
            await _send_error(
                writer,
                HTTPError(
                    404,
                    f"Unknown request URL: {request.method} {request.path}.",
                    "invalid_request_error",
                    code="unknown_url",
                ),
            )
            return True
        rejection = self._check_auth(request.headers) or _validate(request.body)
        if rejection is not None:
            await _send_error(writer, rejection)
            return True
        step = self._take_step(request)
        if isinstance(step, HTTPError):
            await _send_error(writer, step)
            return True
        if isinstance(step, Stall):
            await self._stopping.wait()
            return False
        self._served += 1
        completion_id = f"chatcmpl-fake{self._served}"
        if isinstance(step, Reply) and step.delay > 0:
            await asyncio.sleep(step.delay)
        if not request.body.get("stream"):
            assert isinstance(step, Reply), "only Reply steps can answer non-stream requests"
            await _send_json(writer, 200, _completion_object(step, completion_id, request.body))
            return True
        include_usage = bool((request.body.get("stream_options") or {}).get("include_usage"))
        return await self._stream(writer, step, completion_id, request.body, include_usage)

    async def _stream(
        self,
        writer: asyncio.StreamWriter,
        step: Reply | StreamError | Disconnect | RawStream,
        completion_id: str,
        body: Mapping[str, Any],
        include_usage: bool,
    ) -> bool:
        writer.write(
            _head(
                200,
                {
                    "content-type": "text/event-stream; charset=utf-8",
                    "transfer-encoding": "chunked",
                    "cache-control": "no-cache",
                    "x-request-id": f"req_{completion_id}",
                },
            )
        )
        if isinstance(step, RawStream):
            for data in step.data:
                await _send_chunk(writer, f"data: {data}\n\n".encode())
            await _send_chunk(writer, b"")
            return True
        reply = step if isinstance(step, Reply) else step.reply
        chunks = _reply_chunks(reply, completion_id, str(body.get("model")), self._served)
        if include_usage:
            for chunk in chunks:
                chunk["usage"] = None  # OpenAI adds a null usage to every chunk but the last
            chunks.append(_usage_chunk(reply, completion_id, str(body.get("model"))))
        if isinstance(step, StreamError | Disconnect):
            chunks = chunks[: step.after_chunks]
        for chunk in chunks:
            await _send_chunk(writer, _sse(chunk))
        if isinstance(step, StreamError):
            error = {"message": step.message, "type": step.type, "param": None, "code": step.code}
            await _send_chunk(writer, _sse({"error": error}))
        elif isinstance(step, Disconnect) and step.abrupt:
            writer.transport.abort()
            return False
        elif isinstance(step, Reply):
            await _send_chunk(writer, b"data: [DONE]\n\n")
        await _send_chunk(writer, b"")
        return True

    def _check_auth(self, headers: Mapping[str, str]) -> HTTPError | None:
        if self.api_key is None:
            return None
        authorization = headers.get("authorization", "")
        if not authorization.startswith("Bearer ") or not authorization[7:]:
            return HTTPError(
                401,
                "You didn't provide an API key. You need to provide your API key in an "
                "Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).",
                "invalid_request_error",
            )
        key = authorization[7:]
        if key != self.api_key:
            return HTTPError(
                401,
                f"Incorrect API key provided: {key[:3]}*****{key[-4:]}. You can find your API "
                "key at https://platform.openai.com/account/api-keys.",
                "invalid_request_error",
                code="invalid_api_key",
            )
        return None

    def _take_step(self, request: RecordedRequest) -> Step:
        if callable(self._script):
            return self._script(request)
        if self._next_step >= len(self._script):
            return HTTPError(500, f"fake script exhausted after {self._next_step} replies")
        step = self._script[self._next_step]
        self._next_step += 1
        return step


def _validate(body: Any) -> HTTPError | None:
    """Reject what OpenAI rejects with 400, so history-mapping bugs fail loudly in tests."""
    if not isinstance(body, dict):
        return HTTPError(
            400, "We could not parse the JSON body of your request.", "invalid_request_error"
        )
    for required in ("model", "messages"):
        if required not in body:
            return HTTPError(
                400,
                f"Missing required parameter: '{required}'.",
                "invalid_request_error",
                "missing_required_parameter",
                required,
            )
    tools = body.get("tools")
    if "tool_choice" in body and not tools:
        return HTTPError(
            400,
            "Invalid value for 'tool_choice': 'tool_choice' is only allowed "
            "when 'tools' are specified.",
            "invalid_request_error",
            None,
            "tool_choice",
        )
    for index, tool in enumerate(tools or ()):
        if tool.get("type") != "function" or "name" not in (tool.get("function") or {}):
            return HTTPError(
                400,
                f"Missing required parameter: 'tools[{index}].function'.",
                "invalid_request_error",
                "missing_required_parameter",
                f"tools[{index}].function",
            )
    unanswered: list[str] = []
    for index, message in enumerate(body["messages"]):
        role = message.get("role")
        if role == "tool":
            if message.get("tool_call_id") not in unanswered:
                return HTTPError(
                    400,
                    "Invalid parameter: messages with role 'tool' must be a "
                    "response to a preceeding message with 'tool_calls'.",
                    "invalid_request_error",
                    None,
                    f"messages.[{index}].role",
                )
            unanswered.remove(message["tool_call_id"])
            continue
        if unanswered:
            return HTTPError(
                400,
                "An assistant message with 'tool_calls' must be followed by tool "
                "messages responding to each 'tool_call_id'. The following "
                f"tool_call_ids did not have response messages: "
                f"{', '.join(unanswered)}",
                "invalid_request_error",
                None,
                f"messages.[{index}].role",
            )
        if role == "assistant":
            unanswered = [call["id"] for call in message.get("tool_calls") or ()]
    return None


def _reply_chunks(
    reply: Reply, completion_id: str, model: str, served: int
) -> list[dict[str, Any]]:
    deltas: list[dict[str, Any]] = []
    if reply.text:
        deltas.append({"role": "assistant", "content": "", "refusal": None})
        deltas.extend({"content": piece} for piece in reply.text)
    for index, call in enumerate(reply.tool_calls):
        first = {
            "index": index,
            "id": call.id or f"call_{served}_{index}",
            "type": "function",
            "function": {"name": call.name, "arguments": ""},
        }
        if deltas:
            deltas.append({"tool_calls": [first]})
        else:  # the role rides on the first fragment when there is no text
            deltas.append({"role": "assistant", "content": None, "tool_calls": [first]})
        deltas.extend(
            {"tool_calls": [{"index": index, "function": {"arguments": fragment}}]}
            for fragment in call.arguments
        )
    finish = reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop")
    chunks = [_chunk(completion_id, model, delta, None) for delta in deltas]
    chunks.append(_chunk(completion_id, model, {}, finish))
    return chunks


def _chunk(
    completion_id: str, model: str, delta: dict[str, Any], finish: str | None
) -> dict[str, Any]:
    return {
        "id": completion_id,
        "object": "chat.completion.chunk",
        "created": CREATED,
        "model": model,
        "system_fingerprint": "fp_fake",
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
    }


def _usage(reply: Reply) -> dict[str, int]:
    return {
        "prompt_tokens": reply.prompt_tokens,
        "completion_tokens": reply.completion_tokens,
        "total_tokens": reply.prompt_tokens + reply.completion_tokens,
    }


def _usage_chunk(reply: Reply, completion_id: str, model: str) -> dict[str, Any]:
    return {
        "id": completion_id,
        "object": "chat.completion.chunk",
        "created": CREATED,
        "model": model,
        "system_fingerprint": "fp_fake",
        "choices": [],
        "usage": _usage(reply),
    }


def _completion_object(reply: Reply, completion_id: str, body: Mapping[str, Any]) -> dict[str, Any]:
    message: dict[str, Any] = {
        "role": "assistant",
        "content": "".join(reply.text) or None,
        "refusal": None,
    }
    if reply.tool_calls:
        message["tool_calls"] = [
            {
                "id": call.id or f"call_{index}",
                "type": "function",
                "function": {"name": call.name, "arguments": "".join(call.arguments)},
            }
            for index, call in enumerate(reply.tool_calls)
        ]
    finish = reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop")
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": CREATED,
        "model": str(body.get("model")),
        "system_fingerprint": "fp_fake",
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish}],
        "usage": _usage(reply),
    }


def _sse(payload: Mapping[str, Any]) -> bytes:
    return f"data: {json.dumps(payload, separators=(',', ':'))}\n\n".encode()


def _head(status: int, headers: Mapping[str, str]) -> bytes:
    lines = [f"HTTP/1.1 {status} {HTTPStatus(status).phrase}"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


async def _send_chunk(writer: asyncio.StreamWriter, data: bytes) -> None:
    """One HTTP/1.1 chunk; empty `data` writes the terminating zero-length chunk."""
    writer.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
    await writer.drain()


async def _send_json(
    writer: asyncio.StreamWriter,
    status: int,
    payload: Any,
    extra_headers: Mapping[str, str] | None = None,
) -> None:
    data = json.dumps(payload).encode()
    headers = {
        "content-type": "application/json",
        "content-length": str(len(data)),
        "x-request-id": "req_fake",
        **(extra_headers or {}),
    }
    writer.write(_head(status, headers) + data)
    await writer.drain()


async def _send_error(writer: asyncio.StreamWriter, error: HTTPError) -> None:
    payload = {
        "error": {
            "message": error.message,
            "type": error.type,
            "param": error.param,
            "code": error.code,
        }
    }
    await _send_json(writer, error.status, payload, error.headers)
