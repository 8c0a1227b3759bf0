"""The tape of a call on a virtual clock: the caller's frames where they arrived, the
agent's audio where the caller hears it (queued after what plays, cut by a clear), the two
as the left and right channels; the recordings folder keeps, lists, prunes and deletes."""

from __future__ import annotations

import io
import json
import os
import wave
from pathlib import Path

import numpy as np

from voicehub.core.clock import VirtualClock
from voicehub.recordings.folder import RecordingFolder
from voicehub.recordings.tape import CallTape
from voicehub.voice.events import ToolCall, Transcript

RATE = 16000
FRAME = 320  # samples in 20 ms


def tone(seconds: float, level: int) -> bytes:
    return (np.full(int(seconds * RATE), level, dtype="<i2")).tobytes()


def channels(tape: CallTape) -> tuple[np.ndarray, np.ndarray]:
    stereo = np.frombuffer(tape.stereo(), dtype="<i2").reshape(-1, 2)
    return stereo[:, 0], stereo[:, 1]


def spans(track: np.ndarray, level: int) -> list[tuple[float, float]]:
    """(start, end) seconds of the runs where `track` is `level`."""
    on = np.concatenate([[0], (track == level).astype(np.int8), [0]])
    edges = np.flatnonzero(np.diff(on))
    return [
        (round(float(a) / RATE, 3), round(float(b) / RATE, 3))
        for a, b in zip(edges[::2], edges[1::2], strict=True)
    ]


async def test_each_side_is_heard_where_it_was() -> None:
    clock = VirtualClock(start=100.0)
    tape = CallTape(clock, RATE, audio=True, transcript=True)
    # the caller speaks for 1 s, in 20 ms frames with 5 ms of jitter either way
    for n in range(50):
        await clock.advance(0.02 + (0.005 if n % 2 else -0.005))
        tape.caller_audio(tone(0.02, 1000))
    # the agent's answer: 2 s of audio sent at once at 1.5 s (a transport queues it) ...
    await clock.advance(1.5 - clock.now() + 100.0)
    tape.agent_audio(tone(2.0, 2000))
    # ... the caller barges in at 2.5 s: the rest is never heard
    await clock.advance(1.0)
    tape.agent_cleared()
    tape.caller_audio(tone(0.5, 1000))
    # a result spoken at 4 s, in two chunks sent back to back
    await clock.advance(1.5)
    tape.agent_audio(tone(0.5, 3000))
    tape.agent_audio(tone(0.5, 3000))
    caller, agent = channels(tape)
    # jitter (and the first 15 ms) closes up: one run for the first words, then the
    # barge-in at 2.5 s
    assert spans(caller, 1000) == [(0.0, 1.0), (2.5, 3.0)]
    assert spans(agent, 2000) == [(1.5, 2.5)]
    assert spans(agent, 3000) == [(4.0, 5.0)]
    assert tape.seconds() == 5.0


async def test_the_transcript_keeps_words_tools_and_background_work_with_times() -> None:
    clock = VirtualClock(start=0.0)
    tape = CallTape(clock, RATE, audio=False, transcript=True)
    await clock.advance(1.25)
    tape.event(Transcript(role="user", text="research heat pumps", final=True))
    tape.event(Transcript(role="user", text="research", final=False))  # partial: left out
    tape.event(ToolCall(name="delegate_workers", arguments='{"task": "heat pumps"}', call_id="c"))
    await clock.advance(2.0)
    tape.note("delivery", delivery_id="d1", outcome="delivered", attempt=None)
    document = json.loads(tape.transcript(room_id="research:a"))
    assert document["room_id"] == "research:a" and document["sample_rate"] == RATE
    assert document["entries"] == [
        {"at": 1.25, "kind": "speech", "role": "user", "text": "research heat pumps"},
        {
            "at": 1.25,
            "kind": "tool_call",
            "name": "delegate_workers",
            "arguments": '{"task": "heat pumps"}',
        },
        {"at": 3.25, "kind": "delivery", "delivery_id": "d1", "outcome": "delivered"},
    ]
    assert tape.stereo() == b""  # audio off: nothing kept


def test_the_folder_keeps_a_conversation_together_and_prunes_old_calls(tmp_path: Path) -> None:
    folder = RecordingFolder(tmp_path, b"k" * 32)
    first = folder.save(
        "research:a",
        1_700_000_000.0,
        stereo=bytes(8),
        sample_rate=RATE,
        transcript='{"seconds": 1.5}',
    )
    again = folder.save(
        "research:a", 1_700_000_000.0, stereo=bytes(8), sample_rate=RATE, transcript=None
    )
    other = folder.save(
        "drafting:b", 1_700_000_000.0, stereo=None, sample_rate=RATE, transcript="{}"
    )
    assert (first, again, other) == ("20231114T221320-1", "20231114T221320-2", "20231114T221320-1")
    listed = folder.list("research:a")
    assert [(r.name, r.audio, r.transcript, r.seconds) for r in listed] == [
        (first, True, True, 1.5),
        (again, True, False, 0.0),
    ]
    wav = folder.read("research:a", f"{first}.wav")
    assert wav is not None
    with wave.open(io.BytesIO(wav), "rb") as audio:
        assert (audio.getnchannels(), audio.getframerate(), audio.getnframes()) == (2, RATE, 2)
    assert folder.read("research:a", "../drafting%3Ab/x.json") is None  # only its own names
    assert folder.read("research:a", f"{first}.wav.sealed") is None  # by the plain name
    # a month-old call of research goes; drafting keeps its own days
    old = folder.folder("research:a") / f"{first}.wav.sealed"
    os.utime(old, (0, 0))
    assert folder.prune("research", keep_days=30) == 1
    assert folder.prune("drafting", keep_days=0) == 0
    assert [r.name for r in folder.list("research:a")] == [first, again]  # its JSON stays
    assert folder.delete("research:a") == 2
    assert folder.list("research:a") == [] and len(folder.list("drafting:b")) == 1
