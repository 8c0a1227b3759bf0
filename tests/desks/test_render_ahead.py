"""The offline stack renders the apology at start-up (`RENDERED_AHEAD`), in the voices its
desks speak with: a caller taken up after a lost instance hears it from Piper's line cache
at once, not after it is rendered on a machine that is busy taking calls over."""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path

import pytest

from tests.desks.desk_calls import CHANNELS
from voicehub.desks import offline_stack
from voicehub.desks.call_resume import APOLOGY
from voicehub.desks.desk import Desk, build_desk
from voicehub.desks.loading import load_desk_file
from voicehub.desks.offline_stack import RENDERED_AHEAD, PipelineResources
from voicehub.voice.engine.tts_audio import one_text, synthesized_pcm
from voicehub.voice.providers.offline import PiperTTS
from voicehub.voice.providers.offline.speech_cache import CachedSpeechEngine
from voicehub.voice.providers.offline.tts_engines import load_engine


def piper_desk(tmp_path: Path) -> Desk:
    """research-cloud with Piper speaking (its recognizer stays Deepgram's, without the
    offline fallback: no recognizer model is loaded)."""
    shutil.copytree(CHANNELS / "knowledge", tmp_path / "knowledge", dirs_exist_ok=True)
    text = (CHANNELS / "research-cloud.toml").read_text()
    text = text.replace('tts = "deepgram"', 'tts = "piper"', 1)
    text = "\n".join(line for line in text.splitlines() if not line.startswith("stt_fallback"))
    path = tmp_path / "research-cloud.toml"
    path.write_text(text + "\n")
    return build_desk(load_desk_file(path))


def test_the_apology_is_rendered_ahead() -> None:
    assert APOLOGY in RENDERED_AHEAD


async def test_the_lines_are_rendered_when_the_models_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a line of this test's own: the process's engine may have said the apology already
    line = f"Sorry, I lost you for a moment, test {uuid.uuid4().hex[:6]}."
    monkeypatch.setattr(offline_stack, "RENDERED_AHEAD", (line,))
    engine = load_engine("piper")
    assert isinstance(engine, CachedSpeechEngine)
    await PipelineResources().load([piper_desk(tmp_path)])
    hits, misses = engine.hits, engine.misses
    said = b"".join(
        [pcm async for pcm in synthesized_pcm(PiperTTS(), one_text(line), 16000)]
    )  # what a call's session.say does
    assert (engine.hits, engine.misses) == (hits + 1, misses)
    assert len(said) > 16000 * 2  # more than a second of speech
