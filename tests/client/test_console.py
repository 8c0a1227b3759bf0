"""`voicehub console` on a file-backed sound device: the "microphone" is a recording read in
20 ms blocks, the "speakers" a buffer the output callback fills, both on threads of their
own as PortAudio's callbacks are, behind sounddevice's own `RawInputStream` and
`RawOutputStream` shapes. The server is the real one, with scripted sessions."""

from __future__ import annotations

import asyncio
import io
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.e2e_helpers import CHANNELS, running_server
from tests.support.waiting import until
from voicehub.cli import main
from voicehub.client.console import ConsoleCall, ConsoleOptions, Speaker, load_sounddevice
from voicehub.client.endings import CallRefused
from voicehub.desks.desk import load_desks
from voicehub.errors import MissingExtraError
from voicehub.server.settings import ServerSettings
from voicehub_dev.fakes.server_session import ScriptedStack

ANSWER = "Sure, I'll have my analysts look into heat pumps."
BLOCK = 640  # 20 ms of 16 kHz PCM16


class FileBackedSound:
    """A `sounddevice`-shaped module: the input plays `microphone` (then silence), the
    output records what it is given into `speaker`; blocks every 20 ms / `speed`."""

    def __init__(self, microphone: bytes, speed: float = 4.0) -> None:
        self.microphone = microphone
        self.speaker = bytearray()
        self.speed = speed
        self.opened: list[dict[str, Any]] = []

    def RawInputStream(self, **settings: Any) -> _Stream:
        self.opened.append(settings)
        source = io.BytesIO(self.microphone)

        def tick(callback: Callable[..., None]) -> None:
            block = source.read(BLOCK).ljust(BLOCK, b"\0")
            callback(memoryview(block), BLOCK // 2, None, None)

        return _Stream(tick, settings, self.speed)

    def RawOutputStream(self, **settings: Any) -> _Stream:
        self.opened.append(settings)

        def tick(callback: Callable[..., None]) -> None:
            block = bytearray(BLOCK)
            callback(block, BLOCK // 2, None, None)
            self.speaker += block

        return _Stream(tick, settings, self.speed)

    def query_devices(self) -> str:
        return "0 file-backed microphone, 1 file-backed speakers"


class _Stream:
    def __init__(self, tick: Callable[[Callable[..., None]], None], settings: Any, speed: float):
        self.tick, self.callback = tick, settings["callback"]
        self.period = 0.02 / speed
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.stopped.wait(self.period):  # the device's own clock
            self.tick(self.callback)

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.stopped.set()
        self.thread.join(5)

    def close(self) -> None:
        pass


def tone(seconds: float) -> bytes:
    samples = np.arange(int(16000 * seconds))
    return (np.sin(samples * 2 * np.pi * 220 / 16000) * 8000).astype("<i2").tobytes()


def test_the_speaker_reports_a_mark_once_its_audio_played_and_clear_drops_the_rest() -> None:
    speaker = Speaker()
    speaker.write(b"\1" * 1000)
    speaker.mark("m1")
    assert speaker.fill(640) == (b"\1" * 640, [])
    assert speaker.fill(640) == (b"\1" * 360 + bytes(280), ["m1"])
    speaker.write(b"\2" * 1000)
    speaker.mark("m2")
    speaker.clear()  # the caller barged in: m2 never played
    assert speaker.fill(640) == (bytes(640), [])


async def test_a_console_call_talks_hears_and_acks_what_played(tmp_path: Path) -> None:
    desks = load_desks(CHANNELS)
    settings = ServerSettings(channels_dir=CHANNELS, db_path=tmp_path / "v.db")
    factory = ScriptedStack(answer=ANSWER)
    words = tone(0.6)
    sound = FileBackedSound(words)
    out = io.StringIO()
    async with running_server(settings, voice=factory, desks=desks) as server:
        console = ConsoleCall(
            ConsoleOptions(desk="research", server=server.url, conversation="console-1"),
            sound=sound,
            out=out,
        )
        call = asyncio.create_task(console.run())
        await until(lambda: len(factory.sessions) == 1)
        [session] = factory.sessions
        await until(lambda: len(session.confirmed) == 2)  # the greeting, then the answer
        await console.hangup()
        report = await asyncio.wait_for(call, 10)
    assert session.said[1] == ANSWER
    assert bytes(session.caller_audio[: len(words)]) == words  # the microphone, unchanged
    assert len(session.caller_audio) % BLOCK == 0  # whole 20 ms frames
    printed = out.getvalue()
    assert '"Hello, you have reached the research desk.' in printed
    assert f'agent     "{ANSWER}"' in printed
    assert report.close_code == 1000 and not report.closed_by_server
    assert {s["samplerate"] for s in sound.opened} == {16000}
    assert {s["dtype"] for s in sound.opened} == {"int16"}


async def test_an_unknown_desk_is_refused(tmp_path: Path) -> None:
    settings = ServerSettings(channels_dir=CHANNELS, db_path=tmp_path / "v.db")
    async with running_server(
        settings, voice=ScriptedStack(), desks=load_desks(CHANNELS)
    ) as server:
        console = ConsoleCall(
            ConsoleOptions(desk="nope", server=server.url), sound=FileBackedSound(b"")
        )
        with pytest.raises(CallRefused, match=r"refused \(4404\): unknown desk 'nope'"):
            await console.run()


def test_without_the_sound_library_the_error_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "sounddevice", None)
    with pytest.raises(MissingExtraError, match=r"pip install 'voicehub\[console\]'"):
        load_sounddevice()
    assert main(["console", "research"]) == 2
    assert "voicehub[console]" in capsys.readouterr().err


def test_list_devices(capsys: pytest.CaptureFixture[str]) -> None:
    from voicehub.cli import console

    parsed = _parse(["console", "--list-devices"])
    assert console.run(parsed, sound=FileBackedSound(b"")) == 0
    assert "file-backed microphone" in capsys.readouterr().out


def _parse(argv: list[str]) -> Any:
    import argparse

    from voicehub.cli import console

    parser = argparse.ArgumentParser(prog="voicehub")
    console.add_parser(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(argv)
