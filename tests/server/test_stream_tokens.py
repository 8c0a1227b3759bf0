from __future__ import annotations

from voicehub.core.clock import VirtualClock
from voicehub.server.stream_tokens import StreamGrant, StreamTokens
from voicehub.server.twilio import caller_conversation

KEY = b"k" * 32  # a server's caller-number secret


async def test_a_token_works_once_within_its_minute() -> None:
    clock = VirtualClock()
    tokens = StreamTokens(clock, ttl=60.0)
    token = tokens.mint("research", "tel-1", "CA1")
    await clock.advance(59.0)
    grant = tokens.redeem(token)
    assert isinstance(grant, StreamGrant) and grant.conversation == "tel-1"
    assert "already used" in str(tokens.redeem(token))
    assert "no token" in str(tokens.redeem(None))


async def test_an_expired_token_is_refused_and_stale_ones_are_forgotten() -> None:
    clock = VirtualClock()
    tokens = StreamTokens(clock, ttl=60.0)
    late = tokens.mint("research", "tel-1", "CA1")
    await clock.advance(60.5)
    assert "expired" in str(tokens.redeem(late))
    tokens.mint("research", "tel-2", "CA2")
    await clock.advance(61.0)
    tokens.mint("research", "tel-3", "CA3")
    assert len(tokens) == 1


def test_the_callers_number_is_hashed_and_stable() -> None:
    conversation = caller_conversation("+1 555 010 0001", KEY)
    assert conversation == caller_conversation("15550100001", KEY)
    assert conversation is not None and "5550100001" not in conversation
    assert caller_conversation("+15550100002", KEY) != conversation
    assert caller_conversation("anonymous", KEY) is None
    assert caller_conversation("+266696687", KEY) is None
    assert caller_conversation("+15550100001", b"other" * 8) != conversation  # keyed
