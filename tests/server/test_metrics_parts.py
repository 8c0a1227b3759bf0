"""The pieces behind /metrics on a virtual clock: the call meter's turn-taking figures,
the timed store (on a real SQLite file), the event-loop lag probe, and registries that
stay apart between apps."""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from voicehub.core.clock import VirtualClock
from voicehub.core.store.base import RoomRecord
from voicehub.core.store.sqlite import SQLiteStore
from voicehub.server.call_meter import CallMeter, MeteredTransport
from voicehub.server.call_telemetry import VoiceToVoice
from voicehub.server.loop_health import LoopHealth
from voicehub.server.metrics import ServerMetrics
from voicehub.voice.engine.latency import TurnLatency
from voicehub.voice.events import AgentState, ServerEvent, Transcript, UserState


class Recorded:
    """A histogram or counter child that keeps what it was given."""

    def __init__(self) -> None:
        self.values: list[float] = []

    def observe(self, amount: float) -> None:
        self.values.append(amount)

    def inc(self, amount: float = 1) -> None:
        self.values.append(amount)


class Meter:
    def __init__(self, clock: VirtualClock) -> None:
        self.turns: dict[str, Recorded] = {}
        self.talk_over: dict[str, Recorded] = {}
        self.barge_ins: dict[str, Recorded] = {}
        self.meter = CallMeter(
            clock,
            turns=lambda role: self.turns.setdefault(role, Recorded()),
            talk_over=lambda speech: self.talk_over.setdefault(speech, Recorded()),
            barge_ins=lambda speech: self.barge_ins.setdefault(speech, Recorded()),
        )

    def send(self, *events: ServerEvent) -> None:
        for event in events:
            self.meter.event(event)


def test_voice_to_voice_is_the_engines_turn_latency() -> None:
    """The metric takes the engine's voice-to-voice of each answered turn (end of the
    caller's last voiced audio to the first agent audio): one definition, not the wire's
    VAD events (they come a silence window after the speech ended)."""
    series = Recorded()
    observer = VoiceToVoice(series)  # type: ignore[arg-type]
    observer.turn_measured(TurnLatency("r", 1, 10.0, voice_to_voice=1.2))
    observer.turn_measured(TurnLatency("r", 2, None))  # a typed turn: no speech end
    assert series.values == [pytest.approx(1.2)]


async def test_interim_transcripts_are_not_turns() -> None:
    clock = VirtualClock()
    m = Meter(clock)
    m.send(UserState(state="speaking"), Transcript(role="user", text="uh", final=False))
    m.send(UserState(state="listening"))
    assert "user" not in m.turns
    m.send(Transcript(role="assistant", text="Here are the results.", final=True))
    assert len(m.turns["assistant"].values) == 1


def counts(recorded: dict[str, Recorded]) -> dict[str, int]:
    return {key: len(value.values) for key, value in recorded.items()}


async def test_talk_over_is_an_agent_segment_begun_while_the_caller_speaks() -> None:
    m = Meter(VirtualClock())
    m.send(UserState(state="speaking"))
    m.meter.agent_audio()  # a segment begins over the caller
    m.meter.agent_audio()  # the same segment
    m.meter.segment_ended()
    m.meter.agent_audio()  # the next segment, the caller still speaking
    m.send(UserState(state="listening"))
    m.meter.segment_ended()
    m.meter.agent_audio()  # the caller is quiet: no talk-over
    m.meter.delivering = True
    m.send(UserState(state="speaking"))
    m.meter.agent_audio()  # mid-segment: the caller barged in, the agent did not start
    m.meter.segment_ended()
    m.meter.agent_audio()
    assert counts(m.talk_over) == {"reply": 2, "delivery": 1}


async def test_a_barge_in_is_the_caller_starting_while_the_agent_speaks() -> None:
    m = Meter(VirtualClock())
    m.send(AgentState(state="speaking"), UserState(state="speaking"))
    m.send(UserState(state="speaking"))  # a repeated state is not a new utterance
    m.send(UserState(state="listening"), AgentState(state="listening"))
    m.send(UserState(state="speaking"), UserState(state="listening"))  # the agent is quiet
    m.meter.delivering = True
    m.send(AgentState(state="thinking"))  # a generated delivery thinks first
    assert m.meter.delivering
    m.send(AgentState(state="speaking"), UserState(state="speaking"))
    m.send(AgentState(state="listening"))
    assert counts(m.barge_ins) == {"reply": 1, "delivery": 1}
    assert not m.meter.delivering  # the delivery's speech is over
    assert counts(m.talk_over) == {}


class RecordingTransport:
    """A transport that keeps every call, in order."""

    sample_rate = 8000

    def __init__(self) -> None:
        self.calls: list[tuple[str, object]] = []

    async def send_audio(self, pcm16: bytes) -> None:
        self.calls.append(("audio", len(pcm16)))

    async def mark(self, speech_id: str) -> None:
        self.calls.append(("mark", speech_id))

    async def clear(self) -> None:
        self.calls.append(("clear", None))

    async def send_event(self, event: ServerEvent) -> None:
        self.calls.append(("event", event))


async def test_the_metered_transport_passes_everything_on() -> None:
    m = Meter(VirtualClock())
    inner = RecordingTransport()
    line = MeteredTransport(inner, m.meter)
    speaking = UserState(state="speaking")
    await line.send_event(speaking)
    await line.send_audio(bytes(640))
    await line.mark("s1")
    await line.clear()
    assert line.sample_rate == 8000
    await line.send_audio(bytes(640))  # a new segment after the mark, over the caller
    await line.clear()
    assert inner.calls == [
        ("event", speaking),
        ("audio", 640),
        ("mark", "s1"),
        ("clear", None),
        ("audio", 640),
        ("clear", None),
    ]
    assert counts(m.talk_over) == {"reply": 2}


def samples(metrics: ServerMetrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = metrics.render().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


async def test_the_timed_store_records_each_operation_on_a_real_sqlite_file(
    tmp_path: Path,
) -> None:
    metrics = ServerMetrics(VirtualClock())
    sqlite = SQLiteStore(tmp_path / "v.db")
    store = metrics.timed(sqlite)
    await store.create_room(RoomRecord(id="desk:c1"))
    assert (await store.get_room("desk:c1")) is not None
    assert await store.get_room("desk:none") is None
    assert store.path == sqlite.path  # backend extras pass through
    await store.close()
    found = samples(metrics)
    name = "voicehub_store_operation_seconds_count"
    assert found[(name, (("operation", "create_room"),))] == 1
    assert found[(name, (("operation", "get_room"),))] == 2


class LateClock(VirtualClock):
    """A loop that wakes timers 40 ms late."""

    async def sleep(self, seconds: float) -> None:
        await super().sleep(seconds)
        self._now += 0.04


async def test_event_loop_lag_is_how_late_the_timer_fired() -> None:
    clock = LateClock()
    metrics = ServerMetrics(clock)
    health = LoopHealth(clock, interval=0.5, observe=metrics.loop_lag.observe)
    health.start()
    for _ in range(3):
        await clock.advance(0.5)
    await health.aclose()
    found = samples(metrics)
    count = found[("voicehub_event_loop_lag_seconds_count", ())]
    total = found[("voicehub_event_loop_lag_seconds_sum", ())]
    assert count >= 2 and abs(total - 0.04 * count) < 1e-9
    # the same ticker gives /health the worst lag since its previous read, once
    assert health.read_lag_ms() == 40.0 and health.read_lag_ms() == 0.0


def test_two_apps_count_apart() -> None:
    first, second = ServerMetrics(VirtualClock()), ServerMetrics(VirtualClock())
    first.refused("websocket", "draining")
    key = ("voicehub_calls_refused_total", (("entry", "websocket"), ("reason", "draining")))
    assert samples(first)[key] == 1
    assert key not in samples(second)


def test_the_decoder_pool_is_scraped_with_its_waits_and_timeouts() -> None:
    from prometheus_client import CollectorRegistry, generate_latest

    from voicehub.server.decoder_metrics import DecoderPoolCollector
    from voicehub.voice.providers.offline.decoder_pool import DecoderPool, DecoderPoolExhausted

    pool = DecoderPool(max_decoders=1, wait_timeout=0.0, build=object)
    registry = CollectorRegistry()
    registry.register(DecoderPoolCollector(lambda: pool))
    lent = pool.acquire()
    with pytest.raises(DecoderPoolExhausted):
        pool.acquire()  # the only decoder is busy and nothing may wait
    figures = {
        sample.name: sample.value
        for family in text_string_to_metric_families(generate_latest(registry).decode())
        for sample in family.samples
    }
    assert figures["voicehub_stt_decoders"] == 1
    assert figures["voicehub_stt_decoders_busy"] == 1
    assert figures["voicehub_stt_decoders_max"] == 1
    assert figures["voicehub_stt_decoder_waits_total"] == 1
    assert figures["voicehub_stt_decoder_timeouts_total"] == 1
    pool.release(lent, reset=False)
    assert "voicehub_stt_decoders_busy 0.0" in generate_latest(registry).decode()


def test_no_decoder_figures_while_no_pool_was_built() -> None:
    from prometheus_client import CollectorRegistry, generate_latest

    from voicehub.server.decoder_metrics import DecoderPoolCollector

    registry = CollectorRegistry()
    registry.register(DecoderPoolCollector(lambda: None))
    assert b"voicehub_stt" not in generate_latest(registry)
