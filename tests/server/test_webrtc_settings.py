"""WebRTC server settings from the environment: ICE servers and the peer limit."""

from __future__ import annotations

import pytest

from voicehub.errors import ConfigError
from voicehub.server.settings import IceServer, ServerSettings


def test_ice_servers_from_a_list_of_urls(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VOICEHUB_ICE_SERVERS", "stun:stun.example.org:3478, stun:other:19302")
    monkeypatch.setenv("VOICEHUB_MAX_PEERS", "7")
    settings = ServerSettings.from_env()
    assert settings.ice_servers == (
        IceServer(urls=["stun:stun.example.org:3478"]),
        IceServer(urls=["stun:other:19302"]),
    )
    assert settings.max_peer_connections == 7


def test_turn_logins_come_as_json(monkeypatch: pytest.MonkeyPatch) -> None:
    turn = '[{"urls": ["turn:turn.example.org:3478"], "username": "u", "credential": "c"}]'
    monkeypatch.setenv("VOICEHUB_ICE_SERVERS", turn)
    [server] = ServerSettings.from_env().ice_servers
    assert (server.urls, server.username, server.credential) == (
        ["turn:turn.example.org:3478"],
        "u",
        "c",
    )


@pytest.mark.parametrize(
    ("variable", "value", "reason"),
    [
        ("VOICEHUB_ICE_SERVERS", "[{oops", "VOICEHUB_ICE_SERVERS: not valid JSON"),
        ("VOICEHUB_ICE_SERVERS", '[{"url": "x"}]', "VOICEHUB_ICE_SERVERS[0].urls: required field"),
        ("VOICEHUB_MAX_PEERS", "0", "VOICEHUB_MAX_PEERS: Input should be greater than or equal"),
    ],
)
def test_a_bad_value_names_its_variable(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str, reason: str
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(ConfigError) as error:
        ServerSettings.from_env()
    assert reason in str(error.value), str(error.value)
