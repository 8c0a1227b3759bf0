"""`voicehub soak --stack cloud`: the soak's desk on Deepgram, against the fake Deepgram.

(In `bench`: it runs the fake, which lives here; the command composes it with the soak.)

The fake (`voicehub_dev.fakes.deepgram`) runs in a process of its own, so its CPU is
neither the server's nor the callers'; it is measured and reported. It hears the callers'
lines by their audio (`fake_deepgram_listen.line_keys`: the soak process sends it the very
PCM the callers stream). Its speech is pre-rendered: real Piper speech, rendered once before
the run and cut to the length each reply's text takes to say (the callers time the agent's
audio; they do not recognize its words), so the fake runs no synthesis during the run. Its
provider delays are `cloud_pipeline`'s (300 ms on recognition results, 200 ms to the first
byte of speech).

The server gets a copy of the desk file with `[voice]` on Deepgram, pointed at the fake
(`[voice.deepgram] base_url`), and the fake's key in the environment.
"""

from __future__ import annotations

import asyncio
import re
import shutil
import tomllib
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from voicehub.errors import VoicehubError
from voicehub_dev.fakes.child_process import ChildFake, serving_until_told

__all__ = ["KEY_ENV", "CloudStack"]

KEY_ENV = "VOICEHUB_SOAK_DEEPGRAM_KEY"
_RATE = 16000  # the WebSocket callers' rate: the desk's Deepgram hears and speaks it


_SECONDS_PER_CHARACTER = 0.065  # about 150 words a minute


class PrerenderedSpeech:
    """A synthesizer for the fake: `speech` (PCM16 at `rate`), rendered once, cut or looped
    to the time `text` takes to say."""

    def __init__(self, speech: bytes, rate: int) -> None:
        self.speech, self.rate = speech, rate

    def __call__(self, text: str, sample_rate: int) -> bytes:
        if sample_rate != self.rate:
            raise ValueError(f"pre-rendered at {self.rate} Hz, asked for {sample_rate}")
        size = int(len(text) * _SECONDS_PER_CHARACTER * self.rate) * 2
        loops = -(-size // len(self.speech))
        return (self.speech * loops)[:size]


def _serve(conn: Connection, lines: list[tuple[str, bytes]], texts: list[str]) -> None:
    """The child process: the fake Deepgram until told to stop."""

    async def serve() -> None:
        from voicehub_dev.bench.cloud_pipeline import STT_DELAY_S, TTS_FIRST_BYTE_S
        from voicehub_dev.fakes.deepgram import FakeDeepgram, piper_speech
        from voicehub_dev.fakes.deepgram_listen import line_keys

        speech = PrerenderedSpeech(piper_speech(" ".join(texts), _RATE), _RATE)
        async with FakeDeepgram(synthesize=speech) as fake:
            fake.lines = line_keys(lines, _RATE)
            fake.listen_delay, fake.speak_delay = STT_DELAY_S, TTS_FIRST_BYTE_S
            conn.send((fake.url, fake.api_key))
            await serving_until_told(conn)

    asyncio.run(serve())


class CloudStack:
    """The fake Deepgram's process and the desk folder that points at it."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.url = ""
        self.environment: dict[str, str] = {}
        self._fake: ChildFake | None = None

    async def start(
        self, lines: list[tuple[str, bytes]], channels: Path, desk: str, timeout: float = 120.0
    ) -> Path:
        """Start the fake (it hears `lines`) and write `desk` of `channels` on Deepgram;
        returns the folder of desk files to serve."""
        source = channels / f"{desk}.toml"
        if not source.is_file():
            raise VoicehubError(f"--stack cloud: no desk file {source}")
        text = source.read_text()
        self._fake = ChildFake(_serve, lines, _fixed_lines(tomllib.loads(text)))
        try:
            self.url, key = await self._fake.start(timeout)
        except VoicehubError as exc:
            raise VoicehubError(f"--stack cloud: {exc}") from None
        self.environment = {KEY_ENV: key}
        desks = self.folder / "channels"
        shutil.copytree(channels, desks, ignore=_other_desks(channels))
        (desks / source.name).write_text(on_deepgram(text, self.url))
        return desks

    def cpu_seconds(self) -> float | None:
        """CPU the fake's process used so far (user + system), None once it is gone."""
        return self._fake.cpu_seconds() if self._fake is not None else None

    async def stop(self) -> None:
        if self._fake is not None:
            await self._fake.stop()


def _other_desks(root: Path) -> Any:
    """copytree's filter: the desk files of `root` stay behind (knowledge files go)."""

    def ignore(folder: str, names: list[str]) -> list[str]:
        return [n for n in names if n.endswith(".toml")] if Path(folder) == root else []

    return ignore


def on_deepgram(desk_toml: str, url: str) -> str:
    """The desk file with its `[voice]` recognizer and voice on Deepgram at `url`."""
    text = re.sub(r'(?m)^stt\s*=\s*"[^"]*"', 'stt = "deepgram"', desk_toml, count=1)
    text = re.sub(r'(?m)^tts\s*=\s*"[^"]*"', 'tts = "deepgram"', text, count=1)
    table = f'[voice.deepgram]\nbase_url = "{url}"\napi_key_env = "{KEY_ENV}"\n\n'
    if "[voice.deepgram]" in text or '"deepgram"' not in text:
        raise VoicehubError("--stack cloud: the desk's [voice] table could not be moved")
    return re.sub(r"(?m)^\[(?!voice\b)", lambda m: table + m.group(0), text, count=1)


def _fixed_lines(desk: dict[str, Any]) -> list[str]:
    """The desk's lines that never change (greeting, delegation message, scripted replies
    without placeholders): what the fake renders before the run."""
    texts = [desk.get("greeting"), (desk.get("supervisor") or {}).get("delegation_message")]
    for agent in desk.get("agents", []):
        scripted = agent.get("scripted") or {}
        texts.append(scripted.get("fallback"))
        texts += [rule.get("reply") for rule in scripted.get("rules", [])]
    return [t for t in texts if isinstance(t, str) and t and "{" not in t]
