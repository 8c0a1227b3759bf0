"""`voicehub call` as a user types it (the call itself is exercised end to end in
tests/server/test_e2e.py)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from voicehub.cli import call, main
from voicehub.voice.audio import write_wav


def test_say_and_wav_keep_their_order() -> None:
    parser = argparse.ArgumentParser(prog="voicehub")
    call.add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["call", "drafting", "--say", "hi", "--wav", "a.wav", "--say", "bye"])
    assert args.lines == [("say", "hi"), ("wav", "a.wav"), ("say", "bye")]


def test_user_errors_are_one_clear_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["call", "research"]) == 2
    assert "add --say 'your words' or --wav" in capsys.readouterr().err
    assert main(["call", "research", "--wav", str(tmp_path / "missing.wav")]) == 2
    assert "cannot use it as the caller's audio" in capsys.readouterr().err

    recording = tmp_path / "hello.wav"
    write_wav(recording, bytes(8000 * 2), 8000)
    assert main(["call", "research", "--server", "http://127.0.0.1:9", "--wav", str(recording)])
    err = capsys.readouterr().err
    assert "cannot reach http://127.0.0.1:9" in err and "voicehub serve" in err


def test_a_pause_joins_the_lines_around_it_into_one_hesitant_utterance() -> None:
    parser = argparse.ArgumentParser(prog="voicehub")
    call.add_parser(parser.add_subparsers(dest="command", required=True))
    typed = ["call", "research", "--say", "could you research", "--pause", "0.8"]
    typed += ["--say", "heat pumps", "--say", "thanks"]
    args = parser.parse_args(typed)
    spoken = {"could you research": b"\x01\x00" * 10, "heat pumps": b"\x02\x00" * 5}
    spoken["thanks"] = b"\x03\x00"
    lines = call.caller_lines(args.lines, say=spoken.__getitem__, wav=lambda _: b"")
    silence = bytes(2 * int(0.8 * 16000))
    hesitant = spoken["could you research"] + silence + spoken["heat pumps"]
    assert lines == [
        ("could you research (0.8 s pause) heat pumps", hesitant),
        ("thanks", spoken["thanks"]),
    ]


def test_a_pause_needs_words_on_both_sides(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["call", "research", "--pause", "1", "--say", "hello"]) == 2
    assert "--pause goes between two lines" in capsys.readouterr().err
