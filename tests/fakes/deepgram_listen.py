"""The fake Deepgram's listen behaviour, now `voicehub.bench.fake_deepgram_listen`."""

from voicehub.bench.fake_deepgram_listen import ListenParams, ListenState

__all__ = ["ListenParams", "ListenState"]
