"""Sounds while the agent works (`CallSounds`), on the virtual clock: each starts after the
desk's delay, stops the frame the agent's speech is ready or the caller speaks, never plays
over either, and never holds back a result (the call's idleness is untouched by it)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest

from voicehub.core.clock import VirtualClock
from voicehub.voice.activity import VoiceActivity
from voicehub.voice.events import ServerEvent
from voicehub.voice.sounds import CallSounds, SoundSettings, sound_pcm
from voicehub.voice.sounds.call_sounds import CALLER_QUIET, LEAD_FRAMES

RATE = 8000
FRAME = RATE // 50 * 2


class Line:
    """A transport that notes when each frame of audio was handed to it."""

    sample_rate = RATE

    def __init__(self, clock: VirtualClock) -> None:
        self.clock = clock
        self.sent: list[tuple[float, bytes]] = []

    async def send_audio(self, pcm16: bytes) -> None:
        self.sent.append((self.clock.now(), pcm16))

    async def mark(self, speech_id: str) -> None:
        pass

    async def clear(self) -> None:
        pass

    async def send_event(self, event: ServerEvent) -> None:
        pass

    def frames_between(self, start: float, end: float) -> int:
        return sum(1 for at, _ in self.sent if start <= at < end)


@dataclass
class Host:
    pending: bool = False
    reply: object | None = None
    work: bool = False
    rendered: list[str] = field(default_factory=list)
    filler_pcm: bytes = bytes(FRAME * 10)

    def speech_pending(self) -> bool:
        return self.pending

    def tools_running(self) -> object | None:
        return self.reply

    async def work_running(self) -> bool:
        return self.work

    async def render(self, text: str) -> bytes:
        self.rendered.append(text)
        return self.filler_pcm


@dataclass
class Call:
    clock: VirtualClock
    activity: VoiceActivity
    line: Line
    host: Host
    sounds: CallSounds


@pytest.fixture
async def call(request: pytest.FixtureRequest) -> AsyncIterator[Call]:
    settings: SoundSettings = getattr(request, "param", SoundSettings(thinking="soft-pulse"))
    clock = VirtualClock()
    activity = VoiceActivity(clock, session_live=True)
    line, host = Line(clock), Host()
    sounds = CallSounds(settings, activity, clock, line, host)
    task = asyncio.create_task(sounds.run())
    await clock.advance(0)
    yield Call(clock, activity, line, host, sounds)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


THINKING = SoundSettings(thinking="keys", thinking_after=1.0)


@pytest.mark.parametrize("call", [THINKING], indirect=True)
async def test_the_thinking_sound_starts_after_the_desks_delay(call: Call) -> None:
    call.activity.agent_thinking_started()  # the caller's turn is being answered
    await call.clock.advance(0.99)
    assert call.line.sent == []
    await call.clock.advance(0.51)
    # from 1.0 s on, one frame per 20 ms, LEAD_FRAMES ahead
    assert call.line.sent[0][0] == pytest.approx(1.0)
    assert len(call.line.sent) == pytest.approx(0.5 / 0.02 + LEAD_FRAMES, abs=1)
    assert call.sounds.playing == "thinking"
    pcm = sound_pcm("keys", RATE, THINKING.volume_db)
    assert b"".join(frame for _, frame in call.line.sent) == pcm[: len(call.line.sent) * FRAME]


@pytest.mark.parametrize("call", [THINKING], indirect=True)
async def test_it_stops_when_the_answer_speech_is_ready(call: Call) -> None:
    call.activity.agent_thinking_started()
    await call.clock.advance(1.5)
    assert call.line.sent
    # the speech player, right before the answer's first frame: the sound ends at once
    # (no clock time passes) and nothing more of it is sent
    call.host.pending = True
    before = call.clock.now()
    await call.sounds.before_speech()
    assert call.clock.now() == before
    sent = len(call.line.sent)
    call.activity.agent_speech_started("s1")
    await call.clock.advance(3.0)
    assert len(call.line.sent) == sent
    assert call.sounds.playing is None


@pytest.mark.parametrize("call", [THINKING], indirect=True)
async def test_it_never_plays_while_the_caller_speaks(call: Call) -> None:
    call.activity.agent_thinking_started()
    call.activity.user_speech_started()  # the caller goes on talking after their turn
    await call.clock.advance(3.0)
    assert call.line.sent == []
    call.activity.user_speech_stopped()
    await call.clock.advance(0.99)
    assert call.line.sent == []  # the delay starts again from the caller's last word
    await call.clock.advance(0.2)
    assert call.line.sent
    # a speech-like frame from the caller (ahead of the VAD): stopped within one frame
    call.activity.caller_voiced()
    voiced_at = call.clock.now()
    await call.clock.advance(0.021)
    stopped = len(call.line.sent)
    await call.clock.advance(CALLER_QUIET + 0.5)
    assert call.line.frames_between(voiced_at + 0.021, voiced_at + CALLER_QUIET + 0.5) == 0
    assert len(call.line.sent) == stopped


@pytest.mark.parametrize("call", [THINKING], indirect=True)
async def test_it_never_plays_over_speech_of_the_agent(call: Call) -> None:
    call.activity.agent_thinking_started()
    call.host.pending = True  # the first sentence is playing while the tools run
    call.activity.agent_speech_started("s1")
    await call.clock.advance(3.0)
    assert call.line.sent == []
    call.activity.agent_speech_finished("s1", interrupted=False)
    call.activity.playout_confirmed("s1")
    call.host.pending = False
    await call.clock.advance(0.99)
    assert call.line.sent == []
    await call.clock.advance(0.05)
    assert call.line.sent


HOLD = SoundSettings(hold="hold-music", hold_after=4.0)


@pytest.mark.parametrize("call", [HOLD], indirect=True)
async def test_hold_music_plays_while_work_runs_and_never_holds_a_result_back(
    call: Call,
) -> None:
    await call.clock.advance(10.0)
    assert call.line.sent == []  # quiet, but no work running: no music
    call.host.work = True
    call.activity.agent_thinking_started()  # a turn: the call is busy, then quiet again
    call.activity.agent_thinking_finished()
    quiet_from = call.clock.now()
    await call.clock.advance(3.9)
    assert call.line.sent == []
    await call.clock.advance(1.0)
    assert call.sounds.playing == "hold"
    # the music is no agent speech: the call is as idle as it was, since when it was
    snapshot = call.activity.snapshot()
    assert snapshot.is_idle and snapshot.idle_since == quiet_from
    assert not snapshot.agent_speaking and not snapshot.playout_pending
    # a result starts: the music ends before its first frame, at once
    call.host.pending = True
    await call.sounds.before_speech()
    sent = len(call.line.sent)
    await call.clock.advance(2.0)
    assert len(call.line.sent) == sent


FILLER = SoundSettings(fillers=("One moment.", "Still checking."), filler_after=1.5)


@pytest.mark.parametrize("call", [FILLER], indirect=True)
async def test_a_slow_tool_gets_one_filler_per_reply(call: Call) -> None:
    call.activity.agent_thinking_started()
    reply = object()
    call.host.reply = reply  # its tools run
    await call.clock.advance(1.49)
    assert call.line.sent == [] and call.host.rendered == []
    await call.clock.advance(0.5)
    assert call.host.rendered == ["One moment."]
    await call.clock.advance(2.0)
    # the whole filler once, and no other for the same reply
    assert b"".join(f for _, f in call.line.sent) == call.host.filler_pcm
    assert call.host.rendered == ["One moment."]
    call.host.reply = object()  # the next reply, its tools slow too
    await call.clock.advance(2.0)
    assert call.host.rendered == ["One moment.", "Still checking."]


@pytest.mark.parametrize("call", [FILLER], indirect=True)
async def test_a_tool_that_finishes_in_time_gets_no_filler(call: Call) -> None:
    call.activity.agent_thinking_started()
    call.host.reply = object()
    await call.clock.advance(1.0)
    call.host.reply = None
    call.host.pending = True  # its answer is ready
    call.activity.agent_speech_started("s1")
    await call.clock.advance(3.0)
    assert call.line.sent == [] and call.host.rendered == []


async def test_a_desk_without_sounds_runs_nothing() -> None:
    clock = VirtualClock()
    activity = VoiceActivity(clock, session_live=True)
    sounds = CallSounds(SoundSettings(), activity, clock, Line(clock), Host())
    await asyncio.wait_for(sounds.run(), 1.0)  # returns at once


@pytest.mark.parametrize("call", [THINKING], indirect=True)
async def test_through_the_speech_player_the_answer_follows_the_sound_with_nothing_after(
    call: Call,
) -> None:
    from voicehub.voice.engine.speech import Speech
    from voicehub.voice.engine.speech_player import SpeechHooks, SpeechPlayer

    player = SpeechPlayer(call.line, call.activity, call.clock, SpeechHooks())
    player.before_speech(call.sounds.before_speech)
    call.host.speech_pending = lambda: player.current is not None or bool(player.queued)  # type: ignore[method-assign]
    player.start()
    call.activity.agent_thinking_started()
    await call.clock.advance(1.5)
    sound_frames = len(call.line.sent)
    assert sound_frames > 0

    answer = bytes([7]) * FRAME * 5

    async def audio() -> AsyncIterator[bytes]:
        yield answer

    speech = player.play(Speech("s1", "reply", "Here it is.", audio()))
    await call.clock.advance(0.0)
    await call.clock.advance(2.0)
    frames = [frame for _, frame in call.line.sent]
    first_answer = frames.index(answer)
    assert first_answer == sound_frames  # not one frame of sound after the answer began
    assert all(frame != answer for frame in frames[:first_answer])
    assert frames[first_answer:] == [answer]
    player.confirm(speech.mark_id)
    await player.aclose()


@pytest.mark.parametrize("call", [HOLD], indirect=True)
async def test_hold_music_ends_when_the_work_does(call: Call) -> None:
    call.host.work = True
    await call.clock.advance(4.5)
    assert call.sounds.playing == "hold"
    call.host.work = False  # cancelled: no result will come to stop it
    await call.clock.advance(6.0)
    assert call.sounds.playing is None
    sent = len(call.line.sent)
    await call.clock.advance(20.0)
    assert len(call.line.sent) == sent
