"""A transfer's redirect marks its call as ending on purpose, and a refused redirect undoes
that: the call, still on its stream, stays one the take-over would bring back."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from voicehub.telephony.twilio.rest import TwilioApiError
from voicehub.telephony.twilio.transfer import _leaving


def call(outcome: str = "lost") -> SimpleNamespace:
    return SimpleNamespace(outcome=outcome, finished=asyncio.Event())


async def test_a_redirect_that_goes_through_leaves_the_call_ended_on_purpose() -> None:
    live = call()
    async with _leaving(live):  # type: ignore[arg-type]
        pass
    assert live.outcome == "hung_up"


async def test_a_refused_redirect_leaves_the_call_as_it_was() -> None:
    live = call()
    with pytest.raises(TwilioApiError):
        async with _leaving(live):  # type: ignore[arg-type]
            assert live.outcome == "hung_up"  # set before the request: its `stop` may race it
            raise TwilioApiError(400, 21220, "Call is not in-progress. Cannot redirect.")
    assert live.outcome == "lost"


async def test_a_call_already_ending_otherwise_keeps_its_outcome() -> None:
    draining = call("handed_over")
    with pytest.raises(TwilioApiError):
        async with _leaving(draining):  # type: ignore[arg-type]
            raise TwilioApiError(400, 21220, "Call is not in-progress. Cannot redirect.")
    assert draining.outcome == "handed_over"
