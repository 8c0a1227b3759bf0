"""livekit's tracer skips its per-span argument binding only while nothing records spans:
the spans, current spans and records are livekit's own either way."""

from __future__ import annotations

from typing import Any

import pytest

from voicehub.voice import livekit_untraced
from voicehub.voice.livekit_speedups import install


def tracer() -> Any:
    from livekit.agents.telemetry.traces import _DynamicTracer

    return _DynamicTracer("voicehub-test")  # a fresh one: the process's is left alone


def recording(tracer: Any) -> Any:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer.set_provider(provider)
    return exporter


def livekit(name: str) -> Any:
    return livekit_untraced.livekit_tracer_methods[name]


def test_installed_on_livekits_tracer() -> None:
    from livekit.agents.telemetry.traces import _DynamicTracer

    install()
    assert _DynamicTracer.start_span is livekit_untraced.start_span
    assert _DynamicTracer.use_span is livekit_untraced.use_span


def test_without_a_provider_the_spans_are_livekits_no_op_spans() -> None:
    from opentelemetry import trace

    lk = tracer()
    assert not livekit_untraced.records(lk)
    ours = livekit_untraced.start_span(lk, "turn", attributes={"a": 1})
    theirs = livekit("start_span")(lk, "turn", attributes={"a": 1})
    assert ours == theirs and not ours.is_recording()
    with livekit_untraced.start_as_current_span(lk, "reply") as span:
        inside = trace.get_current_span()
    with livekit("start_as_current_span")(lk, "reply") as their_span:
        their_inside = trace.get_current_span()
    assert (span, inside) == (their_span, their_inside)
    with livekit_untraced.use_span(lk, ours) as used:
        assert used is ours and trace.get_current_span() is ours
    with pytest.raises(TypeError):  # bad arguments fail as livekit's do
        livekit_untraced.start_span(lk, "turn", unknown=1)


def test_with_a_provider_the_spans_are_recorded_as_livekit_records_them() -> None:
    lk = tracer()
    exporter = recording(lk)
    assert livekit_untraced.records(lk)

    @livekit_untraced.start_as_current_span(lk, "decorated")
    def work() -> None:
        raise ValueError("tool failed")

    with pytest.raises(ValueError):
        work()
    livekit_untraced.start_span(lk, "plain", attributes={"k": "v"}).end()
    span = livekit_untraced.start_span(lk, "used")
    with pytest.raises(KeyError), livekit_untraced.use_span(lk, span, end_on_exit=True):
        raise KeyError("x")
    ours = exporter.get_finished_spans()
    exporter.clear()

    @livekit("start_as_current_span")(lk, "decorated")
    def their_work() -> None:
        raise ValueError("tool failed")

    with pytest.raises(ValueError):
        their_work()
    livekit("start_span")(lk, "plain", attributes={"k": "v"}).end()
    span = livekit("start_span")(lk, "used")
    with pytest.raises(KeyError), livekit("use_span")(lk, span, end_on_exit=True):
        raise KeyError("x")
    theirs = exporter.get_finished_spans()

    def shape(spans: Any) -> list[Any]:
        # the stack trace of a recorded exception has one frame more (this module's)
        def same_trace(attributes: Any) -> dict[str, Any]:
            found = dict(attributes or {})
            if "exception.stacktrace" in found:
                found["exception.stacktrace"] = "..."
            return found

        return [
            (
                s.name,
                same_trace(s.attributes),
                s.status.status_code,
                [(e.name, same_trace(e.attributes)) for e in s.events],
            )
            for s in spans
        ]

    assert shape(ours) == shape(theirs)
    assert shape(ours)[0][2].name == "ERROR"  # the decorated failure was recorded


def test_a_provider_set_later_takes_effect_at_once() -> None:
    lk = tracer()

    @livekit_untraced.start_as_current_span(lk, "later")
    def work() -> None:
        return None

    work()  # nothing records yet
    exporter = recording(lk)
    work()
    assert [span.name for span in exporter.get_finished_spans()] == ["later"]
