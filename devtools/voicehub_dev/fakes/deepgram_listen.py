"""The live-listen behaviour of the fake Deepgram, sans I/O: audio in, `Results` JSON out.

It is honest about one thing: there is no recognizer. It segments the audio it receives by
energy (20 ms windows, on the audio's own timeline, so pushing faster than real time gives
the same answer), and the *words* of each utterance come from transcripts the test registered
in order (`FakeDeepgram.transcripts`). Everything else follows Deepgram's documented
behaviour (PROTOCOLS.md 2.1):

- while speech goes on, interim `Results` (`is_final: false`, with `interim_results=true`)
  reveal the registered words a few at a time;
- `endpointing` ms of silence after speech -> `is_final: true, speech_final: true`; with
  `endpointing=false` the segment is finalized (`speech_final: false`) after 500 ms;
- `utterance_end_ms` (with interim results) -> `UtteranceEnd` once that much time has passed
  since the last word, whether or not `speech_final` was sent;
- `Finalize` -> the pending words as `is_final: true, from_finalize: true` (an empty
  transcript when nothing is pending);
- `vad_events=true` -> `SpeechStarted` at the start of each utterance.

Many callers at once (the soak) cannot share one ordered list of transcripts, so the fake
can also know *lines* (`line_keys`): audio it was given with its words. An utterance whose
first 100 ms are exactly those of a line (callers send whole 20 ms frames, so the fake's
windows fall where the line's do) is heard as that line; its later segments, if a pause in
it ends one, come out empty. This is matching known audio, not recognition.
"""

from __future__ import annotations

import hashlib
import uuid
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from voicehub.voice.audio import ulaw2lin

WINDOW = 0.02
SPEECH_RMS = 300.0  # int16 RMS; Piper speech is in the thousands, silence is 0
WORD_SECONDS = 0.3  # interims reveal about one registered word per this much speech
INTERIM_EVERY = 0.4
NO_ENDPOINT_FINAL = 0.5
KEY_WINDOWS = 5  # the opening 100 ms of an utterance name the line it is


def line_keys(lines: Iterable[tuple[str, bytes]], sample_rate: int) -> dict[bytes, str]:
    """What `ListenState` matches utterances against: each line's opening audio (from its
    first voiced window, `KEY_WINDOWS` windows of PCM16 at `sample_rate`) -> its words."""
    window = int(sample_rate * WINDOW) * 2
    keys: dict[bytes, str] = {}
    for text, pcm in lines:
        for at in range(0, len(pcm) - window + 1, window):
            samples = np.frombuffer(pcm[at : at + window], dtype="<i2").astype(np.float64)
            if float(np.sqrt(np.mean(samples**2))) >= SPEECH_RMS:
                keys[_key(pcm[at : at + window * KEY_WINDOWS])] = text
                break
    return keys


def _key(opening: bytes) -> bytes:
    return hashlib.blake2b(opening, digest_size=16).digest()


@dataclass
class ListenParams:
    """The query of one `/v1/listen` connection, as the fake reads it."""

    model: str
    encoding: str
    sample_rate: int
    interim_results: bool
    endpointing: float | None  # seconds; None when `endpointing=false`
    utterance_end: float | None
    vad_events: bool
    keyterms: tuple[str, ...]
    raw: Mapping[str, list[str]] = field(default_factory=dict)

    @classmethod
    def from_query(cls, query: Mapping[str, list[str]]) -> ListenParams:
        def one(name: str, default: str | None = None) -> str | None:
            values = query.get(name)
            return values[-1] if values else default

        endpointing = one("endpointing", "10")
        utterance_end = one("utterance_end_ms")
        return cls(
            model=one("model", "base") or "base",
            encoding=one("encoding", "linear16") or "linear16",
            sample_rate=int(one("sample_rate", "16000") or 16000),
            interim_results=one("interim_results") == "true",
            endpointing=None if endpointing == "false" else int(endpointing or 10) / 1000,
            utterance_end=int(utterance_end) / 1000 if utterance_end else None,
            vad_events=one("vad_events") == "true",
            keyterms=tuple(query.get("keyterm", [])),
            raw=dict(query),
        )


class ListenState:
    """One connection's recognizer stand-in. `feed`/`finalize`/`close` return JSON messages."""

    def __init__(
        self,
        params: ListenParams,
        transcripts: deque[str],
        lines: Mapping[bytes, str] | None = None,
    ) -> None:
        self.params = params
        self._transcripts = transcripts
        self._lines = lines
        self._opening: list[bytes] | None = None  # an utterance's first windows, to match
        self._heard: str | None = None  # the line the current utterance was matched to
        self._request_id = str(uuid.uuid4())
        self._window = max(1, int(params.sample_rate * WINDOW))
        self._pending = np.zeros(0, dtype=np.int16)
        self.audio_time = 0.0  # seconds of audio received
        self._speech_start: float | None = None
        self._voiced_end = 0.0  # end of the last voiced window
        self._last_interim = 0.0
        self._segment_start = 0.0  # start of the audio not yet covered by a final
        self._words_pending = False  # an utterance heard but not finalized
        self._utterance_end_due: float | None = None

    # -- input ------------------------------------------------------------------------

    def feed(self, data: bytes) -> list[dict[str, Any]]:
        samples = self._decode(data)
        self._pending = np.concatenate([self._pending, samples])
        out: list[dict[str, Any]] = []
        while len(self._pending) >= self._window:
            window, self._pending = self._pending[: self._window], self._pending[self._window :]
            out += self._step(window)
        return out

    def finalize(self) -> list[dict[str, Any]]:
        if self._words_pending:
            return [self._final(speech_final=False, from_finalize=True)]
        return [self._results("", is_final=True, from_finalize=True)]

    def close(self, duration_only: bool = False) -> list[dict[str, Any]]:
        out = [] if duration_only or not self._words_pending else [self._final(False)]
        out.append(
            {
                "type": "Metadata",
                "transaction_key": "deprecated",
                "request_id": self._request_id,
                "sha256": "0" * 64,
                "created": "2025-01-01T00:00:00.000Z",
                "duration": round(self.audio_time, 3),
                "channels": 1,
            }
        )
        return out

    # -- segmentation -------------------------------------------------------------------

    def _decode(self, data: bytes) -> np.ndarray[Any, np.dtype[np.int16]]:
        if self.params.encoding == "mulaw":
            data = ulaw2lin(data)
        elif self.params.encoding != "linear16":
            raise ValueError(
                f"the fake only decodes linear16 and mulaw, not {self.params.encoding}"
            )
        return np.frombuffer(data[: len(data) // 2 * 2], dtype=np.int16)

    def _step(self, window: np.ndarray[Any, np.dtype[np.int16]]) -> list[dict[str, Any]]:
        start = self.audio_time
        self.audio_time += len(window) / self.params.sample_rate
        voiced = float(np.sqrt(np.mean(window.astype(np.float64) ** 2))) >= SPEECH_RMS
        out: list[dict[str, Any]] = []
        if self._opening is not None:
            self._opening.append(window.tobytes())
            if len(self._opening) == KEY_WINDOWS:
                assert self._lines is not None
                self._heard = self._lines.get(_key(b"".join(self._opening)), "")
                self._opening = None
        if voiced:
            self._voiced_end = self.audio_time
            self._utterance_end_due = None
            if self._speech_start is None:
                self._speech_start = start
                self._last_interim = start
                if not self._words_pending:
                    self._segment_start = start
                    if self._lines is not None:
                        self._heard, self._opening = "", [window.tobytes()]
                self._words_pending = True
                if self.params.vad_events:
                    out.append({"type": "SpeechStarted", "channel": [0], "timestamp": start})
            elif self.params.interim_results and self.audio_time - self._last_interim >= (
                INTERIM_EVERY
            ):
                self._last_interim = self.audio_time
                words = self._words(self.audio_time - self._segment_start)
                if words:
                    out.append(self._results(words, is_final=False))
            return out
        silence = self.audio_time - self._voiced_end
        if self._speech_start is not None:
            wait = self.params.endpointing
            if silence >= (NO_ENDPOINT_FINAL if wait is None else wait):
                self._speech_start = None
                out.append(self._final(speech_final=wait is not None))
        due = self._utterance_end_due
        if due is not None and self.audio_time >= due:
            self._utterance_end_due = None
            out.append(
                {"type": "UtteranceEnd", "channel": [0, 1], "last_word_end": self._voiced_end}
            )
        return out

    def _words(self, spoken: float) -> str:
        if self._lines is not None:
            words = (self._heard or "").split()
        elif not self._transcripts:
            return ""
        else:
            words = self._transcripts[0].split()
        shown = min(len(words) - 1, int(spoken / WORD_SECONDS))
        return " ".join(words[: max(shown, 0)])

    def _final(self, speech_final: bool, from_finalize: bool = False) -> dict[str, Any]:
        if self._lines is not None:
            text, self._heard, self._opening = self._heard or "", "", None
        else:
            text = self._transcripts.popleft() if self._transcripts else ""
        self._words_pending = False
        self._speech_start = None
        if self.params.interim_results and self.params.utterance_end is not None:
            self._utterance_end_due = self._voiced_end + self.params.utterance_end
        message = self._results(
            text, is_final=True, speech_final=speech_final, from_finalize=from_finalize
        )
        self._segment_start = self.audio_time
        return message

    def _results(
        self,
        text: str,
        *,
        is_final: bool,
        speech_final: bool = False,
        from_finalize: bool = False,
    ) -> dict[str, Any]:
        start = self._segment_start
        end = max(self._voiced_end, start)
        words = text.split()
        step = (end - start) / max(len(words), 1)
        return {
            "type": "Results",
            "channel_index": [0, 1],
            "duration": round(self.audio_time - start, 3),
            "start": round(start, 3),
            "is_final": is_final,
            "speech_final": speech_final,
            "from_finalize": from_finalize,
            "channel": {
                "alternatives": [
                    {
                        "transcript": text,
                        "confidence": 0.97 if text else 0.0,
                        "words": [
                            {
                                "word": word.lower().strip(".,?!"),
                                "start": round(start + i * step, 3),
                                "end": round(start + (i + 1) * step, 3),
                                "confidence": 0.97,
                                "punctuated_word": word,
                            }
                            for i, word in enumerate(words)
                        ],
                    }
                ]
            },
            "metadata": {
                "request_id": self._request_id,
                "model_info": {
                    "name": f"general-{self.params.model}",
                    "version": "2025-01-01.0",
                    "arch": self.params.model,
                },
                "model_uuid": "00000000-fake-0000-0000-000000000000",
            },
        }
