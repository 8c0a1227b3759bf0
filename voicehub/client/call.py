"""`voicehub call`: call a desk over the real WebSocket, as a browser would.

The client streams the caller's audio (synthesized words or a WAV file) in 20 ms frames at
real-time pace, and silence between utterances like an open microphone; it plays the
agent's audio on a virtual speaker and acks each speech mark once the audio before it has
"played" (its duration after arrival; `playout_speed` plays faster, `math.inf` acks at
once). It records every event and audio segment with its arrival time, waits until the
conversation has settled (agent idle, no running work, no pending delivery), and reports
a timeline.

    async with CallClient(CallOptions(desk="research")) as call:
        await call.wait_for_turn()
        await call.say(pcm16, "could you research heat pumps")
        await call.settle()
    print(format_timeline(call.report))
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import urllib.parse
import uuid
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar, assert_never

import numpy as np
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from voicehub.client.endings import CallClosed, CallRefused
from voicehub.client.reconnect import Backoff, Reconnection, Reconnector
from voicehub.client.report import AgentSegment, CallReport, ReceivedEvent, Utterance
from voicehub.core.jobs import TaskSet
from voicehub.errors import ProtocolError, VoicehubError
from voicehub.transports.call_events import (
    CallerText,
    ClientMessage,
    Hangup,
    KeypadPress,
    Playout,
    StatusRequest,
    parse_server_event,
)
from voicehub.voice.events import (
    FRAME_BYTES,
    FRAME_SECONDS,
    SAMPLE_RATE,
    AgentState,
    CallError,
    CallSession,
    CallStatus,
    CallTransferred,
    ClearAudio,
    DeliveryAttempt,
    DeliveryOutcome,
    ProviderError,
    ServerEvent,
    SpeechMark,
    TaskFinished,
    TaskStarted,
    ToolCall,
    Transcript,
    UserState,
)

if TYPE_CHECKING:
    from voicehub.client.webrtc import WebRTCLink

__all__ = ["CallClient", "CallOptions", "caller_audio", "place_call"]

log = logging.getLogger("voicehub.client")

E = TypeVar("E", bound=ServerEvent)
_SILENCE_FRAMES = 5  # an open microphone sends silence in 100 ms messages
_BURST_FRAMES = 50  # fast mode: one second per message, the server's maximum
_VOICED_RMS = 328.0  # -40 dBFS: louder frames are speech (synthesized callers are clean)
_CONNECT_TIMEOUT = 30.0  # seconds for the server to start the call once connected
_CLOSE_TIMEOUT = 2.0  # seconds for the close handshake: hanging up never hangs
_STATUS_TIMEOUT = 2.0  # seconds for the server to answer a status request


@dataclass
class CallOptions:
    """Where to call and how to behave. `server` is the base URL (http or ws)."""

    desk: str
    server: str = "http://127.0.0.1:8080"
    conversation: str | None = None
    token: str | None = None
    realtime: bool = True  # pace the caller's audio at 20 ms per frame
    playout_speed: float = 1.0  # the virtual speaker's speed; math.inf acks marks at once
    turn_timeout: float = 20.0  # how long to wait for the agent before speaking anyway
    quiet: float = 1.0  # seconds without news before asking whether the call settled
    turn_pause: float = 0.8  # the caller's pause after the agent falls quiet, before speaking
    webrtc: bool = False  # call over WebRTC (aiortc) instead of the WebSocket
    reconnect: Backoff | None = None  # come back to the conversation when the line drops

    def url(self, *, resume: bool = False) -> str:
        """The call's WebSocket URL (`resume`: coming back to a call in progress)."""
        base = urllib.parse.urlsplit(self.server)
        scheme = {"http": "ws", "https": "wss"}.get(base.scheme, base.scheme or "ws")
        fields = {"conversation": self.conversation or "", **({"resume": "1"} if resume else {})}
        query = urllib.parse.urlencode(fields)
        path = f"{base.path.rstrip('/')}/desks/{urllib.parse.quote(self.desk)}/call"
        return urllib.parse.urlunsplit((scheme, base.netloc, path, query, ""))


class CallClient:
    """One call over the WebSocket protocol of `voicehub.transports.websocket`."""

    def __init__(self, options: CallOptions) -> None:
        if options.conversation is None:
            options.conversation = f"cli-{uuid.uuid4().hex[:10]}"
        self.options = options
        self.report = CallReport(desk=options.desk, conversation=options.conversation)
        self._ws: ClientConnection | WebRTCLink | None = None
        self._t0 = 0.0
        self._speech: deque[tuple[bytes, Utterance | None]] = deque()
        self._open: AgentSegment | None = None
        self._play_end = 0.0
        self._acks = TaskSet("the call's playout acks")
        self._last_news = 0.0
        self._change = asyncio.Event()
        self._closed = asyncio.Event()
        self._line_up = asyncio.Event()  # cleared while a dropped line is being reconnected
        self._hanging_up = False
        self._tasks: list[asyncio.Task[None]] = []
        self.reconnector = Reconnector(options.reconnect) if options.reconnect else None

    # -- lifecycle -------------------------------------------------------------------------

    async def __aenter__(self) -> CallClient:
        await self.connect()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def connect(self) -> CallSession:
        """Open the call; returns the server's `session` event (raises if refused)."""
        self._ws = await self._open_line()
        self._line_up.set()
        self._t0 = self._now_raw()
        self._tasks = [asyncio.create_task(self._receive()), asyncio.create_task(self._mic())]

        def started() -> bool:
            return bool(self.report.events_of(CallSession)) or self.closed

        try:
            await self.wait_for(started, _CONNECT_TIMEOUT)
        except TimeoutError:
            message = f"the server did not start the call within {_CONNECT_TIMEOUT:g} s"
            raise CallRefused(message, self.report) from None
        if not self.report.events_of(CallSession):
            errors = [e.message for e in self.report.events_of(CallError)]
            reason = errors[0] if errors else self.report.close_reason
            message = f"the call was refused ({self.report.close_code}): {reason}"
            raise CallRefused(message, self.report)
        session = self.report.events_of(CallSession)[0]
        self.report.room_id = session.room_id
        self.report.resumed = session.resumed
        return session

    async def _open_line(self, *, resume: bool = False) -> ClientConnection | WebRTCLink:
        options = self.options
        if options.webrtc:
            from voicehub.client.webrtc import open_webrtc_link

            assert options.conversation is not None
            return await open_webrtc_link(
                options.server, options.desk, options.conversation, options.token
            )
        headers = {"Authorization": f"Bearer {options.token}"} if options.token else {}
        return await connect(
            options.url(resume=resume),
            additional_headers=headers,
            max_size=2**20,
            compression=None,
            close_timeout=_CLOSE_TIMEOUT,
        )

    async def close(self) -> None:
        """Stop the microphone and close the socket (without a hangup message)."""
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        await self._acks.aclose()
        if self._ws is not None:
            await self._ws.close()
            self.report.close_code = self.report.close_code or self._ws.close_code

    async def hangup(self, timeout: float = 10.0) -> None:
        """Say goodbye the protocol way and wait for the server to close the socket."""
        if self._ws is not None and not self.closed:
            self._hanging_up = True
            with contextlib.suppress(ConnectionClosed):
                await self._send(Hangup())
            with contextlib.suppress(TimeoutError):  # close() below ends it either way
                await self.wait_for(lambda: self.closed, timeout)
        await self.close()

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    def now(self) -> float:
        """Seconds since the call connected (the timeline's clock)."""
        return self._now_raw() - self._t0

    # -- caller ----------------------------------------------------------------------------

    async def say(self, pcm16: bytes, label: str) -> Utterance:
        """Stream caller speech (16 kHz PCM16); returns once its last frame was sent.
        Raises `CallClosed` when the server ends the call first."""
        padded = pcm16 + bytes(-len(pcm16) % FRAME_BYTES)
        frames = [padded[i : i + FRAME_BYTES] for i in range(0, len(padded), FRAME_BYTES)]
        seconds = len(padded) / 2 / SAMPLE_RATE
        utterance = Utterance(label, seconds, frames=len(frames), voiced_frames=_voiced(padded))
        self.report.utterances.append(utterance)
        self._speech.extend((frame, utterance) for frame in frames)
        if not self.options.realtime:  # a burst of trailing silence lets the VAD end the turn
            self._speech.extend((bytes(FRAME_BYTES), None) for _ in range(_BURST_FRAMES))
        await self.wait_for(lambda: utterance.done.is_set() or self.closed, None)
        if not utterance.done.is_set():
            raise CallClosed(f"the server closed the call while the caller said {label!r}")
        return utterance

    async def type_text(self, text: str) -> Utterance:
        """A caller turn typed instead of spoken (the `text` message)."""
        return await self._typed(CallerText(text=text), text)

    async def press_keys(self, digits: str) -> Utterance:
        """Keys pressed on the keypad (the `keypad` message; the desk's `[phone]` rules)."""
        return await self._typed(KeypadPress(digits=digits), f"keypad {digits}")

    async def _typed(self, message: ClientMessage, label: str) -> Utterance:
        now = self.now()
        utterance = Utterance(label, 0.0, started_at=now, ended_at=now, typed=True)
        utterance.done.set()
        self.report.utterances.append(utterance)
        await self._send(message)
        return utterance

    async def wait_for_turn(self, *, through_thinking: bool = False) -> None:
        """Wait until the agent has answered the last utterance (or greeted) and finished
        playing, like a polite caller; gives up waiting for an answer after `turn_timeout`.
        With `through_thinking`, an agent "thinking" in silence after its audio played out
        has finished its turn too (a question asked by a tool waits for the caller so)."""
        done = self._agent_played_out if through_thinking else self._agent_done
        last = self.report.utterances[-1].ended_at if self.report.utterances else None

        def answered() -> bool:
            return self._agent_spoke_after(last) or self.closed

        with contextlib.suppress(TimeoutError):
            await self.wait_for(answered, self.options.turn_timeout)
        deadline = self.now() + self.options.turn_timeout
        while not self.closed:
            # A busy agent past turn_timeout (a long question, a stuck reply) is talked to
            # anyway: the caller speaks, and `settle` bounds the call as a whole.
            with contextlib.suppress(TimeoutError):
                await self.wait_for(lambda: done() or self.closed, self.options.turn_timeout)
            # An agent often says a second line (a handoff greeting, a follow-up question):
            # a polite caller lets a short pause pass first, and starts over if it speaks.
            pause_left = self._last_news + self.options.turn_pause - self.now()
            if pause_left <= 0 or self.now() >= deadline:
                return
            await self._pause(pause_left)

    async def settle(self, timeout: float = 90.0) -> bool:
        """Wait until the conversation is over for now: played out, quiet for `quiet` s, and
        the server idle with no running work and no pending delivery. False on timeout."""
        deadline = self.now() + timeout
        while not self.closed and self.now() < deadline:
            with contextlib.suppress(TimeoutError):
                await self.wait_for(self._agent_done, deadline - self.now())
            quiet_left = self._last_news + self.options.quiet - self.now()
            if quiet_left > 0:  # news restarts the quiet period
                await self._pause(min(quiet_left, deadline - self.now()))
                continue
            status = await self.status()
            if status is not None and status.settled:
                self.report.settled = True
                return True
            await self._pause(min(0.5, max(0.0, deadline - self.now())))  # ask again soon
        return False

    async def status(self) -> CallStatus | None:
        """Ask the server what the conversation is waiting for (None: the call ended, or
        no answer within 2 s)."""
        count = len(self.report.events_of(CallStatus))
        if self.closed:
            return None
        try:
            await self._send(StatusRequest())

            def answered() -> bool:
                return len(self.report.events_of(CallStatus)) > count or self.closed

            await self.wait_for(answered, _STATUS_TIMEOUT)
        except (ConnectionClosed, TimeoutError):
            return None
        statuses = self.report.events_of(CallStatus)
        return statuses[-1] if len(statuses) > count else None

    async def wait_for(self, predicate: Callable[[], bool], timeout: float | None = 60.0) -> None:
        """Wait until `predicate()` holds, re-checking on every message (TimeoutError;
        `timeout=None` waits as long as it takes)."""

        async def until() -> None:
            while not predicate():
                self._change.clear()
                await self._change.wait()

        async with asyncio.timeout(timeout):
            await until()

    async def wait_for_event(
        self,
        kind: type[E],
        where: Callable[[E], bool] = lambda e: True,
        timeout: float = 60.0,
    ) -> E:
        """The first event of class `kind` matching `where` (already received or next)."""
        found: list[E] = []

        def seen() -> bool:
            found[:] = [e for e in self.report.events_of(kind) if where(e)]
            return bool(found)

        await self.wait_for(seen, timeout)
        return found[0]

    # -- internals -------------------------------------------------------------------------

    async def _send(self, message: ClientMessage) -> None:
        assert self._ws is not None
        await self._ws.send(message.to_wire())

    def _now_raw(self) -> float:
        return asyncio.get_running_loop().time()

    def _notify(self) -> None:
        self._change.set()

    async def _pause(self, seconds: float) -> None:
        """Wait `seconds`, or less if a message arrives."""
        self._change.clear()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await self._change.wait()

    def _agent_spoke_after(self, moment: float | None) -> bool:
        if moment is None:  # before the first utterance: the greeting, if the desk has one
            session = self.report.events_of(CallSession)
            return not (session and session[0].greeting) or bool(self.report.segments)
        return any(segment.first_audio_at > moment for segment in self.report.segments)

    def _agent_done(self) -> bool:
        return self._agent_played_out(("speaking", "thinking"))

    def _agent_played_out(self, busy_states: tuple[str, ...] = ("speaking",)) -> bool:
        states = self.report.events_of(AgentState)
        busy = bool(states) and states[-1].state in busy_states
        unacked = any(s.mark_id and s.acked_at is None and not s.cut for s in self.report.segments)
        return self._open is None and not unacked and not busy and not self._acks

    async def _receive(self) -> None:
        try:
            while True:
                line = self._ws
                assert line is not None
                try:
                    async for message in line:
                        now = self.now()
                        if isinstance(message, bytes):
                            self._on_audio(message, now)
                            continue
                        try:
                            self._on_event(parse_server_event(message), now)
                        except ProtocolError as exc:  # a newer server's event: go on
                            log.warning("ignoring a server event: %s", exc)
                            continue
                        self._notify()
                except ConnectionClosed:
                    pass
                self.report.close_code = line.close_code
                self.report.close_reason = line.close_reason or ""
                if not await self._come_back():
                    return
        finally:
            self.report.closed_by_server = not self._hanging_up
            self._closed.set()
            self._line_up.set()  # the microphone stops waiting
            self._notify()

    async def _come_back(self) -> bool:
        """After the line dropped: reconnect to the conversation if that is wanted (see
        `voicehub.client.reconnect`); True once the call is live again."""
        reconnector = self.reconnector
        code = _close_code(self.report)
        if reconnector is None or not reconnector.wanted(code, hung_up=self._hanging_up):
            return False
        self._line_up.clear()
        self._cleared(self.now())  # what the old line had not played is gone
        drop = Reconnection(self.now(), code, self.report.close_reason)
        log.info("the line dropped (%s %s): reconnecting", code, self.report.close_reason)
        sessions = len(self.report.events_of(CallSession))

        async def open_line() -> str:
            line = await self._open_line(resume=True)  # a call in progress: not refused busy
            drop.opened_at = self.now()
            self._ws = line
            async for message in line:  # up to the session event: the call is live then
                if isinstance(message, str):
                    with contextlib.suppress(ProtocolError):
                        self._on_event(parse_server_event(message), self.now())
                if len(self.report.events_of(CallSession)) > sessions:
                    break
            else:
                raise VoicehubError(f"refused ({line.close_code}): {line.close_reason}")
            self._line_up.set()
            self._notify()
            return self.report.events_of(CallSession)[-1].continued

        return await reconnector.reconnect(drop, open_line, self.now)

    def _on_audio(self, pcm16: bytes, now: float) -> None:
        self._last_news = now
        audio = self.report.agent_audio
        if self._open is None:
            self._open = AgentSegment(now, len(audio), len(audio), now)
            self.report.segments.append(self._open)
        audio += pcm16
        self._open.end, self._open.last_audio_at = len(audio), now
        # the virtual speaker plays chunks back to back, starting when they arrive
        played_in = len(pcm16) / 2 / SAMPLE_RATE / self.options.playout_speed
        self._play_end = max(now, self._play_end) + played_in

    def _on_event(self, event: ServerEvent, now: float) -> None:
        self.report.events.append(ReceivedEvent(now, event))
        if not isinstance(event, CallStatus):  # our own polling is not news
            self._last_news = now
        match event:
            case SpeechMark():
                self._marked(event.id, now)
            case ClearAudio():
                self._cleared(now)
            case (
                CallSession()
                | CallStatus()
                | UserState()
                | AgentState()
                | Transcript()
                | ToolCall()
                | TaskStarted()
                | TaskFinished()
                | DeliveryAttempt()
                | DeliveryOutcome()
                | CallError()
                | ProviderError()
                | CallTransferred()
            ):
                pass  # recorded for the report and the waits above; nothing to play or ack
            case _:
                assert_never(event)

    def _marked(self, mark_id: str, now: float) -> None:
        """The audio so far forms a segment: ack it once the virtual speaker played it."""
        segment = self._open or AgentSegment(now, len(self.report.agent_audio), 0, now)
        if self._open is None:
            segment.end = segment.start
            self.report.segments.append(segment)
        segment.mark_id, self._open = mark_id, None
        due = self._play_end
        task = self._acks.start(self._ack(segment, max(0.0, due - now)), name="ack")
        # the wake-up comes after the task has left `_acks` (its set's own done callback
        # runs first): a waiter woken while it was still there saw an ack owed, and no
        # message might come to wake it again
        task.add_done_callback(lambda _: self._notify())

    def _cleared(self, now: float) -> None:
        """Barge-in: drop what has not played, ack nothing of it."""
        self._acks.cancel()
        for segment in self.report.segments:
            segment.cut = segment.cut or segment.acked_at is None
        self._open, self._play_end = None, now

    async def _ack(self, segment: AgentSegment, delay: float) -> None:
        if delay > 0:
            await asyncio.sleep(delay)  # the audio before the mark is still playing
        assert segment.mark_id is not None
        with contextlib.suppress(ConnectionClosed):
            await self._send(Playout(id=segment.mark_id))
            segment.acked_at = self.now()

    async def _mic(self) -> None:
        """The open microphone: queued speech frames, else silence, on a steady clock
        (while a dropped line is reconnected it waits, then goes on)."""
        while not self.closed:
            await self._line_up.wait()
            await self._speak_into_line()

    async def _speak_into_line(self) -> None:
        assert self._ws is not None
        silence = bytes(FRAME_BYTES * _SILENCE_FRAMES)
        next_at = self.now()
        try:
            while True:
                if self._speech and not self.options.realtime:
                    await self._send_frames(_BURST_FRAMES)
                    next_at = self.now()
                    continue
                if self._speech:
                    await self._send_frames(1)
                    next_at += FRAME_SECONDS
                else:
                    await self._ws.send(silence)
                    next_at += FRAME_SECONDS * _SILENCE_FRAMES
                delay = next_at - self.now()
                if delay > 0:
                    await asyncio.sleep(delay)
                elif delay < -0.5:  # the loop stalled: resume the clock, do not burst
                    next_at = self.now()
        except ConnectionClosed:
            dropped = self._ws
            while self._ws is dropped and not self.closed:  # until the receiver noticed
                await self._pause(0.05)

    async def _send_frames(self, count: int) -> None:
        assert self._ws is not None
        batch: list[tuple[bytes, Utterance | None]] = []
        while self._speech and len(batch) < count:
            batch.append(self._speech.popleft())
        await self._ws.send(b"".join(frame for frame, _ in batch))
        now = self.now()
        for _, utterance in batch:
            if utterance is None:
                continue
            if utterance.started_at is None:
                utterance.started_at = now
            utterance.ended_at = self._last_news = now
            utterance.frames_sent += 1
            if utterance.frames_sent == utterance.voiced_frames:
                utterance.voice_ended_at = now
            if utterance.frames_sent == utterance.frames:
                utterance.done.set()
                self._notify()


def _close_code(report: CallReport) -> int | None:
    """The close code the server meant: over WebRTC, a close it announced as an error event
    (`closed_1012`) before the data channel went."""
    since = max((i for i, r in enumerate(report.events) if r.type == "session"), default=0)
    for received in reversed(report.events[since:]):
        event = received.event
        if (
            isinstance(event, CallError)
            and event.code[:7] == "closed_"
            and event.code[7:].isdigit()
        ):
            return int(event.code[7:])
    return report.close_code


def voiced_seconds(pcm16: bytes) -> float:
    """How long `pcm16` (16 kHz) speaks before its trailing silence: where the caller
    stops speaking, for voice-to-voice."""
    padded = pcm16 + bytes(-len(pcm16) % FRAME_BYTES)
    return _voiced(padded) * FRAME_BYTES / 2 / SAMPLE_RATE


def _voiced(pcm16: bytes) -> int:
    """Frames up to the last one louder than -40 dBFS (speech, not trailing silence)."""
    samples = np.frombuffer(pcm16, dtype="<i2").astype(np.float64).reshape(-1, FRAME_BYTES // 2)
    loud = np.flatnonzero(np.sqrt((samples * samples).mean(axis=1)) > _VOICED_RMS)
    return int(loud[-1]) + 1 if loud.size else len(samples)


def caller_audio(*, text: str | None = None, wav: str | Path | None = None) -> bytes:
    """The caller's words as 16 kHz PCM16: `text` synthesized with Piper (PocketSphinx
    understands it; eSpeak's voice it does not), or a WAV file resampled."""
    from voicehub.voice.audio import read_wav, resample_pcm16

    if wav is not None:
        try:
            audio = read_wav(wav)
        except (OSError, ValueError) as exc:
            raise VoicehubError(f"{wav}: cannot use it as the caller's audio: {exc}") from None
        return resample_pcm16(audio.pcm16, audio.sample_rate, SAMPLE_RATE)
    if text is None or not text.strip():
        raise VoicehubError("nothing to say: give the caller's words or a WAV file")
    from voicehub.voice.providers.offline import synthesize

    return synthesize(text, voice="piper", sample_rate=SAMPLE_RATE)


async def place_call(
    options: CallOptions,
    lines: Sequence[tuple[str, bytes]],
    *,
    settle_timeout: float = 90.0,
    hangup: bool = True,
) -> CallReport:
    """Call, let the agent greet, speak each `(label, pcm16)` line after the agent answered
    the previous one, wait for the conversation to settle, then hang up. A call the server
    ends early returns its report too (`report.closed_by_server`); a refused one raises
    `CallRefused`. Classify the ending with `voicehub.client.endings.ending_of`."""
    async with CallClient(options) as call:
        try:
            await call.wait_for_turn()
            for number, (label, pcm16) in enumerate(lines):
                if number:
                    await call.wait_for_turn()
                await call.say(pcm16, label)
            await call.settle(settle_timeout)
        except CallClosed:
            pass  # the report says how the server closed it
        if hangup:
            await call.hangup()
    return call.report
