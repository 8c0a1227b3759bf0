"""What the faults bench injects with: the control file the servers' recognizers and voices
obey, the Redis proxy's reading of commands, and the small disk it fills."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from voicehub.core.clock import settle
from voicehub.voice.providers import vendor_import
from voicehub_dev.bench.faults.disk import SmallDisk
from voicehub_dev.fakes.redis_proxy import command_count
from voicehub_dev.fakes.speech_faults import FaultControl, FaultySTT, faulty_tts

with vendor_import("livekit-agents"):
    from livekit import rtc
    from livekit.agents import APIConnectionError, stt
    from livekit.agents.language import LanguageCode


def frame() -> rtc.AudioFrame:
    return rtc.AudioFrame(bytes(640), 16000, 1, 320)


class Stream:
    def __init__(self) -> None:
        self.sink: Callable[[Any], None] | None = None
        self.finals_owed = 0

    def deliver_to(self, sink: Callable[[Any], None]) -> None:
        self.sink = sink

    def push_frame(self, frame: rtc.AudioFrame) -> None:
        pass

    def flush(self) -> None:
        pass

    def flush_ended(self, behind: float) -> None:
        pass

    def speech_started(self) -> None:
        pass

    async def aclose(self) -> None:
        pass


class Recognizer:
    capabilities = stt.STTCapabilities(streaming=True, interim_results=False)

    def __init__(self) -> None:
        self.streams: list[Stream] = []

    def stream(self) -> Stream:
        self.streams.append(Stream())
        return self.streams[-1]


def order(control: FaultControl, **faults: Any) -> None:
    control.path.write_text(json.dumps(faults))
    os.utime(control.path, ns=(1, control.path.stat().st_mtime_ns + 1000))
    control.read()


def final(text: str) -> stt.SpeechEvent:
    return stt.SpeechEvent(
        type=stt.SpeechEventType.FINAL_TRANSCRIPT,
        alternatives=[stt.SpeechData(language=LanguageCode("en"), text=text)],
    )


async def test_the_recognizer_fails_or_holds_its_finals_as_the_file_says(tmp_path: Path) -> None:
    control = FaultControl(tmp_path / "faults.json")
    recognizer = Recognizer()
    stream = FaultySTT(recognizer, control).stream()
    events = aiter(stream)
    order(control, stt="hang")
    inner = recognizer.streams[0]
    assert inner.sink is not None
    inner.sink(final("heat pumps"))
    assert stream.finals_owed == 1  # held: the engine is told it is still owed
    order(control)
    await settle()
    assert (await anext(events)).alternatives[0].text == "heat pumps"
    order(control, stt_raise=1)
    with pytest.raises(RuntimeError):
        stream.push_frame(frame())
    with pytest.raises(APIConnectionError):
        await anext(events)
    later = FaultySTT(recognizer, control).stream()
    later.push_frame(frame())  # opened after the order: not failed by it


async def test_the_voice_raises_or_waits_as_the_file_says(tmp_path: Path) -> None:
    control = FaultControl(tmp_path / "faults.json")

    class Voice:
        capabilities = None
        sample_rate = 16000

        async def speak_pcm(self, texts: Any) -> Any:
            async for text in texts:
                yield text.encode()

    async def texts() -> Any:
        yield "hello"

    voice = faulty_tts(Voice(), control)
    order(control, tts="raise")
    with pytest.raises(APIConnectionError):
        await anext(aiter(voice.speak_pcm(texts())))  # type: ignore[attr-defined]
    order(control, tts="hang")
    spoken = aiter(voice.speak_pcm(texts()))  # type: ignore[attr-defined]
    task = asyncio.ensure_future(anext(spoken))
    await settle()
    assert not task.done()
    order(control)
    await settle()
    assert await task == b"hello"


def test_the_proxy_reads_whole_commands_only() -> None:
    one = b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n"
    assert command_count(one + b"PING\r\n" + one[:9]) == (2, one[:9])
    assert command_count(b"") == (0, b"")


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")
async def test_the_small_disk_fills_and_frees(tmp_path: Path) -> None:
    async with SmallDisk(tmp_path / "disk", megabytes=1) as disk:
        assert not disk.full()
        assert disk.fill() > 900_000
        assert disk.full()
        disk.free()
        assert not disk.full()
