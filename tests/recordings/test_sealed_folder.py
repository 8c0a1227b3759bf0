"""Recordings sealed at rest, on real files: a call's WAV and transcript are written only
encrypted (no sample or word of them on disk), read back whole through the folder, and a
missing key, another server's key, a file moved to another conversation or a damaged file
each give an error naming the file and what is wrong. Files of earlier versions, unsealed,
still read; pruning and deleting treat sealed files as before."""

from __future__ import annotations

import io
import json
import os
import shutil
import stat
import wave
from pathlib import Path

import numpy as np
import pytest

from tests.support.speech import spoken
from voicehub.recordings.folder import RecordingFolder
from voicehub.recordings.seal import RecordingKeyError, RecordingSeal

RATE = 16000
KEY = b"k" * 32
STAMP = 1_700_000_000.0  # 20231114T221320
ROOM = "research:alice"


@pytest.fixture(scope="module")
def stereo() -> bytes:
    """The caller's words on the left, the agent's on the right."""
    caller = np.frombuffer(spoken("could you research heat pumps for me please"), "<i2")
    agent = np.frombuffer(spoken("hello there, how are you"), "<i2")
    frames = np.zeros((max(caller.size, agent.size), 2), "<i2")
    frames[: caller.size, 0], frames[: agent.size, 1] = caller, agent
    return frames.tobytes()


def transcript(text: str) -> str:
    return json.dumps({"started_at": STAMP, "seconds": 2.5, "entries": [{"text": text}]})


def test_a_call_is_written_sealed_and_read_back_whole(tmp_path: Path, stereo: bytes) -> None:
    folder = RecordingFolder(tmp_path, KEY)
    words = "my card number is 4111 1111 1111 1111"
    stem = folder.save(ROOM, STAMP, stereo=stereo, sample_rate=RATE, transcript=transcript(words))

    on_disk = sorted(folder.folder(ROOM).iterdir())
    assert [p.name for p in on_disk] == [f"{stem}.json.sealed", f"{stem}.wav.sealed"]
    for path in on_disk:
        raw = path.read_bytes()
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert b"RIFF" not in raw and b"4111" not in raw and b"card" not in raw
        assert stereo[1000:1064] not in raw  # not one run of samples in the clear

    wav = folder.read(ROOM, f"{stem}.wav")
    assert wav is not None
    with wave.open(io.BytesIO(wav), "rb") as audio:
        assert (audio.getnchannels(), audio.getsampwidth(), audio.getframerate()) == (2, 2, RATE)
        assert audio.readframes(audio.getnframes()) == stereo
    document = folder.read(ROOM, f"{stem}.json")
    assert document is not None and json.loads(document)["entries"] == [{"text": words}]
    [listed] = folder.list(ROOM)
    assert (listed.name, listed.started_at, listed.seconds) == (stem, STAMP, 2.5)
    assert listed.audio and listed.transcript
    assert folder.read(ROOM, "20990101T000000-1.wav") is None


def test_another_servers_key_names_the_file_and_the_secret(tmp_path: Path) -> None:
    RecordingFolder(tmp_path, KEY).save(
        ROOM, STAMP, stereo=bytes(8), sample_rate=RATE, transcript=transcript("hi")
    )
    other = RecordingFolder(tmp_path, b"another server's secret, 32 long")
    with pytest.raises(RecordingKeyError) as raised:
        other.read(ROOM, "20231114T221320-1.wav")
    message = str(raised.value)
    assert "'20231114T221320-1.wav'" in message and "'research:alice'" in message
    assert "sealed under another one" in message and "VOICEHUB_NUMBER_KEY" in message
    # it is still listed (time from the file, length unknown) and still deleted and pruned
    [listed] = other.list(ROOM)
    assert (listed.name, listed.seconds, listed.audio, listed.transcript) == (
        "20231114T221320-1",
        0.0,
        True,
        True,
    )
    assert other.delete(ROOM) == 2 and other.list(ROOM) == []


def test_a_folder_without_the_key_neither_writes_nor_opens_sealed_files(tmp_path: Path) -> None:
    RecordingFolder(tmp_path, KEY).save(ROOM, STAMP, stereo=None, sample_rate=RATE, transcript="{}")
    keyless = RecordingFolder(tmp_path)
    with pytest.raises(RecordingKeyError, match="opened without the number secret"):
        keyless.read(ROOM, "20231114T221320-1.json")
    with pytest.raises(RecordingKeyError, match="only written sealed"):
        keyless.save(ROOM, STAMP, stereo=None, sample_rate=RATE, transcript="{}")
    assert sorted(p.name for p in keyless.folder(ROOM).iterdir()) == [
        "20231114T221320-1.json.sealed"
    ]  # nothing written in the clear
    os.utime(keyless.folder(ROOM) / "20231114T221320-1.json.sealed", (STAMP, STAMP))
    assert keyless.prune("research", keep_days=30, now=STAMP + 29 * 86400) == 0
    assert keyless.prune("research", keep_days=30, now=STAMP + 31 * 86400) == 1
    assert not keyless.folder(ROOM).exists()


def test_a_file_moved_renamed_or_damaged_does_not_open(tmp_path: Path) -> None:
    folder = RecordingFolder(tmp_path, KEY)
    folder.save(ROOM, STAMP, stereo=bytes(8), sample_rate=RATE, transcript="{}")
    folder.save(ROOM, STAMP, stereo=bytes(8), sample_rate=RATE, transcript=None)
    source = folder.folder(ROOM)
    # copied into another caller's conversation: bound to its own
    elsewhere = folder.folder("research:mallory")
    elsewhere.mkdir()
    shutil.copy(source / "20231114T221320-1.wav.sealed", elsewhere)
    with pytest.raises(RecordingKeyError, match="changed or moved"):
        folder.read("research:mallory", "20231114T221320-1.wav")
    # one call's file under another call's name
    os.replace(source / "20231114T221320-1.wav.sealed", source / "20231114T221320-2.wav.sealed")
    with pytest.raises(RecordingKeyError, match="changed or moved"):
        folder.read(ROOM, "20231114T221320-2.wav")
    # cut short, or not a sealed file at all
    damaged = source / "20231114T221320-1.json.sealed"
    damaged.write_bytes(damaged.read_bytes()[:-1])
    with pytest.raises(RecordingKeyError, match="changed or moved"):
        folder.read(ROOM, "20231114T221320-1.json")
    damaged.write_bytes(b"{}")
    with pytest.raises(RecordingKeyError, match="damaged: not a sealed recording"):
        folder.read(ROOM, "20231114T221320-1.json")


def test_unsealed_files_of_earlier_versions_still_read(tmp_path: Path) -> None:
    folder = RecordingFolder(tmp_path, KEY)
    old = folder.folder(ROOM)
    old.mkdir(parents=True)
    with wave.open(str(old / "20231114T221320-1.wav"), "wb") as out:
        out.setnchannels(2)
        out.setsampwidth(2)
        out.setframerate(RATE)
        out.writeframes(bytes(4 * RATE))
    assert (
        folder.read(ROOM, "20231114T221320-1.wav") == (old / "20231114T221320-1.wav").read_bytes()
    )
    [listed] = folder.list(ROOM)
    assert (listed.seconds, listed.audio, listed.transcript) == (1.0, True, False)
    # the next call of the same second gets its own number, sealed
    assert folder.save(ROOM, STAMP, stereo=None, sample_rate=RATE, transcript="{}").endswith("-2")
    assert {p.name for p in old.iterdir()} == {
        "20231114T221320-1.wav",
        "20231114T221320-2.json.sealed",
    }


def test_the_recording_key_is_not_the_number_key() -> None:
    """The same secret, another label: a recording's key opens no sealed number."""
    from voicehub.desks.number_vault import NumberVault

    token = NumberVault(KEY).seal("record", "+15550100", "+15550199")
    sealed = RecordingSeal(KEY).seal("record", "x.json", b"{}")
    assert token.encode() not in sealed
    with pytest.raises(RecordingKeyError, match="at least 16"):
        RecordingSeal(b"short")
