"""AudioLedger: what a Deepgram stream replays after a reconnect (sans I/O)."""

from __future__ import annotations

import pytest

from voicehub.voice.providers.deepgram.connection import RetryPolicy
from voicehub.voice.providers.deepgram.stt_audio import AudioLedger, Chunk

RATE = 100  # bytes per second: 1 byte = 10 ms, easy arithmetic


def send_all(ledger: AudioLedger) -> list[Chunk | str]:
    sent: list[Chunk | str] = []
    while ledger.has_unsent():
        sent.append(ledger.next_unsent())
        ledger.sent()
    return sent


def test_unconfirmed_audio_and_markers_go_out_again_after_a_reconnect() -> None:
    ledger = AudioLedger(RATE)
    ledger.push(b"a" * 50)  # 0.0-0.5 s
    ledger.push(b"b" * 50)  # 0.5-1.0 s
    ledger.mark("finalize")
    ledger.push(b"c" * 50)  # 1.0-1.5 s
    send_all(ledger)
    ledger.confirmed_until(0.5)  # a final covered the first chunk
    origin = ledger.reconnected()
    assert origin == 0.5  # the new socket's time 0 is stream time 0.5
    replay = send_all(ledger)
    assert [item if isinstance(item, str) else item.data[:1] for item in replay] == [
        b"b",
        "finalize",
        b"c",
    ]
    ledger.finalize_confirmed()  # answered: "b" and the marker need no replay any more
    assert ledger.reconnected() == 1.0


def test_the_buffers_are_bounded_and_drop_the_oldest_audio() -> None:
    ledger = AudioLedger(RATE, max_seconds=1.0)
    for _ in range(15):
        ledger.push(b"x" * 10)  # 1.5 s while the socket is down
    assert ledger.dropped_seconds == pytest.approx(0.5)
    first = ledger.next_unsent()
    assert isinstance(first, Chunk) and first.start == 0.5
    send_all(ledger)
    ledger.push(b"y" * 50)
    send_all(ledger)
    assert ledger.unconfirmed_seconds() == pytest.approx(1.0)  # the oldest sent audio went
    assert ledger.dropped_seconds == pytest.approx(1.0)


def test_drain_hands_everything_owed_to_a_fallback_in_order() -> None:
    ledger = AudioLedger(RATE)
    ledger.push(b"a" * 10)
    send_all(ledger)
    ledger.push(b"b" * 10)
    ledger.mark("end")
    items = ledger.drain()
    assert [i if isinstance(i, str) else i.data[:1] for i in items] == [b"a", b"b", "end"]
    assert not ledger.has_unsent() and ledger.unconfirmed_seconds() == 0


def test_backoff_doubles_up_to_the_cap_and_a_first_drop_retries_at_once() -> None:
    policy = RetryPolicy(initial_delay=0.5, max_delay=2.0)
    assert [policy.delay(n, 503) for n in (1, 2, 3, 4)] == [0.5, 1.0, 2.0, 2.0]
    assert [policy.delay(n, None) for n in (1, 2)] == [0.0, 1.0]
