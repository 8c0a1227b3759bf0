"""The keypad of a phone call: digit entries, `#` and `*` bindings, and "repeat"."""

from __future__ import annotations

import pytest

from voicehub.core.clock import VirtualClock, settle
from voicehub.core.store.base import DeliveryRecord, DeliveryStatus
from voicehub.core.store.memory import MemoryStore
from voicehub.delivery.injector import InjectOutcome
from voicehub.desks.phone import KeyBinding, PhoneConfig
from voicehub.telephony.keypad import Keypad


class Session:
    room_id = "research:tel-1"

    def __init__(self) -> None:
        self.texts: list[str] = []
        self.said: list[str] = []

    async def push_text(self, text: str) -> None:
        self.texts.append(text)

    async def say(self, text: str, *, allow_interrupt: bool = True) -> InjectOutcome:
        self.said.append(text)
        return InjectOutcome.FINISHED


def keypad(
    config: PhoneConfig, store: MemoryStore | None = None
) -> tuple[Keypad, Session, VirtualClock]:
    session, clock = Session(), VirtualClock()
    pad = Keypad(session, config, store or MemoryStore(), clock)  # type: ignore[arg-type]
    return pad, session, clock


async def test_digits_within_the_gap_are_one_entry() -> None:
    pad, session, clock = keypad(PhoneConfig(digit_gap=1.0))
    pad.press("1")
    await clock.advance(0.9)
    pad.press("2")
    await clock.advance(0.9)
    assert session.texts == []  # still typing
    await clock.advance(0.2)
    assert session.texts == ["12"]
    pad.press("3")
    pad.press("#")  # unbound `#` ends the entry at once
    await settle()
    assert session.texts == ["12", "3"]
    pad.press("*")  # unbound: ignored
    pad.press("A")
    await clock.advance(5.0)
    assert session.texts == ["12", "3"] and session.said == []


async def test_bound_keys_send_text_or_repeat_the_last_result() -> None:
    store = MemoryStore()
    config = PhoneConfig(
        keys={"#": KeyBinding(action="repeat"), "*": KeyBinding(text="how is it going?")}
    )
    pad, session, _ = keypad(config, store)
    pad.press("#")
    await settle()
    assert session.said == ["There is no result to repeat yet."]
    for n, status in enumerate(
        [DeliveryStatus.DELIVERED, DeliveryStatus.DELIVERED, DeliveryStatus.HELD]
    ):
        await store.put_delivery(
            DeliveryRecord(
                id=f"d{n}",
                room_id=Session.room_id,
                content=f"result {n}",
                status=status,
                updated_at=100.0 + n,
            )
        )
    pad.press("9")
    pad.press("*")  # flushes "9" first, then the bound text
    pad.press("#")
    await settle()
    assert session.texts == ["9", "how is it going?"]
    assert session.said[-1] == "result 1"  # the last delivered, not the held one


@pytest.mark.parametrize("key", ["#", "*"])
async def test_a_press_the_session_fails_on_is_logged_and_the_next_works(key: str) -> None:
    class Flaky(Session):
        async def push_text(self, text: str) -> None:
            if not self.texts:
                self.texts.append("(failed)")
                raise RuntimeError("the session is between agents")
            await super().push_text(text)

    session, clock = Flaky(), VirtualClock()
    config = PhoneConfig(keys={key: KeyBinding(text="status")})
    pad = Keypad(session, config, MemoryStore(), clock)  # type: ignore[arg-type]
    pad.press(key)
    pad.press("5")
    await clock.advance(2.0)
    assert session.texts == ["(failed)", "5"]
    await pad.aclose()
