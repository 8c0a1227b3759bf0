"""Records the Moonshine tests' fixtures (run once; the WAVs are committed):

    .venv/bin/python tests/data/moonshine/make_moonshine_fixtures.py

Piper's voice (deterministic with its noise turned off, `tts_engines`) at 16 kHz, mono PCM16:

- `request.wav`: one request to the research desk;
- `paused_request.wav`: the same request with a pause of 0.8 s before "for me please" (a
  stream decodes the first part at the pause, and the final verifies that draft);
- `long_turn.wav`: three sentences with pauses of 0.6 s, over `moonshine_guards.MAX_PIECE`
  seconds (decoded in pieces cut at its pauses).
"""

from __future__ import annotations

import wave
from pathlib import Path

from voicehub.voice.providers.offline import synthesize

RATE = 16000
HERE = Path(__file__).resolve().parent

REQUEST = "Could you research heat pumps for me please."
LONG_TURN = (
    "I have been thinking about the heating in my old house for a long time now.",
    "The boiler is twenty years old and the bills keep going up every winter.",
    "So could you research heat pumps and solar panels for me please.",
)


def silence(seconds: float) -> bytes:
    return bytes(2 * round(seconds * RATE))


def write(name: str, pcm16: bytes) -> None:
    with wave.open(str(HERE / name), "wb") as file:
        file.setnchannels(1)
        file.setsampwidth(2)
        file.setframerate(RATE)
        file.writeframes(pcm16)
    print(f"{name}: {len(pcm16) / 2 / RATE:.2f} s")


def main() -> None:
    write("request.wav", silence(0.3) + synthesize(REQUEST) + silence(0.3))
    first, rest = "Could you research heat pumps", "for me please."
    write(
        "paused_request.wav",
        silence(0.3) + synthesize(first) + silence(0.8) + synthesize(rest) + silence(0.3),
    )
    parts = [synthesize(sentence) for sentence in LONG_TURN]
    write("long_turn.wav", silence(0.3) + silence(0.6).join(parts) + silence(0.3))


if __name__ == "__main__":
    main()
