"""The realtime `VoiceSession`: a lean relay to a speech-to-speech model (OpenAI Realtime).

Caller audio goes to `input_audio_buffer.append` (resampled to 24 kHz); the model's audio
goes to the transport with speech marks (`realtime.playout`). The model's server or
semantic VAD drives turns. Its events drive `VoiceActivity`:

- ``input_audio_buffer.speech_started`` -> user speaking (and a barge-in, see `_cut`);
  ``speech_stopped`` -> awaiting an answer, until a response starts or `answer_timeout`.
- ``response.created`` -> thinking; first audio of an item -> speaking that item; its last
  audio -> generated (a final mark); the mark's confirmation -> played.
- a `say` / `generate_reply` / `inject` sent but not yet created -> reply queued.
- tool calls keep the agent thinking until their outputs are in and the next response runs.

Tools run here, in tasks (the event reader never waits on a tool): started on
``response.function_call_arguments.done``, answered with ``function_call_output`` items and
a ``response.create`` once the response that called them is done.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal

from voicehub.agents.tools import Tool, ToolContext
from voicehub.core.events import ChannelType, Event, EventKind
from voicehub.delivery.injector import InjectOutcome
from voicehub.errors import ConfigError, VoicehubError
from voicehub.voice.activity import VoiceActivity
from voicehub.voice.events import (
    AgentState,
    ProviderError,
    ServerEvent,
    ToolCall,
    Transcript,
    UserState,
)
from voicehub.voice.realtime.config import (
    MODEL_RATE,
    RealtimeSettings,
    agent_voice,
    session_config,
)
from voicehub.voice.realtime.connection import ModelConnection
from voicehub.voice.realtime.playout import Playout, Speech
from voicehub.voice.realtime.resample import PcmResampler
from voicehub.voice.realtime.responses import ModelResponse, SpeakRequest
from voicehub.voice.realtime.tools import run_tool_call

if TYPE_CHECKING:
    from voicehub.agents.agent import Agent
    from voicehub.voice.session import CallRuntime
    from voicehub.voice.transport import CallTransport

__all__ = ["RealtimeVoiceSession"]

log = logging.getLogger("voicehub.voice.realtime")

DeliveryMode = Literal["say", "generate"]
SAY_INSTRUCTIONS = "Say exactly the following, word for word, and nothing else: {text}"
RESULT_INSTRUCTIONS = "Tell the caller this result now, briefly and naturally."
_HARMLESS_ERRORS = {"response_cancel_not_active"}


class RealtimeVoiceSession:
    """A `VoiceSession` (and delivery `Injector`) relaying a call to a Realtime model.

    `client` is an `openai.AsyncOpenAI` (see `realtime.connection.realtime_client`).
    `delivery_mode` picks how `inject` speaks a result: verbatim ("say", a response told to
    repeat it) or through the model ("generate": the result as a `settings.injection_role`
    item, then a response). `mark_every_ms` is the playout granularity a barge-in truncates at.
    """

    def __init__(
        self,
        hub: CallRuntime,
        room_id: str,
        agent: Agent,
        transport: CallTransport,
        *,
        client: Any,
        settings: RealtimeSettings | None = None,
        greeting: str | None = None,
        delivery_mode: DeliveryMode = "say",
        extra_tools: Sequence[Tool] = (),
        answer_timeout: float = 4.0,
        mark_every_ms: float = 200.0,
        attach_delivery: bool = True,
        activity: VoiceActivity | None = None,
    ) -> None:
        if delivery_mode not in ("say", "generate"):
            raise ConfigError(f"delivery_mode {delivery_mode!r}: expected 'say' or 'generate'")
        self.hub, self.room_id, self.transport = hub, room_id, transport
        self.settings = settings or RealtimeSettings()
        self.activity = activity if activity is not None else VoiceActivity(hub.clock)
        self.greeting, self.delivery_mode = greeting, delivery_mode
        self.agent, self._extra_tools = agent, tuple(extra_tools)
        self.voice = agent_voice(agent, self.settings)
        self.answer_timeout = answer_timeout
        self._client, self._attach_delivery = client, attach_delivery
        self._connection: ModelConnection | None = None
        self._up = PcmResampler(transport.sample_rate, MODEL_RATE)
        self._down = PcmResampler(MODEL_RATE, transport.sample_rate)
        self._playout = Playout(mark_every_ms)
        self._responses: dict[str, ModelResponse] = {}
        self._active: ModelResponse | None = None  # created, not yet done
        self._model_free = asyncio.Event()
        self._model_free.set()
        self._requests: dict[str, SpeakRequest] = {}
        self._updates: dict[str, asyncio.Future[None]] = {}
        self._ids = itertools.count(1)
        self._spoken = self._started = self._closed = False
        self._tasks: set[asyncio.Task[Any]] = set()
        self._tool_rounds: set[str] = set()  # event ids of response.create after tools
        self._outbox: asyncio.Queue[Callable[[], Awaitable[Any]]] = asyncio.Queue()
        self._reader: asyncio.Task[None] | None = None
        self._answer_timer: asyncio.Task[None] | None = None
        self.closed = asyncio.Event()  # set once the call's processing ended
        self._handlers: dict[str, Callable[[dict[str, Any]], Awaitable[None]]] = {
            "session.updated": self._on_session_updated,
            "error": self._on_error,
            "input_audio_buffer.speech_started": self._on_speech_started,
            "input_audio_buffer.speech_stopped": self._on_speech_stopped,
            "conversation.item.input_audio_transcription.completed": self._on_user_transcript,
            "response.created": self._on_response_created,
            "response.output_audio.delta": self._on_audio_delta,
            "response.output_audio.done": self._on_audio_done,
            "response.output_audio_transcript.done": self._on_agent_transcript,
            "response.function_call_arguments.done": self._on_function_call,
            "response.done": self._on_response_done,
        }

    # -- lifecycle ------------------------------------------------------------------------

    async def start(self, *, timeout: float = 15.0) -> None:
        """Connect, configure the session, attach delivery, and speak the greeting if any."""
        if self._started or self._closed:
            return
        self._connection = await asyncio.wait_for(
            ModelConnection.open(self._client, self.settings.model), timeout
        )
        self._reader = asyncio.create_task(self._read(self._connection))
        self._spawn(self._send_outbox())
        config = session_config(
            self.settings, self.agent, self._tools(), full=True, voice=self.voice
        )
        await asyncio.wait_for(self._update_session(config), timeout)
        self._started = True
        self.activity.session_attached()
        if self.greeting:
            self._spawn(self.say(self.greeting))
        if self._attach_delivery:
            await self.hub.delivery.attach(self.room_id, self, self.activity)

    async def aclose(self) -> None:
        """End the call's processing; idempotent. The room stays (held results wait)."""
        if self._closed:
            return
        self._closed = True
        self.closed.set()
        if self._attach_delivery and self._started:
            await self.hub.delivery.detach(self.room_id)
        for request in self._requests.values():
            request.abandon()
        for future in self._updates.values():
            if not future.done():
                future.set_exception(VoicehubError("the call ended"))
        self._model_free.set()
        self.activity.session_detached()
        with contextlib.suppress(TimeoutError):  # the last transcripts reach the room
            await asyncio.wait_for(self._outbox.join(), timeout=2.0)
        tasks = [t for t in (self._reader, self._answer_timer, *self._tasks) if t is not None]
        current = asyncio.current_task()
        for task in tasks:
            if task is not current:
                task.cancel()
        if self._connection is not None:
            with contextlib.suppress(Exception):
                await self._connection.aclose()

    # -- audio ------------------------------------------------------------------------------

    async def push_audio(self, pcm16: bytes) -> None:
        """Caller audio at the transport rate: resampled and appended to the model's buffer."""
        connection = self._connection
        if self._closed or connection is None:
            return
        audio = self._up.push(pcm16)
        if audio:
            await connection.append_audio(audio)

    def playout_confirmed(self, speech_id: str) -> None:
        """The transport played everything up to mark `speech_id`."""
        for speech in self._playout.confirm(speech_id):
            self.activity.playout_confirmed(speech.item_id)
            self._settled(speech)

    # -- speaking ---------------------------------------------------------------------------

    async def push_text(self, text: str) -> None:
        """A caller turn typed, not said (phone keypad digits): added to the conversation as
        the caller's message and answered in the background, like a spoken turn."""
        self._post(EventKind.TRANSCRIPT, text, role="user", typed=True)
        item = {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": text}],
        }
        self._spawn(self._speak({}, before=[item]))

    async def say(self, text: str, *, allow_interrupt: bool = True) -> InjectOutcome:
        """Speak `text` verbatim (a response told to repeat it, without tools)."""
        instructions = SAY_INSTRUCTIONS.format(text=text)
        return await self._speak({"instructions": instructions, "tool_choice": "none"})

    async def generate_reply(self, instructions: str) -> InjectOutcome:
        """Have the model answer `instructions` aloud; returns once played out."""
        return await self._speak({"instructions": instructions})

    async def inject(
        self, text: str, *, allow_interrupt: bool, metadata: dict[str, Any]
    ) -> InjectOutcome:
        """The delivery `Injector`: cut the model first if `allow_interrupt` (Immediate),
        then speak the result once no response is running."""
        if allow_interrupt:
            await self.interrupt()
        if self.delivery_mode == "say":
            return await self.say(text)
        item = {
            "type": "message",
            "role": self.settings.injection_role,
            "content": [{"type": "input_text", "text": f"Background result: {text}"}],
        }
        return await self._speak({"instructions": RESULT_INSTRUCTIONS}, before=[item])

    async def interrupt(self) -> None:
        """Stop the model: cancel its response and cut the audio not yet played."""
        self._running()
        await self._cut()

    async def update_agent(self, agent: Agent, *, extra_tools: list[Tool] | None = None) -> None:
        """Hand the call to `agent` with `session.update` on the same connection:
        instructions, tools, and its voice while the model has not spoken yet (the API
        refuses a new voice after the first audio). Safe to call from a running tool."""
        self._running()
        tools = tuple(extra_tools) if extra_tools is not None else self._extra_tools
        voice: str | None = agent_voice(agent, self.settings)
        if voice == self.voice:
            voice = None
        elif self._spoken:
            log.warning("room %s: keeping voice %s for %s", self.room_id, self.voice, agent.id)
            voice = None
        previous = (self.agent, self._extra_tools)
        self.agent, self._extra_tools = agent, tools
        try:
            config = session_config(self.settings, agent, self._tools(), full=False, voice=voice)
            await self._update_session(config)
        except BaseException:
            self.agent, self._extra_tools = previous
            raise
        if voice is not None:
            self.voice = voice

    # -- server events ------------------------------------------------------------------

    async def _read(self, connection: ModelConnection) -> None:
        reason = "the model closed the connection"
        try:
            async for event in connection.events():
                handler = self._handlers.get(event["type"])
                if handler is None:
                    continue
                try:
                    await handler(event)
                except (KeyError, TypeError, ValueError, AttributeError) as exc:
                    log.warning(
                        "room %s: dropped malformed %s: %r", self.room_id, event["type"], exc
                    )
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            reason = f"the model connection dropped: {exc!r}"
        if not self._closed:
            log.error("room %s: %s; ending the call", self.room_id, reason)
            await self._report("model_disconnected", reason)
            self._spawn(self.aclose())

    async def _on_session_updated(self, event: dict[str, Any]) -> None:
        # session.updated does not echo the event id: updates are answered in order
        for event_id, future in list(self._updates.items()):
            del self._updates[event_id]
            if not future.done():
                future.set_result(None)
                return

    async def _on_error(self, event: dict[str, Any]) -> None:
        error = event.get("error") or {}
        code, message = error.get("code"), error.get("message", "")
        failed = error.get("event_id")
        if failed in self._updates:
            self._updates.pop(failed).set_exception(
                VoicehubError(f"the model refused the session update: {message}")
            )
        if failed in self._requests:
            self._requests.pop(failed).abandon()
            self.activity.reply_dequeued()
        if failed in self._requests or failed in self._tool_rounds:
            self._tool_rounds.discard(failed)
            if self._active is None:  # refused: nothing runs, the next speaker may go
                self._model_free.set()
                self.activity.agent_thinking_finished()
        if code in _HARMLESS_ERRORS:
            log.debug("room %s: model: %s", self.room_id, message)
            return
        log.warning("room %s: model error %s: %s", self.room_id, code, message)
        await self._report(str(code or error.get("type") or "error"), str(message))

    async def _on_speech_started(self, event: dict[str, Any]) -> None:
        self.activity.user_speech_started()
        self._send_client(UserState(state="speaking"))
        await self._cut()

    async def _on_speech_stopped(self, event: dict[str, Any]) -> None:
        self._await_answer()
        self.activity.user_speech_stopped()
        self._send_client(UserState(state="listening"))

    async def _on_user_transcript(self, event: dict[str, Any]) -> None:
        text = str(event["transcript"]).strip()
        if text:
            self._post(EventKind.TRANSCRIPT, text, role="user", source="caller")
            self._send_client(Transcript(role="user", text=text, final=True))

    async def _on_response_created(self, event: dict[str, Any]) -> None:
        data = event["response"]
        response = ModelResponse(id=str(data["id"]))
        token = (data.get("metadata") or {}).get("voicehub")
        self.activity.agent_thinking_started()  # busy before "awaiting" / "queued" clear
        self._answered()
        if token in self._requests:
            request = self._requests.pop(token)
            request.response, response.token = response, token
            self._requests[response.id] = request
            self.activity.reply_dequeued()
        self._responses[response.id] = self._active = response
        self._model_free.clear()
        self._send_client(AgentState(state="thinking"))

    async def _on_audio_delta(self, event: dict[str, Any]) -> None:
        response = self._responses.get(str(event["response_id"]))
        model_audio = base64.b64decode(event["delta"], validate=True)
        if response is None or not model_audio:
            return
        ms = len(model_audio) / 2 / MODEL_RATE * 1000
        speech, new, mark = self._playout.audio(str(event["item_id"]), response.id, ms)
        if speech.cut:
            return  # cancelled: its late audio must not play
        if new:
            response.speeches.append(speech)
            self._spoken = True
            self.activity.agent_speech_started(speech.item_id)  # first: never idle between
            self.activity.agent_thinking_finished()
            self._send_client(AgentState(state="speaking"))
        pcm = self._down.push(model_audio)
        if pcm:
            await self.transport.send_audio(pcm)
        if mark is not None:
            await self.transport.mark(mark)

    async def _on_audio_done(self, event: dict[str, Any]) -> None:
        item_id = str(event["item_id"])
        mark = self._playout.finish(item_id)
        if mark is not None:
            self.activity.agent_speech_finished(item_id, interrupted=False)
            await self.transport.mark(mark)

    async def _on_agent_transcript(self, event: dict[str, Any]) -> None:
        speech = self._playout.speeches.get(str(event["item_id"]))
        if speech is not None:
            speech.transcript = str(event["transcript"])
            self._post_spoken(speech)

    async def _on_function_call(self, event: dict[str, Any]) -> None:
        response = self._responses.get(str(event["response_id"]))
        if response is None:
            return
        name, call_id = str(event["name"]), str(event["call_id"])
        tool = next((t for t in self._tools() if t.name == name), None)
        self.activity.agent_thinking_started()  # busy while the tool runs, even after audio
        context = ToolContext(hub=self.hub, room_id=self.room_id, agent_id=self.agent.id)
        call = run_tool_call(tool, name, call_id, str(event.get("arguments") or "{}"), context)
        task = asyncio.create_task(self._recorded(call, name, call_id, event.get("arguments")))
        response.tool_calls.append(task)

    async def _on_response_done(self, event: dict[str, Any]) -> None:
        data = event["response"]
        response = self._responses.pop(str(data["id"]), None)
        if response is None:
            return
        response.status = str(data.get("status") or "completed")
        for speech in response.speeches:  # a cut-off response may skip output_audio.done
            await self._on_audio_done({"item_id": speech.item_id})
        if self._active is response:
            self._active = None
        if response.tool_calls:
            self._spawn(self._answer_tools(response))  # still thinking until answered
        else:
            self._model_free.set()
            self.activity.agent_thinking_finished()
            self._send_client(AgentState(state="listening"))
        request = self._requests.get(response.id)
        if request is not None:
            request.settle()
            if request.future.done():
                self._requests.pop(response.id, None)

    # -- internals ------------------------------------------------------------------------

    async def _answer_tools(self, response: ModelResponse) -> None:
        outputs = await asyncio.gather(*response.tool_calls)
        connection = self._connection
        if self._closed or connection is None:
            return
        for output in outputs:
            await connection.send({"type": "conversation.item.create", "item": output})
        if response.status == "completed" and not self.activity.snapshot().user_speaking:
            event_id = f"voicehub_tools_{next(self._ids)}"
            self._tool_rounds.add(event_id)
            await connection.send({"type": "response.create", "event_id": event_id})
        else:  # the caller's turn will get the next response, which sees the outputs
            self._model_free.set()
            self.activity.agent_thinking_finished()

    async def _recorded(
        self, call: Awaitable[dict[str, str]], name: str, call_id: str, arguments: Any
    ) -> dict[str, str]:
        meta = {"tool": name, "call_id": call_id}
        self._post(EventKind.TOOL_CALL, str(arguments or "{}"), **meta)
        self._send_client(ToolCall(name=name, arguments=_as_text(arguments), call_id=call_id))
        output = await call
        self._post(EventKind.TOOL_RESULT, output["output"], **meta)
        return output

    async def _speak(
        self, response: dict[str, Any], *, before: Sequence[dict[str, Any]] = ()
    ) -> InjectOutcome:
        connection = self._running()
        while not self._model_free.is_set():  # never while the model responds
            await self._model_free.wait()
        if self._closed:
            return InjectOutcome.INTERRUPTED
        token = f"voicehub_{next(self._ids)}"
        request = SpeakRequest(token, asyncio.get_running_loop().create_future())
        self._requests[token] = request
        self._model_free.clear()  # ours from now: another request waits for its end
        self.activity.reply_queued()
        for item in before:
            await connection.send({"type": "conversation.item.create", "item": item})
        body = {**response, "metadata": {"voicehub": token}}
        await connection.send({"type": "response.create", "event_id": token, "response": body})
        return await request.future

    async def _cut(self) -> None:
        """Barge-in or interrupt: clear the transport, cancel the response, truncate each
        cut item at the audio the caller heard."""
        cut = self._playout.cut()
        if cut:
            await self.transport.clear()
        connection = self._connection
        active = self._active
        if connection is not None and active is not None:
            # by id: caller audio queued before this may already have started the next one
            await connection.send({"type": "response.cancel", "response_id": active.id})
        for speech in cut:
            self.activity.agent_speech_finished(speech.item_id, interrupted=True)
            if connection is not None and speech.heard_ms < speech.sent_ms:
                await connection.send(
                    {
                        "type": "conversation.item.truncate",
                        "item_id": speech.item_id,
                        "content_index": 0,
                        "audio_end_ms": int(speech.heard_ms),
                    }
                )
            self._settled(speech)

    def _settled(self, speech: Speech) -> None:
        self._post_spoken(speech)
        request = self._requests.get(speech.response_id)
        if request is not None:
            request.settle()
            if request.future.done():
                self._requests.pop(speech.response_id, None)
        if speech.posted:
            self._playout.forget(speech)

    def _post_spoken(self, speech: Speech) -> None:
        if speech.posted or speech.transcript is None or not speech.settled:
            return
        speech.posted = True
        text, item_id = speech.transcript, speech.item_id
        self._post(EventKind.TRANSCRIPT, text, item_id=item_id, interrupted=speech.cut)
        self._send_client(Transcript(role="assistant", text=speech.transcript, final=True))

    async def _update_session(self, session: dict[str, Any]) -> None:
        if self._connection is None:
            raise VoicehubError(f"room {self.room_id!r}: no model connection")
        event_id = f"voicehub_update_{next(self._ids)}"
        future = self._updates[event_id] = asyncio.get_running_loop().create_future()
        await self._connection.send(
            {"type": "session.update", "event_id": event_id, "session": session}
        )
        await future

    def _tools(self) -> tuple[Tool, ...]:
        return (*self.agent.tools, *self._extra_tools)

    def _await_answer(self) -> None:
        self.activity.user_turn_awaiting_answer(True)
        if self._answer_timer is not None:
            self._answer_timer.cancel()
        self._answer_timer = asyncio.create_task(self._answer_deadline())

    async def _answer_deadline(self) -> None:
        await self.hub.clock.sleep(self.answer_timeout)  # the model may ignore a turn
        self.activity.user_turn_awaiting_answer(False)

    def _answered(self) -> None:
        if self._answer_timer is not None:
            self._answer_timer.cancel()
            self._answer_timer = None
        self.activity.user_turn_awaiting_answer(False)

    def _running(self) -> ModelConnection:
        if not self._started or self._closed or self._connection is None:
            raise VoicehubError(
                f"the voice session of room {self.room_id!r} is not running; "
                "start() it first (results stay queued until a session is live)"
            )
        return self._connection

    async def _report(self, code: str, message: str) -> None:
        self._send_client(ProviderError(source="model_error", message=f"{code}: {message}"))
        self._post(EventKind.SYSTEM, f"model error {code}: {message}", role="system")

    def _post(self, kind: EventKind, text: str, *, role: str = "assistant", **meta: Any) -> None:
        source = meta.pop("source", None) or self.agent.id
        event = Event(
            kind=kind,
            text=text,
            role=role,
            source=source,
            source_type=ChannelType.VOICE,
            metadata=meta,
        )
        self._outbox.put_nowait(lambda: self.hub.post(self.room_id, event))

    def _send_client(self, event: ServerEvent) -> None:
        self._outbox.put_nowait(lambda: self.transport.send_event(event))

    async def _send_outbox(self) -> None:
        # one ordered worker: room posts and client events keep their order, and never
        # hold up the event reader
        while True:
            send = await self._outbox.get()
            try:
                await send()
            except Exception:
                log.exception("room %s: could not record a voice event", self.room_id)
            finally:
                self._outbox.task_done()

    def _spawn(self, work: Awaitable[Any]) -> None:
        async def run() -> None:
            try:
                await work
            except (asyncio.CancelledError, VoicehubError):
                pass
            except Exception:
                log.exception("room %s: a realtime session task failed", self.room_id)

        task = asyncio.create_task(run())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


def _as_text(arguments: Any) -> str:
    """Tool arguments as the JSON text the client shows."""
    return arguments if isinstance(arguments, str) else json.dumps(arguments)
