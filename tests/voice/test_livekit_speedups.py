"""livekit speedups give livekit's own answers: endpointing options, local dataclasses, emit,
text-only checks, kept events and metrics bookkeeping."""

from __future__ import annotations

from typing import Any

import pytest

from voicehub.voice.livekit_speedups import install, resolve_endpointing


@pytest.mark.parametrize("mode", [None, "vad", "stt", "manual", "realtime_llm"])
@pytest.mark.parametrize("config", [None, {}, {"min_delay": 0.3, "max_delay": 1.5}])
def test_same_options_as_livekit_for_mode_names(mode: str | None, config: dict | None) -> None:
    from livekit.agents.voice.turn import _resolve_endpointing

    expected = _resolve_endpointing(config, turn_detection=mode)  # type: ignore[arg-type]
    assert resolve_endpointing(config, turn_detection=mode) == expected  # type: ignore[arg-type]


def test_a_streaming_detector_gets_the_streaming_defaults() -> None:
    from livekit.agents.voice.turn import _STREAMING_ENDPOINTING_DEFAULTS

    class Detector:  # what livekit's runtime Protocol looks for
        model = "m"
        provider = "p"

        def stream(self, **_: object) -> None:
            return None

    options = resolve_endpointing({"max_delay": 9.0}, turn_detection=Detector())
    assert options == {**_STREAMING_ENDPOINTING_DEFAULTS, "max_delay": 9.0}


def test_installed_where_the_activity_resolves_its_options() -> None:
    from livekit.agents.voice import agent_activity

    install()
    assert agent_activity._resolve_endpointing is resolve_endpointing  # type: ignore[attr-defined]


def test_a_local_dataclass_is_built_once_per_distinct_body() -> None:
    from voicehub.voice.livekit_speedups import cached_local_dataclass

    def declare(default: object = None, extra: object = 0) -> type:
        @cached_local_dataclass
        class Segment:
            text: str
            tts: object = default
            kinds = extra  # not a field

        return Segment

    first, again = declare(), declare()
    assert first is again  # the same statement, the same class
    assert again(text="a") == again("a", None) and again("a").tts is None
    other = declare(default=1)  # another default: another class
    assert other is not first and other("a").tts == 1
    unhashable = declare(extra=[])  # not cacheable: a class each time, as dataclass does
    assert unhashable is not declare(extra=[]) and unhashable("a").kinds == []

    @cached_local_dataclass(frozen=True)  # options: plain dataclass
    class Frozen:
        x: int

    with pytest.raises(AttributeError):
        Frozen(1).x = 2  # type: ignore[misc]


def test_emit_passes_each_listener_the_arguments_it_takes() -> None:
    from livekit import rtc

    from voicehub.voice.livekit_speedups import emit_with_known_arity

    emitter = rtc.EventEmitter[str]()
    got: list[tuple[str, tuple[object, ...]]] = []

    class Listener:
        def one(self, a: object) -> None:
            got.append(("method", (a,)))

    listener = Listener()
    emitter.on("e", lambda: got.append(("none", ())))
    emitter.on("e", lambda a: got.append(("one", (a,))))
    emitter.on("e", lambda *args: got.append(("all", args)))
    emitter.on("e", listener.one)

    def fails(a: object) -> None:
        raise ValueError("logged, not raised")

    emitter.on("e", fails)
    for _ in range(2):  # the second time from the remembered arities
        emit_with_known_arity(emitter, "e", 1, 2)
    assert got == 2 * [("none", ()), ("one", (1,)), ("all", (1, 2)), ("method", (1,))]

    def wrong(a: object) -> None:
        raise TypeError("raised, as livekit's emit does")

    emitter.on("t", wrong)
    with pytest.raises(TypeError):
        emit_with_known_arity(emitter, "t", 1)


def test_installed_for_the_pinned_versions_only() -> None:
    from livekit import rtc
    from livekit.agents import __version__ as agents_version
    from livekit.agents.voice import agent_activity
    from livekit.agents.voice.agent_session import AgentSession

    from voicehub.voice import livekit_speedups as speedups

    speedups.install()
    pinned = agents_version == speedups.AGENTS_VERSION
    assert (agent_activity.dataclass is speedups.cached_local_dataclass) is pinned  # type: ignore[attr-defined]
    text_only = AgentSession.__dict__["_text_only"].fget
    assert (text_only is speedups.text_only) is pinned
    assert rtc.EventEmitter.emit is speedups.emit_with_known_arity


@pytest.mark.parametrize("mode", [None, "TEXT", "AUDIO"])
def test_text_only_answers_as_livekit(mode: str | None) -> None:
    """Outside a job, and in a text or an audio simulation: livekit's own answer."""
    import contextvars

    from livekit.agents import job
    from livekit.agents.simulation import SimulationMode

    from voicehub.voice.livekit_speedups import livekit_text_only, text_only

    class Simulation:
        simulation_mode = getattr(SimulationMode, f"SIMULATION_MODE_{mode}", None)

    class Job:
        def simulation_context(self) -> object:
            return Simulation()

    def answers() -> tuple[bool, bool]:
        if mode is not None:
            job._JobContextVar.set(Job())  # type: ignore[arg-type]
        return text_only(None), livekit_text_only.fget(None)  # type: ignore[arg-type, misc]

    assert contextvars.copy_context().run(answers) == (mode == "TEXT",) * 2


async def test_a_session_outside_a_job_keeps_no_events_and_still_emits_them() -> None:
    from livekit.agents import AgentSession
    from livekit.agents.job import _JobContextVar

    from voicehub.voice.livekit_speedups import keep_no_events

    session: AgentSession[None] = AgentSession()
    heard: list[object] = []
    session.on("close", heard.append)
    token = _JobContextVar.set(object())  # type: ignore[arg-type]  # inside a job: kept
    try:
        assert not keep_no_events(session)
    finally:
        _JobContextVar.reset(token)
    session.emit("close", "first")  # type: ignore[arg-type]
    assert session._recorded_events == ["first"]  # livekit's keeping, untouched

    assert keep_no_events(session)  # no job: nobody can make the report
    session.emit("close", "second")  # type: ignore[arg-type]
    assert session._recorded_events == [] and heard == ["first", "second"]


def _llm_metrics() -> object:
    from livekit.agents.metrics import LLMMetrics
    from livekit.agents.metrics.base import Metadata

    return LLMMetrics(
        label="llm",
        request_id="r1",
        timestamp=0.0,
        duration=0.5,
        ttft=0.1,
        cancelled=False,
        completion_tokens=7,
        prompt_tokens=11,
        prompt_cached_tokens=0,
        total_tokens=18,
        tokens_per_second=14.0,
        metadata=Metadata(model_name="m", model_provider="p"),
    )


@pytest.mark.parametrize("seen", ["listener", "kept", "neither"])
async def test_metrics_are_counted_as_livekit_counts_them(seen: str) -> None:
    from types import SimpleNamespace

    from livekit.agents import AgentSession

    from voicehub.voice import livekit_speedups
    from voicehub.voice.livekit_speedups import keep_no_events, metrics_without_unseen_events

    def session() -> AgentSession[None]:
        made: AgentSession[None] = AgentSession()
        if seen != "kept":
            keep_no_events(made)
        if seen == "listener":
            made.on("session_usage_updated", lambda ev: None)
        return made

    ours, theirs = session(), session()
    emitted: dict[int, list[str]] = {id(ours): [], id(theirs): []}
    for made in (ours, theirs):
        emit = made.emit

        def counted(
            name: str, ev: object, made: AgentSession[None] = made, emit: Any = emit
        ) -> None:
            emitted[id(made)].append(name)
            emit(name, ev)  # type: ignore[arg-type]

        made.emit = counted  # type: ignore[method-assign]
    activity = SimpleNamespace(_session=ours, _realtime_spans=None)
    metrics_without_unseen_events(activity, _llm_metrics())  # type: ignore[arg-type]
    activity = SimpleNamespace(_session=theirs, _realtime_spans=None)
    livekit_speedups._livekit_on_metrics(activity, _llm_metrics())  # type: ignore[arg-type]
    assert ours.usage == theirs.usage and ours.usage.model_usage  # the tokens were counted
    assert [type(e) for e in ours._recorded_events] == [type(e) for e in theirs._recorded_events]
    assert emitted[id(theirs)] == ["metrics_collected", "session_usage_updated"]
    # built and emitted only when someone sees them
    assert emitted[id(ours)] == ([] if seen == "neither" else emitted[id(theirs)])
