"""PlayoutQueue: frames in order, marks due once their audio is taken, clear drops audio."""

from __future__ import annotations

from voicehub.voice.audio.playout import PlayoutQueue, Tick

FRAME = 640  # 20 ms at 16 kHz


def audio(frames: float, value: int = 1) -> bytes:
    return bytes([value, 0]) * int(frames * FRAME // 2)


def test_frames_come_out_whole_and_in_order_then_none() -> None:
    queue = PlayoutQueue(16000)
    queue.put_audio(audio(1, 1) + audio(1, 2))
    assert queue.tick() == Tick(audio(1, 1), ())
    assert queue.tick() == Tick(audio(1, 2), ())
    assert queue.tick() == Tick(None, ())
    assert queue.queued_bytes == 0


def test_a_short_tail_is_padded_with_silence_and_chunks_are_joined() -> None:
    queue = PlayoutQueue(16000)
    queue.put_audio(audio(0.5, 3))
    queue.put_audio(audio(0.75, 4))
    first = queue.tick()
    assert first.audio == audio(0.5, 3) + audio(0.5, 4)
    second = queue.tick()
    assert second.audio == audio(0.25, 4) + bytes(FRAME - len(audio(0.25)))


def test_a_mark_is_due_with_the_frame_that_takes_the_last_of_its_audio() -> None:
    queue = PlayoutQueue(16000)
    queue.put_audio(audio(1.5))
    queue.put_mark("m1")
    queue.put_audio(audio(1))
    queue.put_mark("m2")
    assert queue.tick().marks == ()
    assert queue.tick().marks == ("m1",)  # the rest of m1's audio is in this frame
    tick = queue.tick()  # the second half of m2's audio (its first half went with m1's)
    assert tick.marks == ("m2",) and tick.audio == audio(0.5) + bytes(FRAME // 2)
    assert queue.tick() == Tick(None, ())


def test_a_mark_with_nothing_before_it_is_due_at_once() -> None:
    queue = PlayoutQueue(16000)
    queue.put_mark("empty")
    assert queue.tick() == Tick(None, ("empty",))


def test_clear_drops_unsent_audio_and_frees_the_marks_waiting_for_it() -> None:
    queue = PlayoutQueue(16000)
    queue.put_audio(audio(10))
    queue.put_mark("cut")
    queue.tick()
    assert queue.clear() == 9 * FRAME
    assert queue.tick() == Tick(None, ("cut",))
    queue.put_audio(audio(1, 7))
    assert queue.tick() == Tick(audio(1, 7), ())
