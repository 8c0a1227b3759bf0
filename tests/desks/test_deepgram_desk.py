"""The research-cloud desk (Deepgram voice, OpenAI model) through the `deepgram` voice stack,
against the fake Deepgram and the fake OpenAI chat server: keys, refusals, a whole call."""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.desks.desk_calls import CHANNELS, RATE, DeskCallHarness
from voicehub.desks import deepgram_stack
from voicehub.desks.deepgram_stack import DeepgramStack
from voicehub.desks.desk import Desk, build_desk
from voicehub.desks.loading import load_desk_file
from voicehub.desks.offline_stack import PipelineResources
from voicehub.desks.voice_stack import CallSpec, default_voice_stacks
from voicehub.errors import ConfigError
from voicehub.hub import Hub
from voicehub.testing import MemoryTransport
from voicehub.voice.engine.session import EngineOptions
from voicehub.voice.engine.turn_engine import TurnEngineSettings, TurnPolicy
from voicehub.voice.providers.deepgram import DeepgramSTT, DeepgramTTS
from voicehub_dev.fakes.deepgram import FakeDeepgram
from voicehub_dev.fakes.openai_chat import FakeOpenAIServer, FakeToolCall, Reply

WORDS = "please research solar panels"


@pytest.fixture
async def deepgram() -> AsyncIterator[FakeDeepgram]:
    async with FakeDeepgram() as server:
        yield server


def cloud_desk(tmp_path: Path, base_url: str | None = None) -> Desk:
    """channels/research-cloud.toml, copied with its knowledge file, pointed at `base_url`."""
    shutil.copytree(CHANNELS / "knowledge", tmp_path / "knowledge", dirs_exist_ok=True)
    text = (CHANNELS / "research-cloud.toml").read_text()
    if base_url is not None:
        text = text.replace("[voice.deepgram]\n", f'[voice.deepgram]\nbase_url = "{base_url}"\n')
    path = tmp_path / "research-cloud.toml"
    path.write_text(text)
    return build_desk(load_desk_file(path))


def test_the_desk_lists_without_keys_and_says_what_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from voicehub.desks.keys import missing_keys

    monkeypatch.delenv("DEEPGRAM_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    desk = cloud_desk(tmp_path)
    problems = missing_keys(desk)
    assert any("OPENAI_API_KEY is unset" in p for p in problems)
    assert any("set DEEPGRAM_API_KEY" in p and "research-cloud.toml" in p for p in problems)


def test_keyterms_come_from_the_desk_vocabulary(tmp_path: Path) -> None:
    desk = cloud_desk(tmp_path)
    terms = deepgram_stack.desk_keyterms(desk)
    assert terms[:3] == ("heat pumps", "solar panels", "analysts")  # [voice.deepgram] first
    assert {"research", "status", "facts"} <= set(terms)  # the agents' keywords


async def test_a_call_without_keys_is_refused_and_the_other_desks_serve(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DEEPGRAM_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    factory = default_voice_stacks()
    async with Hub() as hub:
        with pytest.raises(ConfigError) as caught:
            await factory.start(
                await CallSpec.for_room(hub, cloud_desk(tmp_path), "r1", MemoryTransport(RATE))
            )
        message = str(caught.value)
        assert message.startswith("cannot start a call: ")
        assert "DEEPGRAM_API_KEY" in message and "OPENAI_API_KEY" in message
        assert "r1" not in hub.rooms  # nothing was opened


async def test_a_missing_deepgram_key_is_named_once_at_startup(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # serve logs one warning per problem: the missing key once, not again as "refused"
    monkeypatch.delenv("DEEPGRAM_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    desk = cloud_desk(tmp_path)
    factory = default_voice_stacks()
    await factory.prepare([desk])
    problems = factory.check(desk)
    assert [p for p in problems if "DEEPGRAM_API_KEY" in p] == [
        f"{desk.config.source}: voice: Deepgram needs an API key: set DEEPGRAM_API_KEY"
        " (keys never go in desk files)"
    ], problems
    assert any("OPENAI_API_KEY" in p for p in problems)


async def test_a_refused_key_is_found_at_startup_and_calls_are_refused(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    deepgram: FakeDeepgram,
) -> None:
    monkeypatch.setenv("DEEPGRAM_API_KEY", "not-the-key")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    desk = cloud_desk(tmp_path, deepgram.url)
    assert await deepgram_stack.check_desk(desk) is not None
    factory = default_voice_stacks()
    assert factory.check(desk) == []  # the key is set: nothing known against it yet
    await factory.prepare([desk])
    [problem] = factory.check(desk)
    assert "refused the API key in DEEPGRAM_API_KEY (HTTP 401)" in problem
    async with Hub() as hub:
        with pytest.raises(ConfigError, match=r"cannot start a call: .*refused the API key"):
            await factory.start(await CallSpec.for_room(hub, desk, "r1", MemoryTransport(RATE)))


async def test_phone_calls_use_mulaw_at_8khz(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, deepgram: FakeDeepgram
) -> None:
    """A phone line (G.711 on its wire) gets mu-law both ways; a browser calling at 8 kHz
    (PCM16 on its wire) gets linear16: mu-law would be lossy there."""
    from voicehub.transports.twilio import TwilioMediaTransport

    monkeypatch.setenv("DEEPGRAM_API_KEY", deepgram.api_key)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    desk = cloud_desk(tmp_path, deepgram.url)
    expected = {"phone": "mulaw", "browser": "linear16"}
    transports = {"phone": TwilioMediaTransport("MZ1"), "browser": MemoryTransport(8000)}
    async with Hub() as hub:
        for kind, transport in transports.items():
            session = await default_voice_stacks().start(
                await CallSpec.for_room(hub, desk, f"r-{kind}", transport)
            )
            try:
                stt, tts = session.stt, session.tts
                assert isinstance(stt, DeepgramSTT) and isinstance(tts, DeepgramTTS)
                assert (stt.encoding, stt.sample_rate) == (expected[kind], 8000)
                assert (tts.encoding, tts.sample_rate) == (expected[kind], 8000)
                assert stt.fallback is not None  # stt_fallback = "pocketsphinx"
            finally:
                await session.aclose()


@pytest.mark.slow
async def test_research_by_voice_on_the_cloud_desk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, deepgram: FakeDeepgram
) -> None:
    script = [
        Reply(tool_calls=(FakeToolCall("delegate_workers", ('{"task": "solar panels"}',)),)),
        Reply(text=("My analysts are on it.",)),
    ]
    async with FakeOpenAIServer(script) as openai:
        monkeypatch.setenv("OPENAI_API_KEY", openai.api_key or "")
        monkeypatch.setenv("OPENAI_BASE_URL", openai.base_url)
        monkeypatch.setenv("DEEPGRAM_API_KEY", deepgram.api_key)
        deepgram.transcripts.append(WORDS)
        desk = cloud_desk(tmp_path, deepgram.url)
        tuned = EngineOptions(turn=TurnEngineSettings(policy=TurnPolicy("vad", vad_silence=0.55)))
        factory = DeepgramStack(PipelineResources(options=tuned))
        await factory.prepare([desk])
        async with Hub() as hub:
            transport = MemoryTransport(RATE, ack="immediate")
            session = await factory.start(await CallSpec.for_room(hub, desk, "cloud-1", transport))
            transport.session = session
            call = DeskCallHarness(session, transport)  # type: ignore[arg-type]
            try:
                await call.agent_said("What would you like me to look into?")  # the greeting
                await call.caller_says(WORDS)
                await call.agent_said("My analysts are on it.")
                # the analysts' findings, spoken once the call has been idle for a second
                found = await call.agent_said("Here is what I found.", timeout=60)
                assert "solar" in found.lower()
            finally:
                await session.aclose()
            # the call's speak socket is closed with it (no socket left open per call)
            await deepgram.wait_for(
                lambda: all({"type": "Close"} in s.messages for s in deepgram.speaks)
            )
    [request, _] = openai.requests
    user = [m for m in request.body["messages"] if m["role"] == "user"]
    assert user[-1]["content"] == WORDS  # what Deepgram heard reached the model
    assert deepgram.listens[0].params.keyterms[:2] == ("heat pumps", "solar panels")
    spoken = [m["text"] for s in deepgram.speaks for m in s.messages if m["type"] == "Speak"]
    spoken += [r["text"] for r in deepgram.rest_requests if "text" in r]
    assert any("Here is what I found." in text for text in spoken)


async def test_a_call_opens_its_speak_socket_as_it_starts_and_a_failed_start_closes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, deepgram: FakeDeepgram
) -> None:
    from voicehub.desks import deepgram_stack as module

    monkeypatch.setenv("DEEPGRAM_API_KEY", deepgram.api_key)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    desk = cloud_desk(tmp_path, deepgram.url)
    factory = default_voice_stacks()
    async with Hub() as hub:
        session = await factory.start(
            await CallSpec.for_room(hub, desk, "r1", MemoryTransport(RATE))
        )
        try:  # open before any reply needs it
            await deepgram.wait_for(lambda: len(deepgram.speaks) == 1)
            assert not deepgram.speaks[0].messages
        finally:
            await session.aclose()

        async def fails_once_the_socket_is_open(*args: object, **options: object) -> None:
            await deepgram.wait_for(lambda: len(deepgram.speaks) == 2)
            raise RuntimeError("the call's room could not open")

        monkeypatch.setattr(module, "start_pipeline_call", fails_once_the_socket_is_open)
        with pytest.raises(RuntimeError, match="could not open"):
            await factory.start(await CallSpec.for_room(hub, desk, "r2", MemoryTransport(RATE)))
        await deepgram.wait_for(lambda: all(speak.closed for speak in deepgram.speaks))
