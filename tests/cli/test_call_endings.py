"""Every `voicehub call` ends with a clear line and its exit code: a refused desk, a call
the server closes, a drain, a server too slow to settle, and Ctrl-C.

The server here is a stand-in speaking the call protocol (`voicehub.transports.websocket`)
on 127.0.0.1, scripted per test, so each ending is exact and fast; the refusal of a desk
whose keys are missing runs on the real server.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import pytest
from websockets.asyncio.server import ServerConnection, serve

from tests.support.signals import signal_masks, terminal_ctrl_c
from voicehub.cli import main
from voicehub.server.settings import ServerSettings
from voicehub.voice.audio import write_wav

from ..e2e_helpers import CHANNELS, running_server

Script = Callable[[ServerConnection], Awaitable[None]]
SESSION = {
    "type": "session",
    "room_id": "research:x",
    "conversation": "x",
    "desk": "research",
    "title": "Research desk",
    "resumed": False,
    "greeting": False,
}


class StandIn:
    """A WebSocket server on a free port in a thread of its own, running `script` per call."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self.loop = asyncio.new_event_loop()
        self.started = threading.Event()
        self.stop = asyncio.Event()
        self.port = 0
        self.thread = threading.Thread(target=self.loop.run_until_complete, args=(self._run(),))
        self.thread.start()
        assert self.started.wait(10)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def _run(self) -> None:
        async with serve(self.script, "127.0.0.1", 0) as server:
            self.port = next(iter(server.sockets)).getsockname()[1]
            self.started.set()
            await self.stop.wait()

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.stop.set)
        self.thread.join(10)


@pytest.fixture
def stand_in() -> Iterator[Callable[[Script], StandIn]]:
    made: list[StandIn] = []
    yield lambda script: made.append(StandIn(script)) or made[-1]
    for server in made:
        server.close()


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Half a second of a tone: the caller's line, without a speech synthesizer."""
    import numpy as np

    path = tmp_path_factory.mktemp("audio") / "line.wav"
    tone = (np.sin(np.arange(8000) * 2 * np.pi * 220 / 16000) * 8000).astype("<i2")
    write_wav(path, tone.tobytes(), 16000)
    return path


def run_call(
    capsys: pytest.CaptureFixture[str], server: str, recording: Path, tmp_path: Path, *flags: str
) -> tuple[int, str]:
    argv = ["call", "research", "--server", server, "--wav", str(recording), "--fast"]
    code = main([*argv, "--out", str(tmp_path / "agent.wav"), *flags])
    return code, capsys.readouterr().err


async def drain_refusal(socket: ServerConnection) -> None:
    message = "the server is shutting down; call another instance or try again later"
    await socket.send(json.dumps({"type": "error", "code": "draining", "message": message}))
    await socket.close(1013, "draining")


async def failed_session(socket: ServerConnection) -> None:
    await socket.send(json.dumps(SESSION))
    message = "could not start the call: ConfigError: set DEEPGRAM_API_KEY"
    await socket.send(json.dumps({"type": "error", "code": "session_failed", "message": message}))
    await socket.close(1011, "could not start the call")


async def drain_ends_the_call(socket: ServerConnection) -> None:
    await socket.send(json.dumps(SESSION))
    heard = 0
    async for message in socket:  # the caller's line, then its silence
        heard += len(message) if isinstance(message, bytes) else 0
        if heard > 16000:
            await socket.close(1001, "server shutting down")


async def never_settles(socket: ServerConnection) -> None:
    """The agent thinks forever and status requests go unanswered."""
    await socket.send(json.dumps(SESSION))
    await socket.send(json.dumps({"type": "agent_state", "state": "thinking"}))
    async for message in socket:
        if isinstance(message, str) and json.loads(message).get("type") == "hangup":
            await socket.close(1000, "hangup")


def test_a_drain_refusal_names_the_drain_and_exits_5(
    stand_in: Callable[[Script], StandIn],
    recording: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The caller tries again (1013: try again later) until --reconnect-for passes (30 s by
    default), then names the refusal."""
    refused: list[float] = []

    async def refuses(socket: ServerConnection) -> None:
        refused.append(time.monotonic())
        await drain_refusal(socket)

    server = stand_in(refuses).url
    code, err = run_call(capsys, server, recording, tmp_path, "--reconnect-for", "1")
    assert code == 5, err
    assert err.startswith("voicehub call: refused: the server is draining (shutting down)")
    assert len(refused) >= 2, refused  # it came back
    assert refused[-1] - refused[0] < 5, refused  # and gave up after 1 s, not 30


def test_reconnect_for_takes_seconds_above_0(capsys: pytest.CaptureFixture[str]) -> None:
    for bad in ("0", "-1", "soon", "inf"):
        with pytest.raises(SystemExit) as exited:
            main(["call", "research", "--say", "hi", "--reconnect-for", bad])
        assert exited.value.code == 2
        assert f"{bad!r} is not a number of seconds above 0" in capsys.readouterr().err


def test_a_desk_that_cannot_start_is_refused_with_its_reason_and_exits_3(
    stand_in: Callable[[Script], StandIn],
    recording: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, err = run_call(capsys, stand_in(failed_session).url, recording, tmp_path)
    assert code == 3, err
    assert "refused (1011): could not start the call: ConfigError: set DEEPGRAM_API_KEY" in err


def test_a_refused_call_prints_the_refusal_only(
    stand_in: Callable[[Script], StandIn],
    recording: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """No summary of a call that never ran, no agent audio file, no call-back hint."""
    argv = ["call", "research", "--server", stand_in(failed_session).url, "--fast"]
    code = main([*argv, "--wav", str(recording), "--out", str(tmp_path / "agent.wav")])
    printed = capsys.readouterr()
    assert code == 3, printed.err
    assert printed.out == ""
    assert printed.err.count("\n") == 1 and printed.err.startswith("voicehub call: refused")
    assert not (tmp_path / "agent.wav").exists()


def test_a_call_ended_by_the_drain_says_so_and_how_to_call_back(
    stand_in: Callable[[Script], StandIn],
    recording: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    server = stand_in(drain_ends_the_call).url
    code, err = run_call(capsys, server, recording, tmp_path, "--conversation", "c1")
    assert code == 5, err
    assert "the server ended the call: it is shutting down (server shutting down)" in err
    assert "call back with --conversation c1" in err
    assert "Traceback" not in err


@pytest.mark.slow
def test_a_call_that_does_not_settle_in_time_says_what_it_waited_for_and_exits_1(
    stand_in: Callable[[Script], StandIn],
    recording: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    server = stand_in(never_settles).url
    code, err = run_call(capsys, server, recording, tmp_path, "--timeout", "1")
    assert code == 1, err
    assert "timed out: the conversation did not settle within 1 s" in err
    assert "cannot reach" not in err


@pytest.mark.slow
def test_the_call_back_hint_calls_the_same_server(
    stand_in: Callable[[Script], StandIn],
    recording: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    server = stand_in(never_settles).url
    argv = ["call", "research", "--server", server, "--wav", str(recording), "--fast"]
    main([*argv, "--out", str(tmp_path / "agent.wav"), "--timeout", "1", "--conversation", "c7"])
    out = capsys.readouterr().out
    assert f"call research --server {server} --conversation c7 --say ..." in out, out


@pytest.mark.parametrize("transport", [[], ["--webrtc"]], ids=["websocket", "webrtc"])
async def test_a_desk_missing_its_keys_is_refused_on_the_real_server(
    transport: list[str],
    recording: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The caller is told why (the refusal only: no summary, no agent audio, no call-back
    hint), and the server logs the refusal, an expected event, as one warning line naming
    the key (no ERROR, no traceback). Over WebRTC the reason travels on the data channel,
    which opens after the peer connects: before, the peer was closed with the reason still
    waiting for it, and the call read as one the server ended (exit 4, 'call back')."""
    caplog.set_level(logging.INFO, logger="voicehub")
    for key in ("DEEPGRAM_API_KEY", "OPENAI_API_KEY"):
        monkeypatch.delenv(key, raising=False)
    settings = ServerSettings(channels_dir=CHANNELS, db_path=tmp_path / "v.db", prewarm=False)
    async with running_server(settings) as server:
        command = [sys.executable, "-m", "voicehub.cli", "call", "research-cloud", *transport]
        command += ["--server", server.url, "--wav", str(recording), "--fast"]
        command += ["--out", str(tmp_path / "agent.wav")]
        process = await asyncio.create_subprocess_exec(
            *command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env()
        )
        out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 3, err.decode()
    assert err.decode().count("\n") == 1, err.decode()
    assert "refused (1011)" in err.decode() and "DEEPGRAM_API_KEY" in err.decode()
    assert out.decode() == ""
    assert not (tmp_path / "agent.wav").exists()
    call_lines = [r for r in caplog.records if r.name == "voicehub.calls"]
    assert not [r.getMessage() for r in call_lines if r.exc_info or r.levelno >= logging.ERROR]
    refused = [r.getMessage() for r in call_lines if r.levelno == logging.WARNING]
    assert len(refused) == 1 and "refused" in refused[0] and "DEEPGRAM_API_KEY" in refused[0]


@pytest.mark.slow
def test_ctrl_c_hangs_up_and_exits_130(
    stand_in: Callable[[Script], StandIn], recording: Path, tmp_path: Path
) -> None:
    connected = threading.Event()

    async def holds(socket: ServerConnection) -> None:
        await socket.send(json.dumps(SESSION))
        connected.set()
        async for _ in socket:
            pass

    server = stand_in(holds).url
    command = [sys.executable, "-m", "voicehub.cli", "call", "research", "--server", server]
    command += ["--wav", str(recording), "--out", str(tmp_path / "agent.wav")]
    process = subprocess.Popen(
        command, stderr=subprocess.PIPE, text=True, env=_env(), preexec_fn=terminal_ctrl_c
    )
    try:
        assert connected.wait(60), "the caller never connected"
        process.send_signal(signal.SIGINT)
        try:
            _, err = process.communicate(timeout=60)  # bounded: it never hangs (loaded CI: slow)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"Ctrl-C unheard: {signal_masks(process.pid)}") from None
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130, err
    assert "voicehub call: interrupted (Ctrl-C): hung up" in err
    assert "Traceback" not in err


def _env() -> dict[str, str]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "VOICEHUB_TOKEN": ""}
    for key in ("DEEPGRAM_API_KEY", "OPENAI_API_KEY"):
        env.pop(key, None)
    return env
