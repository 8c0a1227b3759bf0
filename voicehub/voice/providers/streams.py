"""What the voice engine needs of a recognizer and a VAD, declared once.

livekit's plugin interfaces (`stt.STT`, `vad.VAD`) say what any plugin does; the engine needs
a little more to decide a turn well, and voicehub's own providers offer it:

- a recognizer stream says when it owes finals (`finals_owed`: flushes not yet answered),
  is told where speech started (`speech_started`: an utterance recognizer keeps audio from
  there) and where it ended (`flush_ended(behind)`: the VAD decided `behind` seconds before
  the latest audio pushed, so words said after the pause stay whole);
- a VAD stream says how far into the pushed audio it has decided (`analysed_seconds`).

What the engine asks of a stream beyond livekit's interface is `RecognizerAbilities` and
`VadAbilities` (the tick gate's inputs: finals owed, audio analysed); `RecognizerStream` and
`VadStream` are those with livekit's own stream methods. The engine reaches providers only
through these protocols (never `getattr`). A stream that lacks the abilities (any livekit
plugin's) is wrapped once, at composition (`recognizer_abilities` / `vad_abilities`, or
`plugin_recognizer` / `plugin_vad` for the whole plugin), with the conservative defaults:
nothing owed, a plain flush, and progress known only from the VAD's own inference events
(`analysed_seconds` is None).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any, Protocol, runtime_checkable

from voicehub.voice.providers import vendor_import

with vendor_import("livekit-agents"):
    from livekit import rtc
    from livekit.agents import stt as lk_stt
    from livekit.agents import vad as lk_vad

__all__ = [
    "PauseWatch",
    "PluginRecognizer",
    "PluginVad",
    "Recognizer",
    "RecognizerAbilities",
    "RecognizerStream",
    "VadAbilities",
    "VadStream",
    "VoiceActivityDetector",
    "plugin_recognizer",
    "plugin_vad",
    "recognizer_abilities",
    "vad_abilities",
]


@runtime_checkable
class RecognizerAbilities(Protocol):
    """What the engine asks of a recognizer stream beyond its audio and events: where the
    caller's utterances start and end, and what it still owes."""

    def flush(self) -> None:
        """The caller's utterance ended here (a final follows when the recognizer
        `finalizes_on_flush`)."""

    def flush_ended(self, behind: float) -> None:
        """The utterance ended `behind` seconds before the latest audio pushed."""

    def speech_started(self) -> None:
        """The VAD heard speech start at the latest audio pushed."""

    @property
    def finals_owed(self) -> int:
        """Flushes not yet answered by a final transcript."""


class RecognizerStream(RecognizerAbilities, Protocol):
    """One call's recognizer stream, as the engine drives it."""

    def push_frame(self, frame: rtc.AudioFrame) -> None:
        """Caller audio, in order."""

    def __aiter__(self) -> AsyncIterator[lk_stt.SpeechEvent]:
        """The stream's speech events (interim and final transcripts)."""

    async def aclose(self) -> None:
        """End the stream; idempotent."""


class Recognizer(Protocol):
    """A call's recognizer: a livekit `stt.STT` with the engine's abilities."""

    @property
    def finalizes_on_flush(self) -> bool:
        """Whether a flush brings a final the engine should wait for."""

    def stream(self) -> RecognizerStream:
        """A new stream for one call."""


@runtime_checkable
class VadAbilities(Protocol):
    """What the engine asks of a VAD stream beyond its audio and events."""

    @property
    def analysed_seconds(self) -> float | None:
        """Seconds of the pushed audio the VAD has decided (None: only its inference
        events say, and the engine reads their timestamps)."""


@runtime_checkable
class PauseWatch(Protocol):
    """A VAD stream that says when the caller pauses inside their speech (ours:
    `InlineVADStream.watch_pause`): the engine starts the end-of-turn model on it."""

    def watch_pause(self, after: float, callback: Callable[[bool], None]) -> None:
        """`callback(True)` after `after` seconds of silence while the VAD holds the caller
        speaking (once per pause), `callback(False)` when speech came back after one."""


class VadStream(VadAbilities, Protocol):
    """One call's VAD stream, as the engine drives it."""

    def push_frame(self, frame: rtc.AudioFrame) -> None:
        """Caller audio, in order."""

    def __aiter__(self) -> AsyncIterator[lk_vad.VADEvent]:
        """The stream's events (start and end of speech; inference events may be left
        out by a VAD that reports `analysed_seconds`)."""

    async def aclose(self) -> None:
        """End the stream; idempotent."""


class VoiceActivityDetector(Protocol):
    """A call's VAD: a livekit `vad.VAD` with the engine's abilities."""

    def stream(self) -> VadStream:
        """A new stream for one call."""


class _PluginRecognizerStream:
    """A livekit recognizer stream with the conservative defaults."""

    def __init__(self, inner: lk_stt.RecognizeStream) -> None:
        self._inner = inner

    def push_frame(self, frame: rtc.AudioFrame) -> None:
        self._inner.push_frame(frame)

    def flush(self) -> None:
        self._inner.flush()

    def flush_ended(self, behind: float) -> None:
        self._inner.flush()  # it cuts its own utterances: where the VAD ended is not its input

    def speech_started(self) -> None:
        """A streaming recognizer hears everything anyway."""

    @property
    def finals_owed(self) -> int:
        return 0  # unknown: the engine's `final_timeout` holds

    def __aiter__(self) -> AsyncIterator[lk_stt.SpeechEvent]:
        return self._inner.__aiter__()

    async def aclose(self) -> None:
        await self._inner.aclose()


class PluginRecognizer:
    """A streaming livekit STT plugin as a `Recognizer` (see the module docstring)."""

    def __init__(self, plugin: lk_stt.STT[Any]) -> None:
        self.plugin = plugin

    @property
    def finalizes_on_flush(self) -> bool:
        return bool(self.plugin.capabilities.manual_flush)

    def stream(self) -> RecognizerStream:
        return _PluginRecognizerStream(self.plugin.stream())


class _PluginVadStream:
    """A livekit VAD stream with the conservative default."""

    def __init__(self, inner: lk_vad.VADStream) -> None:
        self._inner = inner

    def push_frame(self, frame: rtc.AudioFrame) -> None:
        self._inner.push_frame(frame)

    @property
    def analysed_seconds(self) -> float | None:
        return None

    def __aiter__(self) -> AsyncIterator[lk_vad.VADEvent]:
        return self._inner.__aiter__()

    async def aclose(self) -> None:
        await self._inner.aclose()


class PluginVad:
    """A livekit VAD plugin as a `VoiceActivityDetector`."""

    def __init__(self, plugin: lk_vad.VAD) -> None:
        self.plugin = plugin

    def stream(self) -> VadStream:
        return _PluginVadStream(self.plugin.stream())


class _NoRecognizerAbilities:
    """A stream without the engine's abilities: the conservative defaults."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def flush(self) -> None:
        self._stream.flush()

    def flush_ended(self, behind: float) -> None:
        self._stream.flush()

    def speech_started(self) -> None:
        """It hears everything anyway."""

    @property
    def finals_owed(self) -> int:
        return 0


class _NoVadAbilities:
    @property
    def analysed_seconds(self) -> float | None:
        return None


def recognizer_abilities(stream: Any) -> RecognizerAbilities:
    """The engine's view of a recognizer stream: itself when it has the abilities, else
    the conservative defaults (a livekit plugin's stream; checked once, at composition)."""
    if isinstance(stream, RecognizerAbilities):
        return stream
    return _NoRecognizerAbilities(stream)


def vad_abilities(stream: Any) -> VadAbilities:
    """The engine's view of a VAD stream (see `recognizer_abilities`)."""
    if isinstance(stream, VadAbilities):
        return stream
    return _NoVadAbilities()


def plugin_recognizer(plugin: lk_stt.STT[Any]) -> Recognizer:
    """`plugin` for the engine, with the conservative defaults."""
    return PluginRecognizer(plugin)


def plugin_vad(plugin: lk_vad.VAD) -> VoiceActivityDetector:
    """`plugin` for the engine, with the conservative default."""
    return PluginVad(plugin)
