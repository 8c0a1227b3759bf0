"""The server's traces and turn metrics, end to end.

- A real research call (the embedded stack, Piper speech streamed in real time) with the
  `OTEL_*` variables pointing at a local OTLP/HTTP collector: the collector receives one
  trace for the call with its tool call, both workers' tasks in their child rooms, their
  tool calls, and the delivery attempt that spoke the result.
- The same export over gRPC.
- A collector that never answers: calls go on unhindered, the spans beyond the queue are
  dropped and counted on /metrics.
- Per-turn stage histograms parsed from a real scrape, fed through the observer the
  server's composition gives the call's session.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from websockets.asyncio.client import connect

from tests.e2e_helpers import running_server
from tests.support.speech import spoken
from voicehub.client.call import CallClient, CallOptions
from voicehub.desks.desk import Desk, load_desks
from voicehub.desks.voice_stack import CallSpec, default_voice_stacks
from voicehub.server.settings import ServerSettings
from voicehub.telemetry.setup import TracingSettings, start_tracing
from voicehub.voice.engine.latency import TurnLatency, TurnObserver
from voicehub.voice.events import DeliveryOutcome
from voicehub_dev.fakes.otlp_collector import Blackhole, OtlpGrpcCollector, OtlpHttpCollector
from voicehub_dev.fakes.server_session import ScriptedSession, ScriptedStack

# real-time end to end: `make test` runs it, `make check` does not
pytestmark = pytest.mark.realtime

CHANNELS = Path(__file__).resolve().parents[2] / "channels"
RESEARCH = "could you research heat pumps for me please"


def research_only() -> dict[str, Desk]:
    return {"research": load_desks(CHANNELS)["research"]}


def settings(tmp_path: Path) -> ServerSettings:
    return ServerSettings(channels_dir=CHANNELS, db_path=tmp_path / "voicehub.db")


def samples(text: str) -> dict[str, float]:
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = ",".join(f'{k}="{v}"' for k, v in sorted(sample.labels.items()))
            found[f"{sample.name}{{{labels}}}"] = sample.value
    return found


async def test_a_real_call_is_one_trace_at_the_collector(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with OtlpHttpCollector() as collector:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.endpoint)
        monkeypatch.setenv("OTEL_SERVICE_NAME", "voicehub-test")
        async with running_server(
            settings(tmp_path), voice=default_voice_stacks(), desks=research_only()
        ) as server:
            options = CallOptions(
                desk="research",
                server=server.url,
                conversation="traced",
                playout_speed=16.0,
                quiet=0.5,
            )
            async with CallClient(options) as call:
                await call.wait_for_turn()
                await call.say(spoken(RESEARCH), RESEARCH)
                assert await call.settle(90)
                await call.hangup()
            [delivered] = call.report.events_of(DeliveryOutcome)
            assert delivered.outcome == "delivered"
            live = server.switchboard.calls.get("research:traced")
            if live is not None:
                await live.finished.wait()
        spans = collector.spans  # the server's shutdown exported the rest

    by_name: dict[str, list[str]] = {}
    for span in spans:
        by_name.setdefault(span.name, []).append(span.span_id)
    [call_span] = [s for s in spans if s.name == "call research"]
    assert call_span.service == "voicehub-test"
    assert call_span.attributes["voicehub.transport"] == "websocket"
    assert call_span.attributes["voicehub.conversation"] == "traced"
    trace = [s for s in spans if s.trace_id == call_span.trace_id]
    [dispatch] = [s for s in trace if s.name == "tool delegate_workers"]
    assert dispatch.parent_id == call_span.span_id
    tasks = [s for s in trace if s.name.startswith("task ")]
    assert sorted(s.name for s in tasks) == ["task analyst-a", "task analyst-b"]
    assert {s.parent_id for s in tasks} == {dispatch.span_id}
    assert sorted(s.attributes["voicehub.child_room.id"] for s in tasks) == [
        "research:traced::task-1",
        "research:traced::task-2",
    ]
    worker_tools = [s for s in trace if s.parent_id in {t.span_id for t in tasks}]
    assert worker_tools and all(s.name.startswith("tool ") for s in worker_tools)
    [attempt] = [s for s in trace if s.name == "delivery attempt"]
    assert attempt.parent_id == dispatch.span_id
    assert attempt.attributes["voicehub.delivery.outcome"] == "delivered"
    assert attempt.links == (call_span.span_id,)
    assert not any(s.error for s in trace)


def test_spans_go_out_over_grpc_too(monkeypatch: pytest.MonkeyPatch) -> None:
    with OtlpGrpcCollector() as collector:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.endpoint)
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_INSECURE", "true")
        tracing = start_tracing(TracingSettings(protocol="grpc"))
        span = tracing.tracer.start("tool lookup", room_id="r", attributes={"k": "v"})
        span.end()
        assert tracing.flush()
        tracing.shutdown()
        [received] = collector.spans
    assert received.name == "tool lookup"
    assert received.attributes == {"k": "v"}


async def test_an_unreachable_collector_never_holds_a_call_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Blackhole() as collector:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.endpoint)
        monkeypatch.setenv("OTEL_BSP_MAX_QUEUE_SIZE", "2")
        monkeypatch.setenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "1")
        factory = ScriptedStack()
        async with running_server(
            settings(tmp_path), voice=factory, desks=research_only()
        ) as server:
            took = []
            for n in range(6):  # a span per call; the first export never returns
                started = time.perf_counter()
                url = f"{server.ws_url}/desks/research/call?conversation=c-{n}"
                async with connect(url) as ws:
                    await ws.recv()  # the session event: the call is up
                    await ws.send('{"type": "hangup"}')
                    async for _ in ws:
                        pass
                live = server.switchboard.calls.get(f"research:c-{n}")
                if live is not None:
                    await live.finished.wait()
                took.append(time.perf_counter() - started)
            found = samples((await server.get("/metrics")).text)
    assert max(took) < 2.0, took  # the exporter's timeout is 10 s: no call waited for it
    assert found['voicehub_trace_spans_dropped_total{reason="queue_full"}'] >= 3
    assert found["voicehub_trace_spans_exported_total{}"] == 0


class ObservedFactory(ScriptedStack):
    """The scripted sessions, keeping the turn observer the server composes for each call
    (the pipeline stacks pass it to the engine)."""

    def __init__(self) -> None:
        super().__init__()
        self.observers: list[TurnObserver] = []

    async def start(self, call: CallSpec) -> ScriptedSession:
        assert call.turn_observer is not None
        self.observers.append(call.turn_observer)
        return await super().start(call)


def turns(room_id: str, figures: Iterable[tuple[float, float, float | None]]) -> list[TurnLatency]:
    return [
        TurnLatency(
            room_id=room_id,
            turn=n,
            speech_ended_at=10.0 * n,
            end_of_turn_delay=eot,
            llm_ttft=ttft,
            tts_ttfb=ttfb,
            voice_to_voice=eot + (ttft or 0.0) + (ttfb or 0.0),
        )
        for n, (eot, ttft, ttfb) in enumerate(figures, start=1)
    ]


async def test_turn_stages_are_histograms_by_desk_and_transport(tmp_path: Path) -> None:
    factory = ObservedFactory()
    async with running_server(settings(tmp_path), voice=factory, desks=research_only()) as server:
        async with connect(f"{server.ws_url}/desks/research/call?conversation=t") as ws:
            await ws.recv()
            [observer] = factory.observers
            for latency in turns("research:t", [(0.3, 0.08, 0.12), (0.6, 0.4, None)]):
                observer.turn_measured(latency)
            found = samples((await server.get("/metrics")).text)
            await ws.send('{"type": "hangup"}')
            async for _ in ws:
                pass
        await asyncio.sleep(0)

    def bucket(stage: str, le: str) -> float:
        labels = f'desk="research",le="{le}",stage="{stage}",transport="websocket"'
        return found[f"voicehub_turn_stage_seconds_bucket{{{labels}}}"]

    def count(stage: str) -> float:
        labels = f'desk="research",stage="{stage}",transport="websocket"'
        return found[f"voicehub_turn_stage_seconds_count{{{labels}}}"]

    assert count("end_of_turn_delay") == 2 and count("llm_ttft") == 2
    assert count("tts_ttfb") == 1  # not measured on the second turn: not counted as zero
    assert bucket("end_of_turn_delay", "0.3") == 1 and bucket("end_of_turn_delay", "0.75") == 2
    assert bucket("llm_ttft", "0.1") == 1 and bucket("llm_ttft", "0.5") == 2
    assert bucket("voice_to_voice", "0.5") == 1 and bucket("voice_to_voice", "1.0") == 2
    answered = (
        'voicehub_turns_answered_total{desk="research",interrupted="false",transport="websocket"}'
    )
    assert found[answered] == 2
