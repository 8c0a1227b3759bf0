from __future__ import annotations

from voicehub.core.clock import VirtualClock
from voicehub.telephony.stream_tokens import StreamGrant, StreamTokens
from voicehub.telephony.twilio.webhooks import caller_conversation

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


async def test_an_expired_token_is_refused_and_used_ones_are_forgotten_once_expired() -> None:
    clock = VirtualClock()
    tokens = StreamTokens(clock, ttl=60.0)
    late = tokens.mint("research", "tel-1", "CA1")
    await clock.advance(60.5)
    assert "expired" in str(tokens.redeem(late))
    assert isinstance(tokens.redeem(tokens.mint("research", "tel-2", "CA2")), StreamGrant)
    assert len(tokens) == 1
    await clock.advance(61.0)
    assert isinstance(tokens.redeem(tokens.mint("research", "tel-3", "CA3")), StreamGrant)
    assert len(tokens) == 1


async def test_a_token_minted_by_one_instance_is_redeemed_by_another_with_the_secret() -> None:
    clock = VirtualClock()
    a, b = StreamTokens(clock, secret=KEY), StreamTokens(clock, secret=KEY)
    grant = b.redeem(a.mint("research", "tel-1", "CA1"))
    assert isinstance(grant, StreamGrant) and (grant.desk, grant.call_sid) == ("research", "CA1")
    stranger = StreamTokens(clock, secret=b"other" * 8)
    assert "not signed by this deployment" in str(stranger.redeem(a.mint("research", "x", "y")))
    body, signature = a.mint("research", "tel-1", "CA1").split(".")
    forged = body[:-2] + ("AA" if body[-2:] != "AA" else "BB") + "." + signature
    assert "not signed by this deployment" in str(b.redeem(forged))


def test_the_callers_number_is_hashed_and_stable() -> None:
    conversation = caller_conversation("+1 555 010 0001", KEY)
    assert conversation == caller_conversation("15550100001", KEY)
    assert conversation is not None and "5550100001" not in conversation
    assert caller_conversation("+15550100002", KEY) != conversation
    assert caller_conversation("anonymous", KEY) is None
    assert caller_conversation("+266696687", KEY) is None
    assert caller_conversation("+15550100001", b"other" * 8) != conversation  # keyed
