"""Access tokens and server settings (pure: no server)."""

from __future__ import annotations

from pathlib import Path

import pytest

from voicehub.errors import ConfigError
from voicehub.server.auth import presented_token, token_problem
from voicehub.server.settings import ServerSettings

TOKEN = "s3cret-token-for-tests"


def test_the_bearer_header_wins_over_the_query() -> None:
    assert presented_token({"authorization": f"Bearer {TOKEN}"}, {"token": "other"}) == TOKEN
    assert presented_token({"authorization": f"bearer  {TOKEN} "}, {}) == TOKEN
    assert presented_token({}, {"token": TOKEN}) == TOKEN
    assert presented_token({"authorization": "Basic abc"}, {}) is None
    assert presented_token({"authorization": "Bearer "}, {"token": ""}) is None


def test_no_token_configured_lets_everyone_in() -> None:
    assert token_problem(None, None) is None
    assert token_problem(None, "anything") is None


def test_a_missing_or_wrong_token_is_refused_without_echoing_it() -> None:
    missing = token_problem(TOKEN, None)
    assert missing is not None and "Authorization: Bearer" in missing
    wrong = token_problem(TOKEN, "guess")
    assert wrong == "the access token is not valid for this server"
    assert token_problem(TOKEN, TOKEN) is None
    assert token_problem(TOKEN, TOKEN + "x") is not None


def test_defaults_listen_on_loopback_port_8080_with_the_store_in_var() -> None:
    settings = ServerSettings()
    assert (settings.host, settings.port) == ("127.0.0.1", 8080)
    assert settings.db_path == Path("var/voicehub.db")
    assert settings.channels_dir == Path("channels")
    assert settings.base_url == "http://127.0.0.1:8080/"
    settings.check_bind()


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "::1", "127.0.0.5"])
def test_loopback_addresses_need_no_token(host: str) -> None:
    ServerSettings(host=host).check_bind()


@pytest.mark.parametrize("host", ["0.0.0.0", "192.168.1.20", "::", "example.org"])
def test_other_addresses_are_refused_without_a_token(host: str) -> None:
    with pytest.raises(ConfigError, match=f"refusing to listen on {host}.*--token"):
        ServerSettings(host=host).check_bind()
    ServerSettings(host=host, token=TOKEN).check_bind()


def test_bad_settings_name_the_field(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"token: .*at least 16"):
        ServerSettings.create(token="short")
    with pytest.raises(ConfigError, match=r"max_audio_bytes: .*640 bytes"):
        ServerSettings.create(max_audio_bytes=1000)
    with pytest.raises(ConfigError, match="port"):
        ServerSettings.create(port=70000)


def test_environment_then_overrides(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VOICEHUB_PORT", "9000")
    monkeypatch.setenv("VOICEHUB_DB", "/tmp/x.db")
    monkeypatch.setenv("VOICEHUB_TOKEN", TOKEN)
    settings = ServerSettings.from_env(host="0.0.0.0", port=None)
    assert (settings.host, settings.port, settings.token) == ("0.0.0.0", 9000, TOKEN)
    assert settings.db_path == Path("/tmp/x.db")
    assert settings.base_url == "http://127.0.0.1:9000/"
    assert ServerSettings.from_env(port=9100).port == 9100


def test_a_bad_environment_value_names_its_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VOICEHUB_PORT", "eighty")
    monkeypatch.setenv("VOICEHUB_HOST", "")  # empty is unset
    with pytest.raises(ConfigError, match=r"VOICEHUB_PORT: .*valid integer.*\(got 'eighty'\)"):
        ServerSettings.from_env()
    assert ServerSettings.from_env(port=8081).port == 8081  # a flag wins over the variable
    assert ServerSettings.from_env(port=8081).host == "127.0.0.1"
    with pytest.raises(ConfigError, match=r"\n  port: .*65535"):
        ServerSettings.from_env(port=70000)


def test_vad_batching_is_on_unless_turned_off(monkeypatch: pytest.MonkeyPatch) -> None:
    from voicehub import cli

    assert ServerSettings.from_env().batch_vad is True
    monkeypatch.setenv("VOICEHUB_BATCH_VAD", "false")
    assert ServerSettings.from_env().batch_vad is False
    monkeypatch.setenv("VOICEHUB_BATCH_VAD", "sometimes")
    with pytest.raises(ConfigError, match=r"VOICEHUB_BATCH_VAD: .*boolean"):
        ServerSettings.from_env()
    monkeypatch.delenv("VOICEHUB_BATCH_VAD")
    args = cli._parser().parse_args(["serve", "--no-batch-vad"])
    assert args.no_batch_vad is True


def test_instance_settings_come_from_the_environment_and_are_checked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("VOICEHUB_INSTANCE_ID", "east-1")
    monkeypatch.setenv("VOICEHUB_HEARTBEAT_INTERVAL", "0.5")
    monkeypatch.setenv("VOICEHUB_INSTANCE_TIMEOUT", "3")
    monkeypatch.setenv("VOICEHUB_DELIVERY_LEASE", "2.5")
    settings = ServerSettings.from_env()
    assert (settings.instance_id, settings.heartbeat_interval) == ("east-1", 0.5)
    assert (settings.instance_timeout, settings.delivery_lease) == (3.0, 2.5)

    monkeypatch.setenv("VOICEHUB_INSTANCE_TIMEOUT", "0.5")
    with pytest.raises(ConfigError, match=r"instance_timeout \(0.5 s\) must be longer than"):
        ServerSettings.from_env()
    monkeypatch.setenv("VOICEHUB_INSTANCE_TIMEOUT", "3")
    monkeypatch.setenv("VOICEHUB_DELIVERY_LEASE", "-1")
    with pytest.raises(ConfigError, match=r"VOICEHUB_DELIVERY_LEASE: .*greater than 0"):
        ServerSettings.from_env()
    with pytest.raises(ConfigError, match=r"instance_id: .*pattern"):
        ServerSettings.create(instance_id="no spaces please")
