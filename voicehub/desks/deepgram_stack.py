"""The `deepgram` voice stack: desks' calls on the pipeline engine with Deepgram recognizing
(`stt = "deepgram"`) and/or speaking (`tts = "deepgram"`), the embedded models for the rest.

Keys come from the environment only. A desk without its key still loads, lists and
validates (`voicehub channels`); at server start `check` names the problem (a missing key,
or a key Deepgram refused with 401 when `prepare` asked) and calls to that desk are refused
with the same message, while the other desks keep serving. Each call gets Deepgram plugins
of its own at the transport's rate (mu-law on a phone line: nothing resampled); a call's
speak socket opens as the call starts and closes with it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from voicehub.core.jobs import TaskSet
from voicehub.desks.keys import missing_keys
from voicehub.desks.offline_stack import (
    PipelineResources,
    new_tts,
    speech_to_text_for,
    voice_problems,
)
from voicehub.desks.pipeline_call import start_pipeline_call
from voicehub.desks.sections import DeepgramConfig
from voicehub.errors import ConfigError
from voicehub.voice.engine.call_parts import CallSpeech
from voicehub.voice.providers.deepgram.connection import (
    DeepgramAuthError,
    DeepgramEndpoint,
    auth_error,
)
from voicehub.voice.transport import wire_audio_of

if TYPE_CHECKING:
    from voicehub.desks.desk import Desk
    from voicehub.desks.voice_stack import CallSpec
    from voicehub.voice.engine.session import PipelineVoiceSession
    from voicehub.voice.transport import WireAudio

__all__ = [
    "DeepgramStack",
    "check_desk",
    "desk_keyterms",
    "new_deepgram_tts",
    "new_stt",
    "uses_deepgram",
]

MAX_KEYTERMS = 50  # Deepgram bounds the prompt (about 500 tokens); the desk's words come first
_SPEAKABLE_RATES = (8000, 16000, 24000, 32000, 48000)  # Aura's streaming rates
_GROUPS = re.compile(r"\(\?P<\w+>[^)]*\)|\\.")


def uses_deepgram(desk: Desk) -> bool:
    voice = desk.config.voice
    return "deepgram" in (voice.stt, voice.tts)


def settings(desk: Desk) -> DeepgramConfig:
    return desk.config.voice.deepgram or DeepgramConfig()


def endpoint(desk: Desk) -> DeepgramEndpoint:
    config = settings(desk)
    if config.base_url is None:
        return DeepgramEndpoint(api_key_env=config.api_key_env)
    return DeepgramEndpoint(api_key_env=config.api_key_env, base_url=config.base_url)


def desk_keyterms(desk: Desk) -> tuple[str, ...]:
    """The words the desk cares about: `[voice.deepgram] keyterms`, agents' keywords, the
    phrases of scripted rules and the literal words of their regexes."""
    terms: list[str] = list(settings(desk).keyterms)
    for agent in desk.config.agents:
        terms += agent.keywords
        for rule in agent.scripted.rules if agent.scripted is not None else ():
            terms += [phrase for phrase in rule.match if phrase != "*"]
            if rule.regex is not None:
                terms += re.findall(r"[A-Za-z]{3,}", _GROUPS.sub(" ", rule.regex))
    unique = dict.fromkeys(term.strip().lower() for term in terms if term.strip())
    return tuple(unique)[:MAX_KEYTERMS]


async def check_desk(desk: Desk) -> str | None:
    """Why Deepgram refuses `desk`'s key (401/403), or None.

    A missing key is `missing_keys`' to name (once); other failures (Deepgram unreachable at
    startup) do not block the desk: calls retry.
    """
    where = desk.config.source or f"desk {desk.name!r}"
    try:
        endpoint(desk).key()
    except DeepgramAuthError:
        return None  # nothing to ask Deepgram with
    try:
        client = endpoint(desk).client()
        await client.manage.v1.projects.list()
    except DeepgramAuthError as exc:
        return f"{where}: {exc}"
    except Exception as exc:
        refused = auth_error(exc, endpoint(desk))
        return f"{where}: {refused}" if refused is not None else None
    return None


def _mulaw(sample_rate: int, wire: WireAudio | None) -> bool:
    """Whether a call at `sample_rate` over a `wire` goes to Deepgram as mu-law: a phone's
    G.711 at 8 kHz (exact both ways); not a browser's PCM16 at 8 kHz (mu-law would be
    lossy). Without a `wire`, 8 kHz is taken for a phone line."""
    if sample_rate != 8000:
        return False
    return wire is None or (wire.encoding, wire.sample_rate) == ("mulaw", 8000)


def new_stt(
    desk: Desk, sample_rate: int, fallback: Any = None, *, wire: WireAudio | None = None
) -> Any:
    """A DeepgramSTT for one call at the transport's rate; mu-law on a phone line (as its
    `wire` carries it: `voicehub.voice.transport.wire_audio_of`), no resampling."""
    from voicehub.voice.providers.deepgram import DeepgramLink, DeepgramSTT

    config = settings(desk)
    return DeepgramSTT(
        endpoint=endpoint(desk),
        model=config.model,
        language=config.language,
        sample_rate=sample_rate,
        encoding="mulaw" if _mulaw(sample_rate, wire) else "linear16",
        endpointing_ms=config.endpointing or None,
        utterance_end_ms=config.utterance_end or None,
        keyterms=desk_keyterms(desk),
        link=DeepgramLink(fallback=fallback),
    )


def new_deepgram_tts(desk: Desk, sample_rate: int, *, wire: WireAudio | None = None) -> Any:
    """A DeepgramTTS for one call, at the transport's rate when Aura can speak it, in the
    transport's own encoding on a phone line (mu-law at 8 kHz: nothing resampled, and
    G.711's decode for livekit and the transport's encode round-trip exactly)."""
    from voicehub.voice.providers.deepgram import DeepgramTTS

    rate = sample_rate if sample_rate in _SPEAKABLE_RATES else 24000
    return DeepgramTTS(
        endpoint=endpoint(desk),
        model=settings(desk).voice,
        sample_rate=rate,
        encoding="mulaw" if _mulaw(rate, wire) else "linear16",
    )


def require_key(desk: Desk) -> None:
    """DeepgramAuthError naming the desk file and the variable when the key is missing."""
    try:
        endpoint(desk).key()
    except DeepgramAuthError as exc:
        where = desk.config.source or f"desk {desk.name!r}"
        raise DeepgramAuthError(f"{where}: voice: {exc}") from None


class DeepgramStack:
    """The `deepgram` voice stack (see the module), on the process's shared offline
    models for its VAD, its offline fallback and an offline voice."""

    def __init__(self, shared: PipelineResources | None = None) -> None:
        self.shared = shared if shared is not None else PipelineResources()
        self._refused: dict[str, str] = {}  # desk name -> why Deepgram refuses its key
        self._closing = TaskSet("deepgram speak sockets")

    def check(self, desk: Desk) -> list[str]:
        """The agents' voices, the keys, and a key Deepgram refused at `prepare`."""
        refused = [self._refused[desk.name]] if desk.name in self._refused else []
        return [*voice_problems(desk), *missing_keys(desk), *refused]

    async def prepare(self, desks: Sequence[Desk]) -> None:
        """Load the offline models the desks use and ask Deepgram whether their keys
        work (a desk whose key is refused: `check` says so, and its calls are refused)."""
        for desk in desks:
            self._refused.pop(desk.name, None)
            problem = await check_desk(desk)
            if problem is not None:  # the other desks keep serving
                self._refused[desk.name] = problem
        await self.shared.load([desk for desk in desks if not voice_problems(desk)])

    async def start(self, call: CallSpec) -> PipelineVoiceSession:
        problems = self.check(call.desk)
        if problems:
            error = DeepgramAuthError if call.desk.name in self._refused else ConfigError
            raise error("cannot start a call: " + "; ".join(problems))
        desk, shared, transport = call.desk, self.shared, call.transport
        voice = desk.config.voice
        rate, wire = transport.sample_rate, wire_audio_of(transport)
        stt: Any = speech_to_text_for(desk)
        if voice.stt == "deepgram":
            fallback = stt if voice.stt_fallback == "pocketsphinx" else None
            stt = new_stt(desk, rate, fallback=fallback, wire=wire)
        if voice.tts == "deepgram":
            tts = new_deepgram_tts(desk, rate, wire=wire)
            tts.prewarm()  # its speak socket opens while the call starts
        else:
            tts = new_tts(voice.tts)
        providers = CallSpeech(
            stt=stt,
            tts=tts,
            vad=shared.call_vad(voice.vad),
            voices=shared.call_voices(desk),
        )
        try:
            session = await start_pipeline_call(
                call, providers, options=shared.options, prerender_budget=shared.prerender_budget
            )
        except BaseException:
            if voice.tts == "deepgram":  # the speak socket it opened ahead ends here
                await tts.aclose()
            raise
        if voice.tts == "deepgram":  # this call's own plugin: its socket ends with it

            def close_speak_socket() -> None:
                self._closing.start(tts.aclose(), name=f"{call.room_id}: speak socket")

            session.on_close(close_speak_socket)
        return session

    async def aclose(self) -> None:
        await self._closing.wait()
