"""The fake Deepgram lives in the package (`voicehub.bench.fake_deepgram`): the
`cloud_pipeline` bench runs against it too, and a bench must not import from tests/."""

from voicehub.bench.fake_deepgram import (
    FakeDeepgram,
    ListenSession,
    SpeakSession,
    Synthesizer,
    piper_speech,
)

__all__ = ["FakeDeepgram", "ListenSession", "SpeakSession", "Synthesizer", "piper_speech"]
