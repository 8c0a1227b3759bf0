"""Which desk a job is for, conversation ids from identities, the call load, and tokens."""

from __future__ import annotations

import json
import time
from datetime import timedelta

import jwt
import pytest

from voicehub.errors import ConfigError
from voicehub.workers.dispatch import DispatchError, choose_desk, conversation_for
from voicehub.workers.load import CallLoad
from voicehub.workers.tokens import desk_token, room_for

DESKS = ["research", "sales", "sales-eu"]


@pytest.mark.parametrize(
    ("metadata", "room", "desk"),
    [
        ('{"desk": "sales"}', "anything", "sales"),
        ("research", "sales-123", "research"),  # plain metadata wins over the room name
        ("", "sales-eu-42", "sales-eu"),  # the longest desk name that fits
        ("", "sales_7", "sales"),
        ("", "research", "research"),
        ('{"other": 1}', "research-x", "research"),
    ],
)
def test_the_desk_comes_from_metadata_else_the_room_name(
    metadata: str, room: str, desk: str
) -> None:
    assert choose_desk(DESKS, metadata=metadata, room_name=room) == desk


@pytest.mark.parametrize(
    ("metadata", "room", "problem"),
    [
        ("", "lobby", "no desk for room 'lobby'"),
        ('{"desk": "billing"}', "research-1", "names desk 'billing'"),
        ('{"desk": ', "research-1", "not valid JSON"),
        ('{"desk": 3}', "research-1", "expected a desk name"),
    ],
)
def test_a_job_for_no_desk_here_says_why(metadata: str, room: str, problem: str) -> None:
    with pytest.raises(DispatchError, match=problem):
        choose_desk(DESKS, metadata=metadata, room_name=room)


def test_a_single_desk_worker_takes_any_room_but_not_another_desks_job() -> None:
    assert choose_desk(["research"], metadata="", room_name="lobby") == "research"
    with pytest.raises(DispatchError):
        choose_desk(["research"], metadata='{"desk": "sales"}', room_name="research-1")


def test_conversation_ids_keep_safe_identities_and_never_merge_unsafe_ones() -> None:
    assert conversation_for("alice") == "alice"
    phone = conversation_for("sip_+15551234567")
    assert phone.startswith("sip_-15551234567-") and phone != conversation_for("sip_-15551234567")
    assert conversation_for("a@b") != conversation_for("a#b")
    assert conversation_for("+++").startswith("p-")
    long = conversation_for("x" * 80 + "!")
    assert len(long) <= 64


def test_the_load_is_live_calls_over_capacity_and_full_means_no_room_for_one_more() -> None:
    load = CallLoad(2)
    assert load.load() == 0.0
    load.call_started()
    assert load.load() == 0.5 < load.threshold()
    load.call_started()
    assert load.load() == 1.0 >= load.threshold()
    load.call_ended()
    load.call_ended()
    load.call_ended()  # never below zero
    assert load.calls == 0
    with pytest.raises(ConfigError, match="at least one call"):
        CallLoad(0)


def test_the_token_lets_the_identity_join_and_dispatches_the_desk() -> None:
    secret = "a-test-secret-of-thirty-two-bytes!"
    token = desk_token(
        desk="research",
        identity="alice",
        api_key="devkey",
        api_secret=secret,
        agent_name="research",
        room="research-1",
        ttl=timedelta(hours=1),
    )
    claims = jwt.decode(token, secret, algorithms=["HS256"])  # checks the signature
    assert claims["iss"] == "devkey" and claims["sub"] == "alice"
    assert claims["video"]["roomJoin"] is True and claims["video"]["room"] == "research-1"
    assert not claims["video"].get("agent")  # a caller, not a worker
    [dispatch] = claims["roomConfig"]["agents"]
    assert dispatch["agentName"] == "research"
    assert json.loads(dispatch["metadata"]) == {"desk": "research"}
    assert 3500 <= claims["exp"] - time.time() <= 3600
    with pytest.raises(jwt.InvalidSignatureError):
        jwt.decode(token, "another-secret-of-thirty-two-bytes", algorithms=["HS256"])


def test_a_token_needs_the_servers_key() -> None:
    with pytest.raises(ConfigError, match="LIVEKIT_API_KEY"):
        desk_token(desk="r", identity="a", api_key=None, api_secret="s", agent_name="r", room="r")


def test_rooms_for_a_desk_start_with_its_name_and_differ() -> None:
    first, second = room_for("research"), room_for("research")
    assert first.startswith("research-") and first != second
    assert choose_desk(DESKS, metadata="", room_name=first) == "research"
