"""`voicehub worker` reads its settings as `voicehub serve` does (one reader, one store
choice): the environment, flags on top, errors naming the variable or flag at fault."""

from __future__ import annotations

from pathlib import Path

import pytest

from voicehub.cli import main
from voicehub.errors import ConfigError
from voicehub.server.settings import ServerSettings
from voicehub.workers.settings import WorkerSettings

CHANNELS = Path(__file__).resolve().parents[2] / "channels"


def test_the_worker_takes_its_store_from_voicehub_store_like_serve(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("VOICEHUB_STORE", "redis://redis:6379/1")
    monkeypatch.setenv("VOICEHUB_DB", "/data/unused.db")
    worker, serve = WorkerSettings.from_env(), ServerSettings.from_env()
    assert worker.store == serve.store == "redis://redis:6379/1"
    assert worker.db_path == serve.db_path == Path("/data/unused.db")
    # a flag wins over the environment; "sqlite" means the file
    assert WorkerSettings.from_env(store="sqlite").store is None


@pytest.mark.parametrize("settings", [WorkerSettings, ServerSettings])
def test_a_bad_store_names_the_variable_that_held_it(
    settings: type[WorkerSettings] | type[ServerSettings], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VOICEHUB_STORE", "mysql://db/1")
    with pytest.raises(ConfigError) as caught:
        settings.from_env()
    message = str(caught.value)
    assert message.startswith("invalid ")
    assert "VOICEHUB_STORE: 'mysql://db/1' is not a store" in message


def test_a_bad_capacity_names_its_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VOICEHUB_WORKER_CAPACITY", "0")
    with pytest.raises(ConfigError, match="invalid worker settings:\n  VOICEHUB_WORKER_CAPACITY"):
        WorkerSettings.from_env()


def test_voicehub_worker_store_flag_is_checked_before_anything_starts(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("VOICEHUB_STORE", raising=False)
    assert main(["worker", "--channels", str(CHANNELS), "--store", "postgres://db"]) == 2
    error = capsys.readouterr().err
    assert error.startswith("voicehub worker: invalid worker settings:")
    assert "store: 'postgres://db' is not a store" in error


def test_voicehub_worker_without_a_livekit_server_says_what_to_set(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("LIVEKIT_URL", "LIVEKIT_API_KEY", "LIVEKIT_API_SECRET"):
        monkeypatch.delenv(name, raising=False)
    code = main(["worker", "--channels", str(CHANNELS), "--store", "redis://127.0.0.1:9/0"])
    assert code == 2
    assert "set LIVEKIT_URL, LIVEKIT_API_KEY, LIVEKIT_API_SECRET" in capsys.readouterr().err


def test_the_load_is_the_calls_or_the_cpu_whichever_is_higher() -> None:
    from voicehub.workers.load import CallLoad

    cpu = [0.2]
    load = CallLoad(4, cpu=lambda: cpu[0])
    load.call_started()
    assert load.load() == 0.25
    cpu[0] = 0.9
    assert load.load() == 0.9
    assert CallLoad(4).load() == 0.0  # calls only without a CPU probe
