"""How the server starts a desk on a call: `start_desk_call` on the embedded voice stack.

Models are loaded once per process and shared by every call (each call gets its own
streams); `prepare` loads them at startup so the first caller does not wait. Tests pass
their own `SessionFactory` (a scripted fake) to `create_app`.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Protocol

from voicehub.errors import ConfigError

if TYPE_CHECKING:
    from voicehub.desks.call_resume import CallResume
    from voicehub.desks.desk import Desk
    from voicehub.hub import Hub
    from voicehub.voice.engine.latency import TurnObserver
    from voicehub.voice.session import VoiceSession
    from voicehub.voice.transport import CallTransport

__all__ = [
    "VOICES",
    "OfflineSessionFactory",
    "SessionFactory",
    "TurnObserverSource",
    "offline_stt_name",
    "speech_to_text_for",
    "uses_pocketsphinx",
]

log = logging.getLogger("voicehub.desks")

VOICES = ("piper", "espeak")
"""Agent `voice` names the embedded stack can speak with."""


class SessionFactory(Protocol):
    """Starts the voice session of one call."""

    async def prepare(self, desks: Iterable[Desk]) -> None:
        """Check and load what the desks' calls will need (once, at startup)."""
        ...

    async def start(
        self,
        hub: Hub,
        desk: Desk,
        room_id: str,
        transport: CallTransport,
        *,
        resume: CallResume | None = None,
    ) -> VoiceSession:
        """Open (or reopen) room `room_id` for a call to `desk` and return its started
        session: the agent that has the conversation, with its tools, delivery attached,
        the desk's greeting on a new conversation only. `resume` is given when the call
        continues one another instance (or this one) lost or handed over; the call
        lifecycle speaks its words (`CallResume.words`) itself."""
        ...


class TurnObserverSource(Protocol):
    """Gives each call's session the observer of its turns' latency (metrics, traces)."""

    def turn_observer(self, desk: str, transport: str, room_id: str) -> TurnObserver | None: ...


def transport_kind(transport: CallTransport) -> str:
    """ "websocket", "twilio", "webrtc", "livekit": the module of the transport's class,
    under the wrappers that observe a call (they keep what they wrap as `inner`)."""
    inner: object = transport
    while (wrapped := getattr(inner, "inner", None)) is not None:
        inner = wrapped
    return type(inner).__module__.rsplit(".", 1)[-1]


def turn_observer_option(
    source: TurnObserverSource | None,
    accepting: Any,
    desk: Desk,
    room_id: str,
    transport: CallTransport,
) -> dict[str, Any]:
    """`{"turn_observer": ...}` for a session built by `accepting` (a class or function)
    that takes one, labelled with the call's desk and transport; {} otherwise."""
    if source is None or "turn_observer" not in inspect.signature(accepting).parameters:
        return {}
    observer = source.turn_observer(desk.name, transport_kind(transport), room_id)
    return {} if observer is None else {"turn_observer": observer}


class OfflineSessionFactory:
    """Pipeline sessions (voicehub's engine) on the embedded offline stack, or Deepgram,
    as each desk's `[voice]` table names, through `voicehub.desks.call.start_desk_call`.
    `session_options` go to `PipelineVoiceSession` (`options`, for instance).

    `batch_vad`: every call's Silero VAD runs its inferences batched with the other calls'
    (one ONNX run per 20 ms tick, `silero_batch`); False gives each call its own inferences.
    """

    def __init__(self, *, batch_vad: bool = True, **session_options: Any) -> None:
        from voicehub.voice.engine.results import PrerenderBudget

        self.session_options = session_options
        self.batch_vad = batch_vad
        # each call's turn latency observer (the server's metrics and traces), if any
        self.turn_observers: TurnObserverSource | None = None
        # One budget for the pre-rendered results of every call this server runs.
        self.prerender_budget = PrerenderBudget()
        self._stt: Any = None
        self._vads: dict[str, Any] = {}
        self._tts: dict[str, Any] = {}
        self._refused: dict[str, str] = {}  # desk name -> why its Deepgram key cannot work

    async def prepare(self, desks: Iterable[Desk]) -> None:
        """Check the desks' voices and load the STT, VADs and TTS engines they use.

        Plugins are built here, on the event loop's thread (livekit registers plugins on the
        main thread only); the slow model loading (about 2 s) runs in a worker thread.
        """
        from voicehub.desks import deepgram_stack

        models: list[Any] = []
        for desk in desks:
            if desk.config.voice.engine == "openai-realtime":
                continue  # the model runs remotely; its key is checked at call start
            self._vad(desk.config.voice.vad)
            if uses_pocketsphinx(desk) and self._stt is None:
                models.append(self._speech_to_text())  # starts its worker processes
            if offline_stt_name(desk) == "whisper":
                models.append(speech_to_text_for(desk))
            if deepgram_stack.uses_deepgram(desk):
                problem = await deepgram_stack.check_desk(desk)
                if problem is not None:  # the other desks keep serving
                    log.warning("%s; its calls will be refused", problem)
                    self._refused[desk.name] = problem
            if desk.config.voice.tts != "deepgram":
                models.append(self._text_to_speech(desk.config.voice.tts))
            models += [self._text_to_speech(name) for name in _agent_voices(desk)]
        await asyncio.to_thread(lambda: [model.prewarm() for model in models])

    async def start(
        self,
        hub: Hub,
        desk: Desk,
        room_id: str,
        transport: CallTransport,
        *,
        resume: CallResume | None = None,
    ) -> VoiceSession:
        """Run `desk` on the call with the shared models (a resumed call: see the protocol)."""
        from voicehub.desks import deepgram_stack
        from voicehub.desks.call import start_desk_call
        from voicehub.desks.keys import missing_keys
        from voicehub.voice.engine.session import PipelineVoiceSession
        from voicehub.voice.providers.deepgram import DeepgramAuthError

        if desk.config.voice.engine == "openai-realtime":
            from voicehub.desks.realtime_call import start_realtime_call
            from voicehub.voice.realtime_session import RealtimeVoiceSession

            # start_realtime_call hands its options to the session
            observing = turn_observer_option(
                self.turn_observers, RealtimeVoiceSession, desk, room_id, transport
            )
            return await start_realtime_call(hub, desk, room_id, transport, **observing)

        # Plugin objects of its own for each call (their metrics events are per object);
        # the models behind them (decoders, Piper voice, Silero) are shared per process.
        missing = missing_keys(desk)
        if missing:
            raise ConfigError("cannot start a call: " + "; ".join(missing))
        voice = desk.config.voice
        stt: Any = speech_to_text_for(desk)
        tts: Any = None if voice.tts == "deepgram" else _new_tts(voice.tts)
        if deepgram_stack.uses_deepgram(desk):
            if desk.name in self._refused:
                raise DeepgramAuthError(f"cannot start a call: {self._refused[desk.name]}")
            from voicehub.voice.transport import wire_audio_of

            rate, wire = transport.sample_rate, wire_audio_of(transport)
            if voice.stt == "deepgram":
                fallback = stt if voice.stt_fallback == "pocketsphinx" else None
                stt = deepgram_stack.new_stt(desk, rate, fallback=fallback, wire=wire)
            if voice.tts == "deepgram":
                tts = deepgram_stack.new_tts(desk, rate, wire=wire)
                tts.prewarm()  # its speak socket opens while the call starts
        try:
            session = await start_desk_call(
                hub,
                desk,
                room_id,
                transport,
                stt=stt,
                tts=tts,
                vad=self.call_vad(voice.vad),
                voices={name: _new_tts(name) for name in _agent_voices(desk)},
                # start_desk_call hands its options to the engine's session
                **turn_observer_option(
                    self.turn_observers, PipelineVoiceSession, desk, room_id, transport
                ),
                **{"prerender_budget": self.prerender_budget, **self.session_options},
            )
        except BaseException:
            if voice.tts == "deepgram":  # the speak socket it opened ahead ends here
                await tts.aclose()
            raise
        if voice.tts == "deepgram":  # this call's own plugin: its speak socket ends with it
            deepgram_stack.close_with(session, tts)
        return session

    # The objects `prepare` warms up: loading them loads the models every call then shares.

    def _speech_to_text(self) -> Any:
        if self._stt is None:
            from voicehub.voice.providers.offline import PocketSphinxSTT

            self._stt = PocketSphinxSTT()
        return self._stt

    def call_vad(self, kind: str) -> Any:
        """A VAD object of its own for one call, on the process's shared model (and, for
        Silero with `batch_vad`, the shared batcher)."""
        from voicehub.voice.providers.offline.vad import vad_for_call

        return vad_for_call(self._vad(kind))

    def _vad(self, kind: str) -> Any:
        if kind not in self._vads:
            from voicehub.voice.providers.offline import load_vad

            shared: Any = load_vad("webrtc" if kind == "webrtc" else "silero")
            if kind != "webrtc" and self.batch_vad:
                from voicehub.voice.providers.offline.silero_batch import BatchedSileroVAD

                shared = BatchedSileroVAD(shared)
            self._vads[kind] = shared
        return self._vads[kind]

    def _text_to_speech(self, kind: str) -> Any:
        if kind not in self._tts:
            self._tts[kind] = _new_tts(kind)
        return self._tts[kind]


def offline_stt_name(desk: Desk) -> str:
    """The offline recognizer of `desk`'s calls: "whisper" or "pocketsphinx", as its
    `[voice] stt` names; "auto" is Whisper wherever it can run (`whisper_unavailable`), on
    phone and wideband calls alike: tool accuracy on the phone bench, Whisper against
    PocketSphinx, is 0.956 against 0.21 on phone audio and 0.978 against 0.62 wideband,
    for somewhat more CPU (a median request: 385 against 263 ms of one core). PocketSphinx
    stands in, with a warning, when Whisper's model is missing or altered."""
    chosen = desk.config.voice.stt
    if chosen != "auto":
        return "whisper" if chosen == "whisper" else "pocketsphinx"
    from voicehub.voice.providers.offline.whisper_engine import whisper_unavailable

    problem = whisper_unavailable()
    if problem is None:
        return "whisper"
    log.warning("desk %r: stt 'auto' uses PocketSphinx: %s", desk.name, problem)
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
    (`offline_stt_name`; Deepgram, when named, is built on top: this one is then its
    fallback): Whisper biased to the desk's topics and trigger phrases, or PocketSphinx.
    The models behind them are loaded once per process."""
    from voicehub.voice.providers.offline import PocketSphinxSTT, WhisperSTT

    if offline_stt_name(desk) == "whisper":
        from voicehub.desks.vocabulary import desk_correction, desk_relisten, desk_vocabulary

        return WhisperSTT(
            vocabulary=desk_vocabulary(desk),
            relisten=desk_relisten(desk),
            correction=desk_correction(desk),
        )
    return PocketSphinxSTT()


def _new_tts(kind: str) -> Any:
    from voicehub.voice.providers.offline import ESpeakTTS, PiperTTS

    return ESpeakTTS() if kind == "espeak" else PiperTTS()


def _agent_voices(desk: Desk) -> set[str]:
    """The voices the desk's agents ask for; ConfigError for one the stack does not have."""
    wanted = {agent.voice for agent in desk.agents.values() if agent.voice is not None}
    for name in sorted(wanted - set(VOICES)):
        where = desk.config.source or f"desk {desk.name!r}"
        raise ConfigError(
            f"{where}: an agent asks for voice {name!r}; the embedded stack speaks with "
            f"{' or '.join(VOICES)}"
        )
    return wanted
