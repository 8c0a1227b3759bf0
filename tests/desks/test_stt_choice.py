"""`[voice] stt` picks the offline recognizer of a desk's calls: PocketSphinx, Whisper
(biased to the desk's vocabulary) or Moonshine, or "auto" (the default): Moonshine with
Whisper as its second opinion where Moonshine's package runs, else Whisper, else
PocketSphinx."""

from __future__ import annotations

import logging
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from voicehub.desks.desk import Desk, load_desks
from voicehub.desks.loading import load_desk_file
from voicehub.desks.offline_stack import offline_stt_name, speech_to_text_for
from voicehub.desks.vocabulary import desk_correction, desk_relisten, desk_vocabulary
from voicehub.errors import ConfigError
from voicehub.voice.providers.offline import (
    PocketSphinxSTT,
    WhisperSTT,
    moonshine_model,
    whisper_engine,
)
from voicehub.voice.providers.offline.moonshine_stt import MoonshineSTT

CHANNELS = Path(__file__).resolve().parents[2] / "channels"


def research_with(folder: Path, stt_line: str) -> Path:
    """A copy of the research desk (and its knowledge file) with `stt = ...` replaced."""
    shutil.copytree(CHANNELS / "knowledge", folder / "knowledge")
    lines = (CHANNELS / "research.toml").read_text().splitlines()
    chosen = [number for number, line in enumerate(lines) if line.startswith("stt = ")]
    assert len(chosen) == 1
    lines[chosen[0]] = stt_line
    path = folder / "research.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def research_desk(folder: Path, stt_line: str) -> Desk:
    research_with(folder, stt_line)
    return load_desks(folder)["research"]


def test_a_desk_choosing_whisper_gets_whisper_biased_to_its_vocabulary(tmp_path: Path) -> None:
    desk = research_desk(tmp_path, 'stt = "whisper"')
    assert desk.config.voice.stt == "whisper"
    stt = speech_to_text_for(desk)
    assert isinstance(stt, WhisperSTT)
    # The knowledge topics and the front agent's trigger phrases, from the desk's files.
    for phrase in ("wind turbines", "heat pumps", "dig into", "read up on", "never mind"):
        assert phrase in stt.prompt
    assert "good morning" not in stt.prompt  # a greeting calls no tool: not worth biasing for
    assert desk_vocabulary(desk)[0] == "solar panels"  # topics first


@pytest.mark.usefixtures("fresh_whisper_check")
def test_auto_is_the_default_and_the_example_desks_use_it(tmp_path: Path) -> None:
    desk = research_desk(tmp_path, "")
    assert desk.config.voice.stt == "auto"
    assert isinstance(speech_to_text_for(desk), MoonshineSTT)
    for name, example in load_desks(CHANNELS).items():
        if example.config.voice.engine == "pipeline" and example.config.voice.stt != "deepgram":
            assert example.config.voice.stt == "auto", name


def test_an_unknown_stt_name_is_refused_naming_the_file_and_the_choices(tmp_path: Path) -> None:
    path = research_with(tmp_path, 'stt = "vosk"')
    with pytest.raises(ConfigError) as caught:
        load_desk_file(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: ")
    assert (
        "voice.stt: Input should be 'pocketsphinx', 'whisper', 'moonshine', 'auto' or 'deepgram'"
        in message
    )


@pytest.fixture
def fresh_whisper_check() -> Iterator[None]:
    """`whisper_unavailable` and `moonshine_unavailable` are cached per process: each test
    sees its own answer."""
    whisper_engine.whisper_unavailable.cache_clear()
    moonshine_model.moonshine_unavailable.cache_clear()
    yield
    whisper_engine.whisper_unavailable.cache_clear()
    moonshine_model.moonshine_unavailable.cache_clear()


@pytest.mark.usefixtures("fresh_whisper_check")
def test_auto_chooses_moonshine_with_whisper_as_its_second_opinion(tmp_path: Path) -> None:
    desk = research_desk(tmp_path, 'stt = "auto"')
    assert desk.config.voice.stt == "auto"
    assert offline_stt_name(desk) == "moonshine"
    stt = speech_to_text_for(desk)
    assert isinstance(stt, MoonshineSTT)
    second = stt.second_opinion
    assert second is not None and second.relisten == desk_relisten(desk)
    assert "wind turbines" in second.whisper.prompt  # biased like an explicit whisper desk


@pytest.mark.usefixtures("fresh_whisper_check")
def test_an_explicit_moonshine_desk_is_heard_by_moonshine_alone(tmp_path: Path) -> None:
    desk = research_desk(tmp_path, 'stt = "moonshine"')
    stt = speech_to_text_for(desk)
    assert isinstance(stt, MoonshineSTT) and stt.second_opinion is None


@pytest.mark.usefixtures("fresh_whisper_check")
def test_auto_keeps_whisper_where_moonshine_cannot_run_and_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(moonshine_model.platform, "machine", lambda: "aarch64")
    desk = research_desk(tmp_path, 'stt = "auto"')
    with caplog.at_level(logging.WARNING, logger="voicehub.desks"):
        assert offline_stt_name(desk) == "whisper"
    stt = speech_to_text_for(desk)
    assert isinstance(stt, WhisperSTT) and "wind turbines" in stt.prompt
    [first, *_] = [r.getMessage() for r in caplog.records]
    assert "stt 'auto' keeps Whisper" in first and "Linux x86-64 only" in first


@pytest.mark.usefixtures("fresh_whisper_check")
def test_auto_falls_back_to_pocketsphinx_naming_why_when_whisper_cannot_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # The installed model no longer matches its pinned hash, as after a tampered upgrade.
    altered = {**whisper_engine.MODEL_FILES, "model.bin": "0" * 64}
    monkeypatch.setattr(whisper_engine, "MODEL_FILES", altered)
    monkeypatch.setattr(moonshine_model.platform, "machine", lambda: "aarch64")
    desk = research_desk(tmp_path, 'stt = "auto"')
    with caplog.at_level(logging.WARNING, logger="voicehub.desks"):
        assert offline_stt_name(desk) == "pocketsphinx"
        assert isinstance(speech_to_text_for(desk), PocketSphinxSTT)
    [first, *_] = [r.getMessage() for r in caplog.records]
    assert "stt 'auto' uses PocketSphinx" in first and "model.bin" in first


@pytest.mark.usefixtures("fresh_whisper_check")
def test_an_explicit_choice_is_kept(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    assert offline_stt_name(research_desk(tmp_path / "a", 'stt = "pocketsphinx"')) == (
        "pocketsphinx"
    )
    (tmp_path / "b").mkdir()
    assert offline_stt_name(research_desk(tmp_path / "b", 'stt = "whisper"')) == "whisper"


def test_whisper_listens_again_for_the_desks_requests_and_topics(tmp_path: Path) -> None:
    desk = research_desk(tmp_path, 'stt = "whisper"')
    stt = speech_to_text_for(desk)
    assert isinstance(stt, WhisperSTT)
    relisten = stt.relisten
    assert relisten is not None and relisten == desk_relisten(desk)
    assert desk.knowledge is not None and list(relisten.topics) == desk.knowledge.topics
    # The front agent's rules decide what is a request: a tool-calling rule, not a greeting.
    assert relisten.is_request("could you read up on wind turbines")
    assert not relisten.is_request("good morning")
    assert relisten.believes("could you read up on wind turbines")
    assert not relisten.believes("could you read up on the history of Rome")
    # A request about none of the topics is listened to again; one about a topic is not.
    assert relisten.listens_again("could you read up on the history of Rome")
    assert not relisten.listens_again("could you read up on wind turbines")
    # The second listening is primed with the desk's requests as sentences.
    assert relisten.prompt.startswith("Research solar panels. Look into wind turbines.")
    assert "Any news." in relisten.prompt and "hello" not in relisten.prompt.lower()


def test_a_desk_without_knowledge_topics_is_heard_once() -> None:
    desks = load_desks(CHANNELS)
    assert desks["triage"].knowledge is None
    assert desk_relisten(desks["triage"]) is None


def test_whisper_corrects_what_it_hears_to_the_desks_topics(tmp_path: Path) -> None:
    desk = research_desk(tmp_path, 'stt = "whisper"')
    stt = speech_to_text_for(desk)
    assert isinstance(stt, WhisperSTT)
    correction = stt.correction
    assert correction is not None and correction == desk_correction(desk)
    assert desk.knowledge is not None and list(correction.topics) == desk.knowledge.topics
    assert correction.correct("what is installation") == "what is insulation"


def test_a_desk_without_knowledge_topics_is_not_corrected() -> None:
    assert desk_correction(load_desks(CHANNELS)["triage"]) is None
