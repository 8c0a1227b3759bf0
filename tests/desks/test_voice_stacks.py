"""Voice stacks: a desk runs on the stack its `[voice]` names; the registry says clearly
when that stack is not there, and each call starts from one `CallSpec`."""

from __future__ import annotations

from collections.abc import Sequence
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

from voicehub.desks import voice_stack
from voicehub.desks.desk import Desk, build_desk
from voicehub.desks.loading import load_desk_file
from voicehub.desks.voice_stack import (
    ENTRY_POINT_GROUP,
    CallSpec,
    VoiceStacks,
    default_voice_stacks,
)
from voicehub.errors import ConfigError
from voicehub.hub import Hub
from voicehub.testing import MemoryTransport
from voicehub_dev.fakes.server_session import ScriptedSession, ScriptedStack

DESK = """\
name = "{name}"
title = "A desk"
greeting = "Hello."
{voice}
[[agents]]
id = "desk"

[agents.scripted]
fallback = "Pardon?"
"""


def desk(folder: Path, voice: str = "", name: str = "mini") -> Desk:
    path = folder / f"{name}.toml"
    path.write_text(DESK.format(name=name, voice=voice))
    return build_desk(load_desk_file(path))


class RecordingStack(ScriptedStack):
    """The scripted stack, keeping every `CallSpec` it was given."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[CallSpec] = []

    async def start(self, call: CallSpec) -> ScriptedSession:
        self.calls.append(call)
        return await super().start(call)


def test_a_desk_runs_on_the_builtin_stack_its_keys_name(tmp_path: Path) -> None:
    assert desk(tmp_path).config.voice.stack_name == "offline"
    deepgram = desk(tmp_path, '[voice]\ntts = "deepgram"', name="cloud")
    assert deepgram.config.voice.stack_name == "deepgram"
    realtime = desk(tmp_path, '[voice]\nengine = "openai-realtime"', name="live")
    assert realtime.config.voice.stack_name == "openai-realtime"
    assert default_voice_stacks(installed=False).names == [
        "deepgram",
        "offline",
        "openai-realtime",
    ]


def test_a_builtin_stack_that_contradicts_the_other_keys_is_refused_naming_them(
    tmp_path: Path,
) -> None:
    with pytest.raises(ConfigError) as caught:
        desk(tmp_path, '[voice]\nstack = "offline"\nstt = "deepgram"')
    message = str(caught.value)
    assert "voice.stack" in message and "these keys name 'deepgram'" in message


async def test_a_desk_on_a_stack_nobody_registered_is_named_and_refused(tmp_path: Path) -> None:
    acme = desk(tmp_path, '[voice]\nstack = "acme"')
    stacks = default_voice_stacks(installed=False)
    [problem] = stacks.check(acme)
    assert problem.startswith(f"{tmp_path / 'mini.toml'}: voice: stack 'acme' is not registered")
    assert "stacks: deepgram, offline, openai-realtime" in problem
    assert ENTRY_POINT_GROUP in problem
    await stacks.prepare([acme])  # skipped, not an error: the other desks still load
    async with Hub() as hub:
        call = await CallSpec.for_room(hub, acme, "mini:c1", MemoryTransport(16000))
        with pytest.raises(ConfigError, match="stack 'acme' is not registered"):
            await stacks.start(call)
        assert "mini:c1" not in hub.rooms


async def test_a_registered_stack_serves_the_desks_that_name_it(tmp_path: Path) -> None:
    acme, plain = desk(tmp_path, '[voice]\nstack = "acme"'), desk(tmp_path, name="plain")
    stack = RecordingStack()
    stacks = VoiceStacks({"acme": stack})
    with pytest.raises(ConfigError, match="'acme' is registered already"):
        stacks.register("acme", ScriptedStack())
    await stacks.prepare([acme, plain])
    assert stack.prepared == ["mini"]  # only its own desks
    assert stacks.check(acme) == []
    assert "stack 'offline' is not registered" in stacks.check(plain)[0]
    async with Hub() as hub:
        for _ in range(2):  # a new conversation, then the same one calling again
            call = await CallSpec.for_room(hub, acme, "mini:c1", MemoryTransport(16000))
            session = await stacks.start(call)
            await session.aclose()
    first, again = stack.calls
    assert (first.reopened, first.greeting) == (False, "Hello.")
    assert (again.reopened, again.greeting) == (True, None)
    assert [s.greeting for s in stack.sessions] == ["Hello.", None]


def test_a_stack_whose_entry_point_fails_is_named_to_its_desks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def installed(group: str) -> Sequence[EntryPoint]:
        assert group == ENTRY_POINT_GROUP
        return [
            EntryPoint("acme", "voicehub_no_such_module:AcmeStack", group),
            EntryPoint("scripted", "voicehub_dev.fakes.server_session:ScriptedStack", group),
        ]

    monkeypatch.setattr(voice_stack, "entry_points", installed)
    stacks = default_voice_stacks()
    assert "scripted" in stacks.names  # the one that loads is registered
    assert "voice stack 'acme' not loaded" in caplog.text
    [problem] = stacks.check(desk(tmp_path, '[voice]\nstack = "acme"'))
    assert "stack 'acme' is its entry point 'voicehub_no_such_module:AcmeStack' failed" in problem
    assert "ModuleNotFoundError" in problem
