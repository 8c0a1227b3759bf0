"""What the model's events do to a realtime call (the `LinkListener` of its `ModelLink`).

- ``input_audio_buffer.speech_started`` -> user speaking (and a barge-in, see `cut`);
  ``speech_stopped`` -> awaiting an answer, until a response starts or `answer_timeout`.
- ``response.created`` -> thinking; first audio of an item -> speaking that item; its last
  audio -> generated (a final mark); the mark's confirmation -> played.
- a `say` / `generate_reply` / `inject` sent but not yet created -> reply queued.
- a delivery's first audio frame is the last check before it is heard: if the caller's
  per-frame speech evidence saw a speech-like frame within `VOICE_HOLD`, nothing of it goes
  out, the response is cancelled, its item truncated to nothing, and the delivery comes
  back DEFERRED (held for the next gap); once it plays, the caller's first speech-like
  frame cuts it at once (`caller_voiced`), ahead of the model's VAD: it comes back
  INTERRUPTED, offered again at the next gap. Other replies wait for the model's VAD (a
  backchannel should not cut the agent).
- tool calls keep the agent thinking until their outputs are in and the next response runs.
- a dropped connection: what was running is cut (a delivery in flight comes back
  interrupted, so the delivery service offers it again), the agent counts as thinking
  (nothing is injected into a dead link) until the restored session is configured.
"""

from __future__ import annotations

import asyncio
import binascii
from typing import TYPE_CHECKING, Any

from voicehub.core.events import EventKind
from voicehub.delivery.policy import VOICE_HOLD
from voicehub.errors import VoicehubError
from voicehub.voice.engine.latency import TurnLatency
from voicehub.voice.events import Transcript, UserState
from voicehub.voice.realtime.connection import ModelConnectionLost
from voicehub.voice.realtime.playout_marks import Playout, Speech
from voicehub.voice.realtime.responses import ModelResponse, SpeakRequest
from voicehub.voice.realtime.session_updates import SessionUpdates
from voicehub.voice.realtime.tool_runs import ToolRuns

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from voicehub.voice.realtime_session import RealtimeVoiceSession

__all__ = ["SAY_INSTRUCTIONS", "ModelEvents"]

SAY_INSTRUCTIONS = "Say exactly the following, word for word, and nothing else: {text}"
_HARMLESS_ERRORS = {"response_cancel_not_active"}


class ModelEvents:
    """The call's model-side state (responses, playout, requests) and its event handlers."""

    def __init__(
        self, session: RealtimeVoiceSession, mark_every_ms: float, answer_timeout: float
    ) -> None:
        self.session = session
        self.activity = session.activity
        self.recorder = session.recorder
        self.answer_timeout = answer_timeout
        self.playout = Playout(mark_every_ms)
        self.responses: dict[str, ModelResponse] = {}
        self.active: ModelResponse | None = None  # created, not yet done
        self.model_free = asyncio.Event()
        self.model_free.set()
        self.requests: dict[str, SpeakRequest] = {}
        self.updates = SessionUpdates()
        self.tool_runs = ToolRuns(session.hub, session.room_id, session.recorder)
        self.tool_rounds: set[str] = set()  # event ids of response.create after tools
        self.spoken = False
        self._speech_ended_at: float | None = None  # the caller's turn awaiting its answer
        self._turns = 0
        self.link_up = True  # false from a drop until the restored session is configured
        self._answer_timer: asyncio.Task[None] | None = None
        self.handlers: dict[str, Callable[[dict[str, Any]], Awaitable[None]]] = {
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

    # -- the link ---------------------------------------------------------------------------

    async def connection_lost(self, reason: str) -> None:
        self.recorder.report("model_disconnected", f"{reason}; reconnecting")
        self.link_up = False
        self.model_free.clear()
        self.activity.agent_thinking_started()  # busy: nothing goes into a dead link
        if self.activity.snapshot().user_speaking:
            self.activity.user_speech_stopped()
        self._answered()
        self.session.hearing_caller(False)
        self.session.reset_audio()
        self.updates.fail_all("the model connection dropped")
        await self.cut(send=False)
        for response in self.responses.values():
            if response.tool_calls:  # cut off before response.done: count its calls out
                self.session.spawn(self._answer_tools(response))
        for request in self.requests.values():
            if request.response is None:
                self.activity.reply_dequeued()
            request.abandon()
        self.requests.clear()
        self.responses.clear()
        self.tool_rounds.clear()
        self.active = None
        self.session.agent_state("thinking")

    async def connect_failed(self, attempt: int, reason: str) -> None:
        code = "model_rate_limited" if "429" in reason else "model_reconnect_failed"
        self.recorder.report(code, f"attempt {attempt}: {reason}")

    async def connection_restored(self, attempts: int) -> None:
        try:
            await self.session.restore(attempts)
        except VoicehubError as exc:
            if self.session.link.connection is None:
                return  # dropped again: the link reconnects and restores once more
            # the new connection refused our configuration: a call we cannot steer
            await self.gave_up(f"the restored session was refused: {exc}")
            return
        self.link_up = True
        if self.active is None and not self.tool_runs.running:
            self.model_free.set()
            self.activity.agent_thinking_finished()
            self.session.agent_state("listening")

    async def gave_up(self, reason: str) -> None:
        self.recorder.report("model_unreachable", f"{reason}; the call ends, results are held")
        self.session.spawn(self.session.aclose())

    def end(self) -> None:
        """The call ended: nothing waits for the model any more."""
        for request in self.requests.values():
            request.abandon()
        self.updates.fail_all("the call ended")
        self.model_free.set()
        if self._answer_timer is not None:
            self._answer_timer.cancel()

    # -- server events ------------------------------------------------------------------

    async def _on_session_updated(self, event: dict[str, Any]) -> None:
        self.updates.answered()

    async def _on_error(self, event: dict[str, Any]) -> None:
        error = event.get("error") or {}
        code, message = error.get("code"), str(error.get("message", ""))
        failed = error.get("event_id")
        if failed in self.updates:
            self.updates.refused(str(failed), message)
        refused = failed in self.requests or failed in self.tool_rounds
        if failed in self.requests:
            self.requests.pop(failed).abandon()
            self.activity.reply_dequeued()
        if refused:
            self.tool_rounds.discard(failed)
            if self.active is None:  # refused: nothing runs, the next speaker may go
                self.model_free.set()
                self.activity.agent_thinking_finished()
        if code in _HARMLESS_ERRORS:
            return
        self.recorder.report(str(code or error.get("type") or "error"), message)

    async def _on_speech_started(self, event: dict[str, Any]) -> None:
        self._speech_ended_at = None
        self.activity.user_speech_started()
        self.session.hearing_caller(True)
        self.recorder.send_client(UserState(state="speaking"))
        await self.cut()

    async def _on_speech_stopped(self, event: dict[str, Any]) -> None:
        self._speech_ended_at = self.session.hub.clock.now()
        self.session.hearing_caller(False)
        self._await_answer()
        self.activity.user_speech_stopped()
        self.recorder.send_client(UserState(state="listening"))

    async def _on_user_transcript(self, event: dict[str, Any]) -> None:
        text = str(event["transcript"]).strip()
        if text:
            self.recorder.post(EventKind.TRANSCRIPT, text, role="user", source="caller")
            self.recorder.send_client(Transcript(role="user", text=text, final=True))

    async def _on_response_created(self, event: dict[str, Any]) -> None:
        data = event["response"]
        response = ModelResponse(id=str(data["id"]))
        token = (data.get("metadata") or {}).get("voicehub")
        self.activity.agent_thinking_started()  # busy before "awaiting" / "queued" clear
        self._answered()
        if token in self.requests:
            request = self.requests.pop(token)
            request.response, response.token = response, token
            self.requests[response.id] = request
            self.activity.reply_dequeued()
        self.responses[response.id] = self.active = response
        self.model_free.clear()
        self.session.agent_state("thinking")

    async def _on_audio_delta(self, event: dict[str, Any]) -> None:
        response = self.responses.get(str(event["response_id"]))
        # base64 as str (JSON) or a memoryview (the fast path); binascii.Error is a ValueError
        model_audio = binascii.a2b_base64(event["delta"], strict_mode=True)
        if response is None or not model_audio:
            return
        ms = len(model_audio) / self.session.model_bytes_per_ms
        speech, new, mark = self.playout.audio(str(event["item_id"]), response.id, ms)
        if speech.cut:
            return  # cancelled: its late audio must not play
        transport = self.session.transport
        if new:
            response.speeches.append(speech)
            if self._caller_voiced_before(response):
                await self._withhold(response, speech)
                return
            self.spoken = True
            self._turn_answered()
            self.activity.agent_speech_started(speech.item_id)  # first: never idle between
            if not self.tool_runs.running:  # a tool asking aloud still counts as thinking
                self.activity.agent_thinking_finished()
            self.session.agent_state("speaking")
        await self.session.play(model_audio)
        if mark is not None:
            await transport.mark(mark)

    def _turn_answered(self) -> None:
        """The first audio after the caller's speech ended: the turn's voice-to-voice."""
        ended, observer = self._speech_ended_at, self.session.turn_observer
        if ended is None or observer is None:
            return
        self._speech_ended_at = None
        self._turns += 1
        now = self.session.hub.clock.now()
        observer.turn_measured(
            TurnLatency(self.session.room_id, self._turns, ended, voice_to_voice=now - ended)
        )

    async def _on_audio_done(self, event: dict[str, Any]) -> None:
        item_id = str(event["item_id"])
        mark = self.playout.finish(item_id)
        if mark is not None:
            self.activity.agent_speech_finished(item_id, interrupted=False)
            await self.session.transport.mark(mark)

    async def _on_agent_transcript(self, event: dict[str, Any]) -> None:
        speech = self.playout.speeches.get(str(event["item_id"]))
        if speech is not None:
            speech.transcript = str(event["transcript"])
            self._post_spoken(speech)

    async def _on_function_call(self, event: dict[str, Any]) -> None:
        response = self.responses.get(str(event["response_id"]))
        if response is None:
            return
        self.activity.agent_thinking_started()  # busy while the tool runs, even after audio
        self.tool_runs.start(response, self.session.tools(), self.session.agent.id, event)

    async def _on_response_done(self, event: dict[str, Any]) -> None:
        data = event["response"]
        response = self.responses.pop(str(data["id"]), None)
        if response is None:
            return
        response.status = str(data.get("status") or "completed")
        for speech in response.speeches:  # a cut-off response may skip output_audio.done
            await self._on_audio_done({"item_id": speech.item_id})
        if self.active is response:
            self.active = None
        if response.tool_calls:
            self.session.spawn(self._answer_tools(response))  # still thinking until answered
        elif not self.tool_runs.running:  # else a tool spoke: its call is not answered yet
            self._free()
        request = self.requests.get(response.id)
        if request is not None:
            request.settle()
            if request.future.done():
                self.requests.pop(response.id, None)

    # -- barge-in and playout ------------------------------------------------------------

    async def cut(self, *, send: bool = True) -> None:
        """Barge-in or interrupt: clear the transport, cancel the response, truncate each
        cut item at the audio the caller heard (without `send`: the connection is gone)."""
        cut = self.playout.cut()
        if cut:
            await self.session.transport.clear()
        active = self.active
        try:
            if send and active is not None:
                # by id: caller audio queued before this may already have started the next
                await self.session.send({"type": "response.cancel", "response_id": active.id})
            for speech in cut:
                if send and speech.heard_ms < speech.sent_ms:
                    await self.session.send(
                        {
                            "type": "conversation.item.truncate",
                            "item_id": speech.item_id,
                            "content_index": 0,
                            "audio_end_ms": int(speech.heard_ms),
                        }
                    )
        except ModelConnectionLost:
            pass  # the new session starts from the recap
        for speech in cut:
            self.activity.agent_speech_finished(speech.item_id, interrupted=True)
            self._settled(speech)

    async def caller_voiced(self) -> None:
        """A speech-like caller frame: a delivery still playing yields to it now."""
        if any(self._playing_delivery(request) for request in self.requests.values()):
            await self.cut()

    @staticmethod
    def _playing_delivery(request: SpeakRequest) -> bool:
        response = request.response
        return (
            request.gated
            and response is not None
            and any(not speech.settled for speech in response.speeches)
        )

    def _caller_voiced_before(self, response: ModelResponse) -> bool:
        request = self.requests.get(response.id)
        return request is not None and request.gated and self.activity.voiced_within(VOICE_HOLD)

    async def _withhold(self, response: ModelResponse, speech: Speech) -> None:
        """A delivery's first frame, with the caller's voice just heard: not a frame goes
        out; the model forgets the item (truncated to nothing) and the delivery is held."""
        request = self.requests[response.id]
        request.held = True
        self.playout.withhold(speech)
        try:
            await self.session.send({"type": "response.cancel", "response_id": response.id})
            truncate = {"item_id": speech.item_id, "content_index": 0, "audio_end_ms": 0}
            await self.session.send({"type": "conversation.item.truncate", **truncate})
        except ModelConnectionLost:
            pass  # the new session starts from the recap
        self._settled(speech)

    def playout_confirmed(self, speech_id: str) -> None:
        for speech in self.playout.confirm(speech_id):
            self.activity.playout_confirmed(speech.item_id)
            self._settled(speech)

    # -- internals ------------------------------------------------------------------------

    async def _answer_tools(self, response: ModelResponse) -> None:
        generation = self.session.link.generation
        outputs = await self.tool_runs.outputs(response)
        if not self.session.running or self.session.link.generation != generation:
            # the connection that asked is gone (the recap holds the results)
            if self.link_up and not self.tool_runs.running and self.active is None:
                self._free()
            return
        try:
            for output in outputs:
                await self.session.send({"type": "conversation.item.create", "item": output})
            if response.status == "completed" and not self.activity.snapshot().user_speaking:
                event_id = f"voicehub_tools_{id(response)}"
                self.tool_rounds.add(event_id)
                await self.session.send({"type": "response.create", "event_id": event_id})
                return
        except ModelConnectionLost:
            return
        if not self.tool_runs.running:  # the caller's turn gets the next response
            self._free()

    def _free(self) -> None:
        self.model_free.set()
        self.activity.agent_thinking_finished()
        self.session.agent_state("listening")

    def _settled(self, speech: Speech) -> None:
        self._post_spoken(speech)
        request = self.requests.get(speech.response_id)
        if request is not None:
            request.settle()
            if request.future.done():
                self.requests.pop(speech.response_id, None)
        if speech.posted:
            self.playout.forget(speech)

    def _post_spoken(self, speech: Speech) -> None:
        if speech.posted or speech.transcript is None or not speech.settled or speech.withheld:
            return
        speech.posted = True
        text, item_id = speech.transcript, speech.item_id
        self.recorder.post(EventKind.TRANSCRIPT, text, item_id=item_id, interrupted=speech.cut)
        self.recorder.send_client(Transcript(role="assistant", text=text, final=True))

    def _await_answer(self) -> None:
        self.activity.user_turn_awaiting_answer(True)
        if self._answer_timer is not None:
            self._answer_timer.cancel()
        self._answer_timer = asyncio.create_task(self._answer_deadline())

    async def _answer_deadline(self) -> None:
        await self.session.hub.clock.sleep(self.answer_timeout)  # the model may ignore a turn
        self.activity.user_turn_awaiting_answer(False)

    def _answered(self) -> None:
        if self._answer_timer is not None:
            self._answer_timer.cancel()
            self._answer_timer = None
        self.activity.user_turn_awaiting_answer(False)
