"""One caller's stream of an utterance recognizer: :class:`WhisperStream` (made by
`WhisperSTT.stream` and `MoonshineSTT.stream`: any `UtteranceSTT`).

Frames are taken where they are pushed (`InlineRecognizeStream`): the speech gate cuts
them into utterance windows (`utterance_window`), decodings go to the recognizer's queue
(`decode_queue`, worker threads) and their results come back on the event loop: an interim
transcript, or the final a flush waits for. Each flush is answered by exactly one final,
empty when nothing was said, in the order of the flushes. A decoding of a window is given the
tokens of the latest decoding of the same utterance's start (`draft`): a recognizer that
verifies drafts (Moonshine) only decodes on from where they part.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from voicehub.voice.providers import vendor_import
from voicehub.voice.providers.offline.decode_queue import DecodeJob, DecodeQueue, Then, Urgency
from voicehub.voice.providers.offline.inline_stt import (
    InlineRecognizeStream,
    InputItem,
    mono_pcm16,
)
from voicehub.voice.providers.offline.speech_gate import SpeechGate
from voicehub.voice.providers.offline.utterance_window import (
    Interim,
    Pause,
    UtteranceWindow,
    WindowAudio,
)
from voicehub.voice.providers.offline.whisper_engine import WhisperTranscript

with vendor_import("livekit-agents"):
    from livekit.agents import stt
    from livekit.agents.language import LanguageCode
    from livekit.agents.types import APIConnectOptions

if TYPE_CHECKING:
    from voicehub.voice.providers.offline.whisper_stt import WindowSettings

__all__ = ["UtteranceSTT", "WhisperStream", "final_event"]

log = logging.getLogger("voicehub.voice.stt")

_LANGUAGE = LanguageCode("en-US")  # tiny.en is English only
_NOTHING = WhisperTranscript("", 0.0, 0.0, 0.0)


class _HasQueue(Protocol):
    @property
    def queue(self) -> DecodeQueue: ...


class UtteranceSTT(Protocol):
    """A recognizer of whole utterances that a `WhisperStream` drives."""

    @property
    def window(self) -> WindowSettings:
        """How the stream cuts and decodes ahead."""

    @property
    def recognizer(self) -> _HasQueue:
        """Whose queue the decodings run on."""

    def decode(
        self, pcm16: bytes, sample_rate: int, *, final: bool = True, draft: Sequence[int] = ()
    ) -> WhisperTranscript | Then:
        """The words of `pcm16` (blocking; on the queue's worker), or more work to queue
        before they are known (`Then`: a second opinion on a final)."""


@dataclass(frozen=True)
class _FlushEnded:
    """A flush of an utterance that ended `ago` seconds of audio before the frames pushed."""

    ago: float


@dataclass
class _Flushed:
    """A flushed utterance whose final is not out yet."""

    window: WindowAudio | None
    heard: WhisperTranscript | None = None
    error: BaseException | None = None


class WhisperStream(InlineRecognizeStream):
    """One caller's stream (see the module). Every frame is taken where it is pushed; the
    decodings run on the recognizer's queue and their results come back on the loop."""

    def __init__(
        self, *, stt: stt.STT[Any], plugin: UtteranceSTT, conn_options: APIConnectOptions
    ) -> None:
        super().__init__(stt=stt, conn_options=conn_options)
        self._whisper = plugin
        self._loop = asyncio.get_running_loop()
        self._request_id = uuid.uuid4().hex[:12]
        self._gate: SpeechGate | None = None  # made at the first frame: its rate
        settings = plugin.window
        self._window = UtteranceWindow(
            pre_roll=settings.pre_roll, tail=settings.tail, interim_every=settings.interim_every
        )
        self._heard: dict[tuple[int, int, int], WhisperTranscript] = {}  # full decodings
        self._draft: tuple[WindowAudio, WhisperTranscript] | None = None  # the latest
        self._jobs: dict[tuple[int, int, int], DecodeJob] = {}  # queued or running
        self._flushed: deque[_Flushed] = deque()
        self._finals_out: asyncio.Future[None] | None = None
        self._speaking = False
        self._interim = ""
        self._unreported_audio = 0.0

    @property
    def rate(self) -> int:
        """The rate the stream's windows are decoded at (0 before the first frame)."""
        return self._gate.rate if self._gate is not None else 0

    # -- input (on the loop, inline) -----------------------------------------------------------

    @property
    def finals_owed(self) -> int:
        """Flushes whose final has not been sent yet (the engine waits for them)."""
        return len(self._flushed)

    def flush_ended(self, ago: float) -> None:
        """A flush for an utterance that the session's VAD ended `ago` seconds of audio
        before the frames pushed so far (a VAD behind on a busy machine decides the end of
        a pause after the caller spoke on): the frames since go to the next utterance
        (`UtteranceWindow.flush_at`). Answered by one final, as `flush` is."""
        self._check_open()
        self._offer(_FlushEnded(max(0.0, ago)))

    def _take(self, item: InputItem | _FlushEnded) -> bool:
        if isinstance(item, self._FlushSentinel):
            self._flush_utterance()
            return True
        if isinstance(item, _FlushEnded):
            self._flush_utterance(ago=item.ago)
            return True
        gate = self._gate
        if gate is None:
            gate = self._gate = SpeechGate(item.sample_rate)
        self._unreported_audio += item.duration
        for frame, speech in gate.push(mono_pcm16(item)):
            action = self._window.push(frame, speech)
            if action is not None:
                self._decode_ahead(action)
        return True

    def _decode_ahead(self, action: Pause | Interim) -> None:
        """Decode what the window asks for before its flush (if the plugin does)."""
        if not self._whisper.window.decode_ahead:
            return
        if isinstance(action, Pause):
            self._decode(action.window, Urgency.PAUSE)
        elif not self._flushed:
            self._decode(action.window, Urgency.INTERIM)

    def _flush_utterance(self, ago: float = 0.0) -> None:
        frames_ago = round(ago * 1000 / self._window.frame_ms)
        window, ahead = self._window.flush_at(self._window.frames_pushed - frames_ago)
        flushed = _Flushed(window)
        if window is None:
            flushed.heard = _NOTHING
        elif window.key in self._heard:
            flushed.heard = self._heard[window.key]
        elif (
            (job := self._jobs.get(window.key)) is not None
            and job.urgency != Urgency.INTERIM
            and job.state != "cancelled"
        ):
            self._whisper.recognizer.queue.promote(job)  # a pause decoding: this final
        else:
            self._decode(window, Urgency.FINAL)
        self._flushed.append(flushed)
        self._emit_finals()
        for action in ahead:  # the next utterance's words, already said
            self._decode_ahead(action)

    def _decode(self, window: WindowAudio, urgency: Urgency) -> None:
        """Decode `window` on the queue (a final's decoding unless it is an interim)."""
        final = urgency != Urgency.INTERIM
        rate = self.rate
        whisper = self._whisper
        draft: tuple[int, ...] = ()
        if self._draft is not None:
            before, heard = self._draft
            if (before.utterance, before.start) == (window.utterance, window.start):
                draft = heard.tokens

        def run() -> WhisperTranscript | Then:
            return whisper.decode(window.audio, rate, final=final, draft=draft)

        loop = self._loop

        def done(heard: Any, error: BaseException | None) -> None:
            if not loop.is_closed():
                with contextlib.suppress(RuntimeError):  # the loop closed: nobody waits
                    loop.call_soon_threadsafe(self._decoded, window, final, heard, error)

        self._jobs = {key: job for key, job in self._jobs.items() if job.state != "cancelled"}
        self._jobs[window.key] = whisper.recognizer.queue.submit(self, urgency, run, done)

    # -- results (on the loop) ---------------------------------------------------------------

    def _decoded(
        self,
        window: WindowAudio,
        final: bool,
        heard: WhisperTranscript | None,
        error: BaseException | None,
    ) -> None:
        self._jobs.pop(window.key, None)
        waiting = [f for f in self._flushed if f.window is not None and f.window.key == window.key]
        if error is None and heard is not None and heard.tokens:
            latest = self._draft
            if latest is None or latest[0].key <= window.key:
                self._draft = (window, heard)
        if final and error is None and heard is not None:
            self._heard = {
                key: known for key, known in self._heard.items() if key[0] >= window.utterance
            }
            self._heard[window.key] = heard
        for flushed in waiting:
            flushed.heard, flushed.error = heard, error
        if waiting:
            self._emit_finals()
        elif error is not None:
            log.warning("an interim decoding failed: %s", error)
        elif heard is not None and window.utterance == self._window.utterance:
            self._emit_interim(heard.text)

    def _emit_interim(self, text: str) -> None:
        if self._flushed or not text or text == self._interim:
            return  # an earlier utterance's final goes first; nothing new
        self._interim = text
        if not self._speaking:
            self._speaking = True
            self._emit(stt.SpeechEvent(type=stt.SpeechEventType.START_OF_SPEECH))
        data = stt.SpeechData(language=_LANGUAGE, text=text)
        self._emit(
            stt.SpeechEvent(
                type=stt.SpeechEventType.INTERIM_TRANSCRIPT,
                request_id=self._request_id,
                alternatives=[data],
            )
        )

    def _emit_finals(self) -> None:
        """Send every final that is ready, in the order of the flushes."""
        while self._flushed and (
            self._flushed[0].heard is not None or self._flushed[0].error is not None
        ):
            flushed = self._flushed.popleft()
            if flushed.error is not None:
                # The call goes on: this utterance is lost, the next one may decode.
                log.error("could not decode an utterance: %r", flushed.error)
                flushed.heard = _NOTHING
            self._emit_final(flushed)
        if not self._flushed and self._finals_out is not None and not self._finals_out.done():
            self._finals_out.set_result(None)

    def _emit_final(self, flushed: _Flushed) -> None:
        heard, window = flushed.heard, flushed.window
        assert heard is not None
        # Times count from the session's audio start.
        frame = self._window.frame_ms / 1000
        start = (window.start if window is not None else self._window.frames_pushed) * frame
        end = window.end * frame if window is not None else start
        self._emit(final_event(self._request_id, heard, self.start_time_offset, start, end))
        if self._speaking:
            self._speaking = False
            self._emit(stt.SpeechEvent(type=stt.SpeechEventType.END_OF_SPEECH))
        self._interim = ""
        if self._unreported_audio > 0:
            usage = stt.RecognitionUsage(audio_duration=self._unreported_audio)
            self._unreported_audio = 0.0
            self._emit(
                stt.SpeechEvent(
                    type=stt.SpeechEventType.RECOGNITION_USAGE,
                    request_id=self._request_id,
                    recognition_usage=usage,
                )
            )

    # -- life ---------------------------------------------------------------------------------

    async def _run(self) -> None:
        await super()._run()
        if self._flushed:  # input ended: the last finals still come
            self._finals_out = self._loop.create_future()
            await self._finals_out

    async def aclose(self) -> None:
        """Close now; decodings not started are dropped."""
        queue = self._whisper.recognizer.queue
        for job in self._jobs.values():
            queue.cancel(job)
        self._jobs.clear()
        await super().aclose()


def final_event(
    request_id: str,
    heard: WhisperTranscript,
    offset: float,
    start: float | None = None,
    end: float | None = None,
) -> stt.SpeechEvent:
    """A FINAL_TRANSCRIPT event for `heard`, its times shifted by `offset` (or replaced
    by `start` and `end`, seconds of the stream)."""
    data = stt.SpeechData(
        language=_LANGUAGE,
        text=heard.text,
        confidence=heard.confidence,
        start_time=offset + (heard.start_time if start is None else start),
        end_time=offset + (heard.end_time if end is None else end),
    )
    return stt.SpeechEvent(
        type=stt.SpeechEventType.FINAL_TRANSCRIPT, request_id=request_id, alternatives=[data]
    )
