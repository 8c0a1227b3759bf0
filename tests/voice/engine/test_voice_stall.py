"""A voice that hangs for good fails the speech it is saying after `voice_stall_limit`
seconds with no audio (issue 38's fault matrix: before, a synthesis that never returned held
the call's speech, and every result queued behind it, for good). A slow voice that keeps
sending is not cut. The real `SpeechPlayer` on a virtual clock and an in-memory line; the
voices are generators the test holds."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from voicehub.core.clock import VirtualClock, settle
from voicehub.testing import MemoryTransport
from voicehub.voice.activity import VoiceActivity
from voicehub.voice.engine.speech import Speech, SpeechEnd
from voicehub.voice.engine.speech_player import SpeechPlayer, VoiceStalled

RATE = 16000
LIMIT = 15.0
TENTH = bytes(3200)  # 0.1 s of audio


@pytest.fixture
def clock() -> VirtualClock:
    return VirtualClock()


def player_on(clock: VirtualClock) -> tuple[SpeechPlayer, MemoryTransport]:
    line = MemoryTransport(RATE, ack="manual", clock=clock)
    player = SpeechPlayer(line, VoiceActivity(clock), clock, voice_stall_limit=LIMIT)
    player.start()
    return player, line


async def hangs_after(chunks: int) -> AsyncIterator[bytes]:
    for _ in range(chunks):
        yield TENTH
    await asyncio.Event().wait()  # the synthesis never answers again
    yield TENTH


async def slow(gaps: list[float], clock: VirtualClock) -> AsyncIterator[bytes]:
    for gap in gaps:
        await clock.sleep(gap)
        yield TENTH


async def played(player: SpeechPlayer, line: MemoryTransport, speech: Speech) -> SpeechEnd:
    """The caller's buffer plays `speech` to its mark, and acks it."""
    await line.wait_for(lambda: speech.mark_id in line.marks)
    player.confirm(speech.mark_id)
    return await asyncio.wait_for(speech.wait(), 5)


async def passes(clock: VirtualClock, seconds: float) -> None:
    """`seconds` of call time, in small steps (the player's timers see each)."""
    for _ in range(round(seconds / 0.5)):
        await clock.advance(0.5)
        await settle()


async def test_a_voice_that_hangs_mid_speech_fails_it_and_the_next_speech_plays(
    clock: VirtualClock,
) -> None:
    player, line = player_on(clock)
    hung = player.play(Speech("call-1/speech-x-1", "reply", "Sure, let me look.", hangs_after(1)))
    after = player.play(Speech("call-1/speech-x-2", "delivery", "The result.", slow([0], clock)))
    try:
        await passes(clock, LIMIT - 1)
        assert not hung.done and line.chunks == 1  # slow, not yet stalled
        await passes(clock, 1.5)
        assert hung.end is SpeechEnd.FAILED and isinstance(hung.error, VoiceStalled)
        assert "no audio for 15 s" in str(hung.error)
        assert line.clears == 1  # what the caller's buffer held of it is dropped
        assert await played(player, line, after) is SpeechEnd.PLAYED
    finally:
        await player.aclose()


async def test_a_voice_that_never_starts_fails_its_speech_with_nothing_sent(
    clock: VirtualClock,
) -> None:
    player, line = player_on(clock)
    hung = player.play(Speech("call-1/speech-x-1", "delivery", "The result.", hangs_after(0)))
    try:
        await passes(clock, LIMIT + 0.5)
        assert hung.end is SpeechEnd.FAILED and isinstance(hung.error, VoiceStalled)
        assert line.chunks == 0 and line.clears == 0
    finally:
        await player.aclose()


async def test_a_slow_voice_that_keeps_sending_is_not_cut(clock: VirtualClock) -> None:
    player, line = player_on(clock)
    gaps = [LIMIT - 1, LIMIT - 1, LIMIT - 1]  # 42 s for the whole speech, no gap a stall
    speech = player.play(Speech("call-1/speech-x-1", "reply", "Well.", slow(gaps, clock)))
    try:
        await passes(clock, sum(gaps) + 1)
        assert await played(player, line, speech) is SpeechEnd.PLAYED
        assert line.chunks == 3
    finally:
        await player.aclose()


async def test_closing_the_call_while_the_voice_hangs_interrupts_the_speech(
    clock: VirtualClock,
) -> None:
    player, _ = player_on(clock)
    hung = player.play(Speech("call-1/speech-x-1", "reply", "Sure.", hangs_after(1)))
    await passes(clock, 2)
    await player.aclose()
    assert hung.end is SpeechEnd.INTERRUPTED
