"""`voicehub serve --reload`: a changed desk file serves the next call, a live call keeps
the version it started with, and a broken file is reported with its line while the last
good version goes on serving."""

from __future__ import annotations

import asyncio
import logging
import shutil
from pathlib import Path

import pytest

from tests.e2e_helpers import CHANNELS, running_server
from voicehub.client.call import CallClient, CallOptions
from voicehub.desks.desk import load_desks
from voicehub.server.desk_reload import DeskReloader
from voicehub.server.settings import ServerSettings
from voicehub.voice.events import Transcript
from voicehub_dev.fakes.server_session import ScriptedStack

GREETING = (
    'greeting = "Hello, you have reached the research desk. What would you like me to look into?"'
)


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    desks = tmp_path / "channels"
    desks.mkdir()
    shutil.copytree(CHANNELS / "knowledge", desks / "knowledge")
    shutil.copy(CHANNELS / "research.toml", desks / "research.toml")
    assert GREETING in (desks / "research.toml").read_text()
    return desks


def rewrite(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))


async def test_a_changed_desk_is_swapped_and_the_old_object_left_to_its_calls(
    folder: Path,
) -> None:
    desks = load_desks(folder)
    reloader = DeskReloader(folder, desks)
    live = desks["research"]  # what a call in progress holds
    assert (await reloader.reload()).updated == []  # nothing changed: nothing swapped

    rewrite(folder / "research.toml", GREETING, 'greeting = "Research desk, version two."')
    report = await reloader.reload()
    assert report.updated == ["research"] and report.broken == {}
    assert desks["research"].greeting == "Research desk, version two."
    assert live.greeting.startswith("Hello, you have reached")  # the live call's own
    assert reloader.retired == [live]

    shutil.copy(folder / "research.toml", folder / "second.toml")
    rewrite(folder / "second.toml", 'name = "research"', 'name = "second"')
    assert (await reloader.reload()).added == ["second"]
    await reloader.aclose()


async def test_a_change_to_the_knowledge_rebuilds_the_desks(folder: Path) -> None:
    desks = load_desks(folder)
    reloader = DeskReloader(folder, desks)
    knowledge = folder / "knowledge" / "research.toml"
    knowledge.write_text(knowledge.read_text().replace("heat pump", "heat-pump", 1))
    assert (await reloader.reload()).updated == ["research"]


async def test_a_broken_file_is_reported_with_its_line_and_the_last_good_desk_serves(
    folder: Path, caplog: pytest.LogCaptureFixture
) -> None:
    desks = load_desks(folder)
    good = desks["research"]
    reloader = DeskReloader(folder, desks)
    rewrite(folder / "research.toml", 'match = ["thank you", "thanks"]', 'mach = ["thanks"]')
    line = 1 + (folder / "research.toml").read_text().splitlines().index('mach = ["thanks"]')
    with caplog.at_level(logging.ERROR, logger="voicehub.reload"):
        report = await reloader.reload()
    assert desks["research"] is good
    [error] = report.broken.values()
    assert f"research.toml:{line}: agents[0].scripted.rules[5].mach: " in error, error
    assert "unknown field 'mach' (did you mean 'match'?)" in error
    assert "keeps serving its last good version" in caplog.text

    (folder / "research.toml").write_text('name = "research"\n[voice\n')  # not even TOML
    report = await reloader.reload()
    assert desks["research"] is good
    assert "line 2" in next(iter(report.broken.values()))


async def test_serve_reload_end_to_end_new_calls_get_the_change_live_calls_keep_theirs(
    folder: Path, tmp_path: Path
) -> None:
    settings = ServerSettings(
        channels_dir=folder, db_path=tmp_path / "v.db", reload_desks=True, prewarm=False
    )
    factory = ScriptedStack()
    async with running_server(settings, voice=factory) as server:
        reloader = server.app.state.parts.reloader
        options = CallOptions(desk="research", server=server.url, playout_speed=float("inf"))
        async with CallClient(options) as first:
            await first.wait_for_event(Transcript)
            passes = reloader.passes
            rewrite(folder / "research.toml", GREETING, 'greeting = "Version two here."')
            await asyncio.wait_for(reloader.wait_for_pass(passes), 30)
            second_options = CallOptions(
                desk="research", server=server.url, playout_speed=float("inf")
            )
            async with CallClient(second_options) as second:
                heard = await second.wait_for_event(Transcript)
            assert heard.text == "Version two here."
            live = server.switchboard.calls[first.report.room_id]
            assert live.desk.greeting.startswith("Hello, you have reached")


@pytest.mark.parametrize("prewarm", [True, False], ids=["prewarm", "no-prewarm"])
async def test_a_saved_desk_loads_its_models_when_the_start_would_have(
    folder: Path, tmp_path: Path, prewarm: bool
) -> None:
    """With prewarm the reloaded desk's models load at once, as at the start; without
    (`--no-prewarm`) they load on its first call, as they would have after the start."""
    settings = ServerSettings(
        channels_dir=folder, db_path=tmp_path / "v.db", reload_desks=True, prewarm=prewarm
    )
    factory = ScriptedStack()
    async with running_server(settings, voice=factory) as server:
        assert factory.prepared == (["research"] if prewarm else [])
        factory.prepared = []
        reloader = server.app.state.parts.reloader
        passes = reloader.passes
        rewrite(folder / "research.toml", GREETING, 'greeting = "Version two here."')
        await asyncio.wait_for(reloader.wait_for_pass(passes), 30)
        assert reloader.last is not None and reloader.last.updated == ["research"]
        assert factory.prepared == (["research"] if prewarm else [])
