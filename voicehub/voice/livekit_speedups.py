"""Hot spots of livekit (agents 1.8.9, rtc 1.1.21; pinned) removed without changing answers.

Each patch applies only to the version it was written against (`install()` checks); on any
other version livekit runs as shipped.

- `AgentActivity.on_vad_inference_done` runs for every VAD window of every call and, while
  the caller speaks, reads `min_endpointing_delay`, which resolves the endpointing options
  anew: `_resolve_endpointing` asks `isinstance(turn_detection, _StreamingTurnDetector)`,
  a runtime-checkable Protocol, which Python 3.11 answers by collecting the Protocol's
  attributes again each time (about 40 us). When `turn_detection` is a mode name ("vad",
  "stt", ...) or None, the answer is known without asking: a string or None has none of
  the Protocol's members, so the legacy defaults apply.
- Every reply (`_pipeline_reply_task_impl`) declares a dataclass inside the function, so
  Python builds the class and its generated methods (`exec` of their source) each time,
  about 0.2 ms a reply. The class body is the same each time (its annotations are strings,
  its defaults None), so `cached_local_dataclass` builds it once.
- `AgentSession._text_only`, read through `AgentActivity.stt` at every VAD window of
  caller speech (`_interrupt_by_audio_activity`), runs two import statements each time;
  `text_only` imports them once.
- livekit's tracer binds every span's arguments to a signature, for attributes and
  exception records that a no-op tracer drops: `livekit_untraced` skips that while no
  tracer provider records spans.
- `AgentSession.emit` keeps every event of the call (state changes, transcripts, each
  metrics event: two a second from the VAD's metrics alone) for the LiveKit job's session
  report, its only reader; a session outside a job (`keep_no_events`) keeps none. Then
  `AgentActivity._on_metrics_collected` need not build the session's two events for each
  metrics event (the metrics, and a usage snapshot deep-copying every model's usage) when
  no listener takes them either: `metrics_without_unseen_events`.
- `rtc.EventEmitter.emit` computes `inspect.signature` of every listener at every event
  (session state, transcripts, metrics: dozens per turn), only to know how many positional
  arguments the listener takes. `emit_with_known_arity` remembers that per listener.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import weakref
from collections.abc import Callable
from typing import Any

from voicehub.voice import livekit_untraced
from voicehub.voice.providers import vendor_import

with vendor_import("livekit-agents"):
    from livekit import rtc
    from livekit.agents import __version__ as agents_version
    from livekit.agents.job import current_simulation, get_job_context
    from livekit.agents.simulation import SimulationMode
    from livekit.agents.voice import agent_activity, agent_session, turn
    from livekit.rtc import event_emitter
    from livekit.rtc.version import __version__ as rtc_version

__all__ = [
    "AGENTS_VERSION",
    "RTC_VERSION",
    "cached_local_dataclass",
    "emit_with_known_arity",
    "install",
    "keep_no_events",
    "livekit_text_only",
    "metrics_without_unseen_events",
    "resolve_endpointing",
    "text_only",
]

AGENTS_VERSION = "1.8.9"  # what the agent_activity patches were written against
RTC_VERSION = "1.1.21"  # what the emitter patch was written against

_livekit_resolve = turn._resolve_endpointing
_livekit_emit = rtc.EventEmitter.emit
livekit_text_only: property = agent_session.AgentSession._text_only  # type: ignore[assignment]
_emitter_log = event_emitter.logger  # type: ignore[attr-defined]  # its module's logger


def resolve_endpointing(
    config: turn.EndpointingOptions | None = None, *, turn_detection: Any = None
) -> turn.EndpointingOptions:
    """livekit's `_resolve_endpointing`, without the Protocol check for a mode name."""
    if turn_detection is None or isinstance(turn_detection, str):
        base = turn._ENDPOINTING_DEFAULTS
        return turn.EndpointingOptions(**(base if config is None else {**base, **config}))
    return _livekit_resolve(config, turn_detection=turn_detection)


def text_only(session: agent_session.AgentSession[Any]) -> bool:
    """livekit's `AgentSession._text_only`: whether a text simulation runs the session."""
    simulation = current_simulation()
    return simulation is not None and simulation.simulation_mode == _TEXT_MODE


_TEXT_MODE = SimulationMode.SIMULATION_MODE_TEXT
_local_classes: dict[tuple[Any, ...], type] = {}


def cached_local_dataclass(cls: type | None = None, /, **options: Any) -> Any:
    """`dataclasses.dataclass`, building a class declared inside a function only once.

    The cache key is everything the class statement can vary in: its qualified name, its
    annotations and the values in its body; a body that differs gets its own class.
    Decorator options, or a class with an unhashable value, go to `dataclass` as usual.
    """
    if cls is None or options or "<locals>" not in cls.__qualname__:
        return dataclasses.dataclass(cls, **options) if cls is not None else _with(options)
    body = tuple((name, value) for name, value in vars(cls).items() if not name.startswith("__"))
    key = (cls.__module__, cls.__qualname__, tuple(cls.__annotations__.items()), body)
    try:
        return _local_classes[key]
    except KeyError:
        built: type = dataclasses.dataclass(cls)
        _local_classes[key] = built
        return built
    except TypeError:  # an unhashable value in the body
        return dataclasses.dataclass(cls)


def _with(options: dict[str, Any]) -> Callable[[type], type]:
    return dataclasses.dataclass(**options)


_VAR_POSITIONAL = inspect.Parameter.VAR_POSITIONAL
_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
_arity: weakref.WeakKeyDictionary[Callable[..., Any], int | None] = weakref.WeakKeyDictionary()


def _positional_arity(callback: Callable[..., Any]) -> int | None:
    """How many positional arguments `callback` takes (None: any, it has *args)."""
    try:
        return _arity[callback]
    except (KeyError, TypeError):  # TypeError: not weakly referenceable, not cached
        pass
    params = inspect.signature(callback).parameters.values()
    arity: int | None = None
    if not any(p.kind is _VAR_POSITIONAL for p in params):
        arity = sum(1 for p in params if p.kind in _POSITIONAL)
    with contextlib.suppress(TypeError):  # not weakly referenceable: not cached
        _arity[callback] = arity
    return arity


def emit_with_known_arity(self: rtc.EventEmitter[Any], event: Any, *args: Any) -> None:
    """livekit's `EventEmitter.emit` (same calls, same error handling), with each
    listener's arity remembered instead of recomputed."""
    if event in self._events:
        for callback in list(self._events[event]):
            try:
                arity = _positional_arity(callback)
                callback(*(args if arity is None else args[:arity]))
            except TypeError:
                raise
            except Exception:
                _emitter_log.exception(f"failed to emit event {event}")


class _Unkept(list[Any]):
    """A list that keeps nothing appended to it."""

    def append(self, item: Any) -> None:
        """Drop `item`."""


def keep_no_events(session: agent_session.AgentSession[Any]) -> bool:
    """Outside a LiveKit job, stop `session` keeping its events for a session report no
    one can make (only the job makes it); True if it was stopped. Call it after `start`
    (which resets the list); listeners get every event as before."""
    if get_job_context(required=False) is not None:
        return False
    session._recorded_events = _Unkept()
    return True


_livekit_on_metrics = agent_activity.AgentActivity._on_metrics_collected
_SESSION_METRICS_EVENTS = ("metrics_collected", "session_usage_updated")


def metrics_without_unseen_events(self: agent_activity.AgentActivity, ev: Any) -> None:
    """livekit's `AgentActivity._on_metrics_collected` (1.8.9): the same bookkeeping, and
    the session's events about it built only if a listener or kept events would see them."""
    session = self._session
    listeners = session._events
    if type(session._recorded_events) is not _Unkept or any(
        name in listeners for name in _SESSION_METRICS_EVENTS
    ):
        _livekit_on_metrics(self, ev)
        return
    module: Any = agent_activity
    speech_handle = module._SpeechHandleContextVar.get(None)
    if speech_handle and isinstance(ev, (module.LLMMetrics, module.TTSMetrics)):
        ev.speech_id = speech_handle.id
    if (
        isinstance(ev, module.RealtimeModelMetrics)
        and self._realtime_spans is not None
        and (realtime_span := self._realtime_spans.pop(ev.request_id, None))
    ):
        module.trace_utils.record_realtime_metrics(realtime_span, ev)
    session._usage_collector.collect(ev)
    module.otel_metrics.collect_usage(ev)


def install() -> None:
    """Apply the patches whose livekit version is installed (idempotent)."""
    if agents_version == AGENTS_VERSION:
        agent_activity._resolve_endpointing = resolve_endpointing  # type: ignore[attr-defined]
        agent_activity.dataclass = cached_local_dataclass  # type: ignore[attr-defined]
        agent_session.AgentSession._text_only = property(text_only)  # type: ignore[method-assign, assignment]
        agent_activity.AgentActivity._on_metrics_collected = metrics_without_unseen_events  # type: ignore[method-assign]
        livekit_untraced.install()
    if rtc_version == RTC_VERSION:
        rtc.EventEmitter.emit = emit_with_known_arity  # type: ignore[method-assign]
