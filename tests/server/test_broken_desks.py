"""A server started on a folder with broken desk files serves the good desks, logs every
broken file with its line and what is wrong, and `/ready` and `/health` name them; with no
good desk at all it refuses to start, listing every error."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from voicehub.errors import ConfigError
from voicehub.server.app import create_app
from voicehub.server.settings import ServerSettings

from ..e2e_helpers import running_server

HELLO = """name = "hello"
greeting = "Hello!"

[[agents]]
id = "desk"
"""

# a key the desk file does not have, on line 5
TYPO = """name = "typo"

[[agents]]
id = "desk"
toools = ["search_knowledge"]
"""

NOT_TOML = """name = "half"
greeting = "an unterminated string
"""

# transfers to a desk that is not served (its file is the broken one above)
TRANSFERS = """name = "front"

[[agents]]
id = "desk"

[transfer.targets.typo]
desk = "typo"
"""


def _folder(tmp_path: Path, files: dict[str, str]) -> Path:
    folder = tmp_path / "channels"
    folder.mkdir()
    for name, text in files.items():
        (folder / name).write_text(text)
    return folder


async def test_the_good_desks_serve_and_every_broken_file_is_named_with_its_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    files = {"hello.toml": HELLO, "typo.toml": TYPO, "half.toml": NOT_TOML}
    folder = _folder(tmp_path, {**files, "front.toml": TRANSFERS})
    settings = ServerSettings(channels_dir=folder, db_path=tmp_path / "v.db", prewarm=False)
    with caplog.at_level(logging.ERROR, logger="voicehub.server"):
        async with running_server(settings) as server:
            ready = await server.get("/ready")
            health = (await server.get("/health")).json()
            served = sorted(server.switchboard.desks)
    assert served == ["hello"]
    assert ready.status_code == 200, ready.text  # the good desk takes calls
    desks = ready.json()["checks"]["desks"]
    assert desks["served"] == ["hello"]
    broken = desks["broken"]
    assert sorted(Path(path).name for path in broken) == ["front.toml", "half.toml", "typo.toml"]
    assert f"{folder / 'typo.toml'}:5: agents[0].toools" in broken[str(folder / "typo.toml")]
    assert "transfer.targets.typo.desk" in broken[str(folder / "front.toml")]
    assert health["broken_desks"] == broken
    logged = "\n".join(r.getMessage() for r in caplog.records)
    for error in broken.values():
        assert f"desk file not served: {error}" in logged


def test_with_no_good_desk_the_server_refuses_to_start_listing_every_error(
    tmp_path: Path,
) -> None:
    folder = _folder(tmp_path, {"typo.toml": TYPO, "half.toml": NOT_TOML})
    settings = ServerSettings(channels_dir=folder, db_path=tmp_path / "v.db", prewarm=False)
    with pytest.raises(ConfigError) as raised:
        create_app(settings)
    message = str(raised.value)
    assert "nothing to serve" in message
    assert f"{folder / 'typo.toml'}:5:" in message and str(folder / "half.toml") in message
