"""Deepgram on a desk's calls: the STT and TTS a `[voice]` table with "deepgram" asks for.

Keys come from the environment only. A desk without its key still loads, lists and
validates (`voicehub channels`); `check_desk` at server start logs the problem (a missing
key, or a key Deepgram refuses with 401) and calls to that desk are then refused with the
same message, while the other desks keep serving.
"""

from __future__ import annotations

import asyncio
import re
from typing import TYPE_CHECKING, Any

from voicehub.desks.sections import DeepgramConfig
from voicehub.voice.providers.deepgram.connection import (
    DeepgramAuthError,
    DeepgramEndpoint,
    auth_error,
)

if TYPE_CHECKING:
    from voicehub.desks.desk import Desk
    from voicehub.voice.transport import WireAudio

__all__ = ["check_desk", "desk_keyterms", "new_stt", "new_tts", "uses_deepgram"]

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
    """Why calls to `desk` cannot use Deepgram (missing or refused key), or None.

    Other failures (Deepgram unreachable at startup) do not block the desk: calls retry.
    """
    where = desk.config.source or f"desk {desk.name!r}"
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
    from voicehub.voice.providers.deepgram import DeepgramSTT

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
        fallback=fallback,
    )


def new_tts(desk: Desk, sample_rate: int, *, wire: WireAudio | None = None) -> Any:
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


def close_with(session: Any, plugin: Any) -> None:
    """Close `plugin` (its idle speak socket) when the call's voice session closes."""
    tasks: set[asyncio.Task[None]] = set()

    def closed() -> None:
        task = asyncio.get_running_loop().create_task(plugin.aclose())
        tasks.add(task)  # held until done: the loop keeps only weak references
        task.add_done_callback(tasks.discard)

    session.on_close(closed)


def require_key(desk: Desk) -> None:
    """DeepgramAuthError naming the desk file and the variable when the key is missing."""
    try:
        endpoint(desk).key()
    except DeepgramAuthError as exc:
        where = desk.config.source or f"desk {desk.name!r}"
        raise DeepgramAuthError(f"{where}: voice: {exc}") from None
