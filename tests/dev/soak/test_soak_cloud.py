"""`voicehub soak --stack cloud`: the research desk on Deepgram against the fake Deepgram in
a process of its own, which hears the callers' lines by their audio. Two callers for a few
seconds on an in-process server (the command starts its own; the pieces are the same)."""

from __future__ import annotations

import os
import tomllib
from collections import deque
from pathlib import Path

import pytest

from tests.e2e_helpers import running_server
from tests.support.speech import spoken
from voicehub.desks.desk import load_desks
from voicehub.errors import VoicehubError
from voicehub.server.settings import ServerSettings
from voicehub_dev.bench.soak_cloud import KEY_ENV, CloudStack, PrerenderedSpeech, on_deepgram
from voicehub_dev.fakes.deepgram_listen import ListenParams, ListenState, line_keys
from voicehub_dev.soak import SoakOptions, run_soak, soak_json
from voicehub_dev.soak.caller import CallerLines

# real-time end to end: `make test` runs it, `make check` does not
pytestmark = pytest.mark.realtime

os.environ.setdefault("HF_HUB_OFFLINE", "1")
pytest.importorskip("deepgram")

CHANNELS = Path(__file__).resolve().parents[3] / "channels"


def test_the_desk_file_is_moved_to_deepgram() -> None:
    text = on_deepgram((CHANNELS / "research.toml").read_text(), "http://127.0.0.1:9")
    voice = tomllib.loads(text)["voice"]
    assert (voice["stt"], voice["tts"]) == ("deepgram", "deepgram")
    assert voice["deepgram"] == {"base_url": "http://127.0.0.1:9", "api_key_env": KEY_ENV}
    with pytest.raises(VoicehubError, match=r"\[voice\]"):
        on_deepgram(text, "http://127.0.0.1:9")  # already on Deepgram


@pytest.fixture(scope="module")
def lines() -> CallerLines:
    return CallerLines.synthesize(spoken)


def test_the_fake_hears_a_known_line_by_its_audio_whatever_comes_before(
    lines: CallerLines,
) -> None:
    keys = line_keys(lines.all(), 16000)
    assert len(set(keys.values())) == len(lines.all())  # every line has its own opening
    text, pcm = lines.follow_ups[0]
    params = ListenParams.from_query({"interim_results": ["true"], "endpointing": ["300"]})
    state = ListenState(params, transcripts=deque(), lines=keys)
    heard = state.feed(bytes(640 * 7) + pcm + bytes(16000))  # 7 frames of silence first
    finals = [m for m in heard if m["type"] == "Results" and m["is_final"]]
    assert [m["channel"]["alternatives"][0]["transcript"] for m in finals] == [text]
    # the same words from another start (a frame in) are not a line it knows: heard empty
    later = state.feed(pcm[640 * 5 :] + bytes(16000))
    assert [m["channel"]["alternatives"][0]["transcript"] for m in later if m.get("is_final")] == [
        ""
    ]


def test_prerendered_speech_takes_the_time_the_text_takes() -> None:
    speech = PrerenderedSpeech(b"\x01\x02" * 16000, 16000)  # one second
    assert len(speech("x" * 100, 16000)) == int(100 * 0.065 * 16000) * 2
    with pytest.raises(ValueError, match="16000"):
        speech("hello", 8000)


def test_stack_cloud_starts_its_own_server() -> None:
    with pytest.raises(ValueError, match="drop --url"):
        SoakOptions(stack="cloud", url="http://127.0.0.1:1")


async def test_a_cloud_soak_answers_every_call_and_loses_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lines: CallerLines
) -> None:
    stack = CloudStack(tmp_path)
    try:
        desks_dir = await stack.start(lines.all(), CHANNELS, "research")
        for name, value in stack.environment.items():
            monkeypatch.setenv(name, value)
        settings = ServerSettings(channels_dir=desks_dir, db_path=tmp_path / "voicehub.db")
        desks = load_desks(desks_dir)
        assert desks["research"].config.voice.stt == "deepgram"
        async with running_server(settings, desks=desks) as server:
            options = SoakOptions(
                calls=2,
                minutes=0.05,
                seed=11,
                url=server.url,
                hang_up=0.0,
                barge_in=0.0,
                playout_speed=16.0,
                sample_every=1.0,
                settle_timeout=40.0,
                follow_ups=(1, 1),
            )
            result = await run_soak(options, lines=lines)
        tally = result.tally
        assert tally.failed_calls == 0 and tally.unanswered_calls == 0, soak_json(result)
        assert tally.results > 0  # the requests were heard: research was delegated
        assert tally.results_lost == 0 and tally.results_spoken_twice == 0
        cpu = stack.cpu_seconds()
        assert cpu is not None and cpu > 0
    finally:
        await stack.stop()
