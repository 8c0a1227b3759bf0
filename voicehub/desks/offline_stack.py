"""The `offline` voice stack: desks' calls on the pipeline engine with the embedded models.

No key and no network: Silero (or WebRTC) VAD, Moonshine, Whisper or PocketSphinx recognition, Piper
or eSpeak NG speech. The models are loaded once per process and shared by every call
(`PipelineResources`, which the `deepgram` stack shares too); each call gets plugin
objects of its own (their metrics events are per object) over them. `prepare` loads them at
start-up so the first caller does not wait.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from voicehub.desks.call_resume import APOLOGY
from voicehub.desks.keys import missing_keys
from voicehub.desks.pipeline_call import start_pipeline_call
from voicehub.errors import ConfigError
from voicehub.voice.engine.call_parts import CallSpeech
from voicehub.voice.engine.tts_audio import one_text, synthesized_pcm

if TYPE_CHECKING:
    from voicehub.desks.desk import Desk
    from voicehub.desks.voice_stack import CallSpec
    from voicehub.voice.engine.options import EngineOptions
    from voicehub.voice.engine.session import PipelineVoiceSession

__all__ = [
    "RENDERED_AHEAD",
    "VOICES",
    "OfflineStack",
    "PipelineResources",
    "agent_voices",
    "new_tts",
    "offline_stt_name",
    "speech_to_text_for",
    "uses_pocketsphinx",
]

log = logging.getLogger("voicehub.desks")

VOICES = ("piper", "espeak")
"""Agent `voice` names the embedded stack can speak with."""

RENDERED_AHEAD = (APOLOGY,)
"""Lines rendered at start-up in every voice the desks speak with: the apology is the first
thing a caller taken up after a lost instance hears, and rendering it then (about 0.1 s of
CPU, more on a busy machine) was part of the silence after the loss."""


class PipelineResources:
    """What every pipeline call of the process shares: the offline models behind each
    call's plugins (recognizers, VADs, voices) and one budget for the results pre-rendered
    while they wait (`PrerenderBudget`).

    `batch_vad`: every call's Silero VAD runs its inferences batched with the other calls'
    (one ONNX run per 20 ms tick, `silero_batch`); False gives each call its own. `options`
    replaces each desk's engine options (tests and benchmarks tune turn-taking)."""

    def __init__(self, *, batch_vad: bool = True, options: EngineOptions | None = None) -> None:
        from voicehub.voice.engine.results import PrerenderBudget

        self.batch_vad = batch_vad
        self.options = options
        self.prerender_budget = PrerenderBudget()
        self._pocketsphinx: Any = None
        self._vads: dict[str, Any] = {}
        self._tts: dict[str, Any] = {}

    def models_for(self, desk: Desk) -> list[Any]:
        """The plugins whose `prewarm` loads the models `desk`'s calls use (VAD first,
        built here on the event loop's thread: livekit registers plugins on the main
        thread only)."""
        voice = desk.config.voice
        self.shared_vad(voice.vad)
        models: list[Any] = []
        if uses_pocketsphinx(desk) and self._pocketsphinx is None:
            models.append(self._speech_to_text())  # starts its worker processes
        if offline_stt_name(desk) in ("whisper", "moonshine"):
            models.append(speech_to_text_for(desk))
        if voice.tts != "deepgram":
            models.append(self._text_to_speech(voice.tts))
        return models + [self._text_to_speech(name) for name in agent_voices(desk)]

    async def load(self, desks: Sequence[Desk]) -> None:
        """Load the models `desks` use, in a worker thread (about 2 s), then render the
        lines their calls may have to say before anything else (`RENDERED_AHEAD`)."""
        models = [model for desk in desks for model in self.models_for(desk)]
        await asyncio.to_thread(lambda: [model.prewarm() for model in models])
        voices = {desk.config.voice.tts for desk in desks} | {
            name for desk in desks for name in agent_voices(desk)
        }
        for kind in sorted(voices & set(VOICES)):
            for line in RENDERED_AHEAD:
                await self.render_ahead(kind, line)

    async def render_ahead(self, kind: str, line: str) -> None:
        """Speak `line` once with the voice `kind`, to nobody: the engine keeps what it
        rendered (Piper's line cache), so a call saying it later plays it at once."""
        tts = self._text_to_speech(kind)
        async for _ in synthesized_pcm(tts, one_text(line), tts.sample_rate):
            pass

    def call_vad(self, kind: str) -> Any:
        """A VAD object of its own for one call, on the process's shared model (and, for
        Silero with `batch_vad`, the shared batcher)."""
        from voicehub.voice.providers.offline.vad import vad_for_call

        return vad_for_call(self.shared_vad(kind))

    def call_voices(self, desk: Desk) -> dict[str, Any]:
        """A TTS of its own for each voice `desk`'s agents ask for."""
        return {name: new_tts(name) for name in agent_voices(desk)}

    def shared_vad(self, kind: str) -> Any:
        if kind not in self._vads:
            from voicehub.voice.providers.offline import load_vad

            shared: Any = load_vad("webrtc" if kind == "webrtc" else "silero")
            if kind != "webrtc" and self.batch_vad:
                from voicehub.voice.providers.offline.silero_batch import BatchedSileroVAD

                shared = BatchedSileroVAD(shared)
            self._vads[kind] = shared
        return self._vads[kind]

    def _speech_to_text(self) -> Any:
        if self._pocketsphinx is None:
            from voicehub.voice.providers.offline import PocketSphinxSTT

            self._pocketsphinx = PocketSphinxSTT()
        return self._pocketsphinx

    def _text_to_speech(self, kind: str) -> Any:
        if kind not in self._tts:
            self._tts[kind] = new_tts(kind)
        return self._tts[kind]


class OfflineStack:
    """The `offline` voice stack (see the module)."""

    def __init__(self, shared: PipelineResources | None = None) -> None:
        self.shared = shared if shared is not None else PipelineResources()

    def check(self, desk: Desk) -> list[str]:
        """The agents' voices and model keys."""
        return [*voice_problems(desk), *missing_keys(desk)]

    async def prepare(self, desks: Sequence[Desk]) -> None:
        await self.shared.load([desk for desk in desks if not voice_problems(desk)])

    async def start(self, call: CallSpec) -> PipelineVoiceSession:
        _refuse_on(self.check(call.desk))
        shared = self.shared
        return await start_pipeline_call(
            call,
            self.call_speech(call.desk),
            options=shared.options,
            prerender_budget=shared.prerender_budget,
        )

    def call_speech(self, desk: Desk) -> CallSpeech:
        """The speech plugins of one of `desk`'s calls: a recognizer and voices of its own,
        and a VAD of its own over the process's shared model."""
        voice = desk.config.voice
        return CallSpeech(
            stt=speech_to_text_for(desk),
            tts=new_tts(voice.tts),
            vad=self.shared.call_vad(voice.vad),
            voices=self.shared.call_voices(desk),
        )

    async def aclose(self) -> None:
        return None


def _refuse_on(problems: list[str]) -> None:
    if problems:
        raise ConfigError("cannot start a call: " + "; ".join(problems))


def offline_stt_name(desk: Desk) -> str:
    """The offline recognizer of `desk`'s calls: "moonshine", "whisper" or "pocketsphinx",
    as its `[voice] stt` names. "auto" is Moonshine wherever its package runs
    (`moonshine_unavailable`: Linux x86-64), with Whisper as its second opinion: as accurate
    on the desks' requests as Whisper and a fifth of its CPU (docs/speech-recognition.md).
    Elsewhere Whisper, with a warning naming why; PocketSphinx when Whisper's model is
    missing or altered too."""
    chosen = desk.config.voice.stt
    if chosen != "auto":
        return chosen if chosen in ("whisper", "moonshine") else "pocketsphinx"
    from voicehub.voice.providers.offline.moonshine_model import moonshine_unavailable
    from voicehub.voice.providers.offline.whisper_engine import whisper_unavailable

    not_moonshine = moonshine_unavailable()
    if not_moonshine is None:
        return "moonshine"
    problem = whisper_unavailable()
    if problem is None:
        log.warning("desk %r: stt 'auto' keeps Whisper: %s", desk.name, not_moonshine)
        return "whisper"
    log.warning("desk %r: stt 'auto' uses PocketSphinx: %s; %s", desk.name, not_moonshine, problem)
    return "pocketsphinx"


def uses_pocketsphinx(desk: Desk) -> bool:
    """Whether `desk`'s calls may recognize with PocketSphinx: as their recognizer, or as
    Deepgram's fallback."""
    voice = desk.config.voice
    if voice.stt == "deepgram":
        return voice.stt_fallback == "pocketsphinx"
    return offline_stt_name(desk) == "pocketsphinx"


def speech_to_text_for(desk: Desk) -> Any:
    """A new offline STT plugin for one of `desk`'s calls, as its `[voice] stt` names
    (`offline_stt_name`; with Deepgram, the fallback it names): Moonshine corrected to the
    desk's topics (under "auto", with Whisper biased to them as its second opinion where
    Whisper runs), Whisper biased to the desk's topics and trigger phrases, or PocketSphinx.
    The models behind them are loaded once per process."""
    from voicehub.voice.providers.offline import PocketSphinxSTT

    name = offline_stt_name(desk)
    if name == "whisper":
        return _whisper_for(desk)
    if name == "moonshine":
        from voicehub.desks.vocabulary import desk_correction, desk_relisten
        from voicehub.voice.providers.offline.moonshine_stt import MoonshineSTT, SecondOpinion
        from voicehub.voice.providers.offline.whisper_engine import whisper_unavailable

        second = None
        if desk.config.voice.stt == "auto" and whisper_unavailable() is None:
            second = SecondOpinion(_whisper_for(desk), desk_relisten(desk))
        return MoonshineSTT(second_opinion=second, correction=desk_correction(desk))
    return PocketSphinxSTT()


def _whisper_for(desk: Desk) -> Any:
    from voicehub.desks.vocabulary import desk_correction, desk_relisten, desk_vocabulary
    from voicehub.voice.providers.offline import WhisperSTT

    return WhisperSTT(
        vocabulary=desk_vocabulary(desk),
        relisten=desk_relisten(desk),
        correction=desk_correction(desk),
    )


def new_tts(kind: str) -> Any:
    """A new offline TTS plugin: eSpeak NG for "espeak", else Piper."""
    from voicehub.voice.providers.offline import ESpeakTTS, PiperTTS

    return ESpeakTTS() if kind == "espeak" else PiperTTS()


def agent_voices(desk: Desk) -> set[str]:
    """The embedded voices the desk's agents ask for (the ones the stack has)."""
    return {a.voice for a in desk.agents.values() if a.voice is not None} & set(VOICES)


def voice_problems(desk: Desk) -> list[str]:
    """One message per agent voice the embedded stack does not have."""
    wanted = {agent.voice for agent in desk.agents.values() if agent.voice is not None}
    where = desk.config.source or f"desk {desk.name!r}"
    return [
        f"{where}: an agent asks for voice {name!r}; the embedded stack speaks with "
        f"{' or '.join(VOICES)}"
        for name in sorted(wanted - set(VOICES))
    ]
