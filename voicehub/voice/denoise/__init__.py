"""Noise suppression of the caller's audio for turn-taking: the VAD and the speech evidence
hear the filtered audio, the recognizer the audio as sent (`CallerAudio`).

A desk chooses it with `[voice] denoise` (`"rnnoise"` or `"off"`); `caller_filter` makes one
call's filter for the call's audio rate. `RNNoiseFilter` (`stream`) runs RNNoise from the
pyrnnoise wheel's library (`rnnoise_library`), resampled once each way. docs/noise.md has what
it buys and costs.
"""

from __future__ import annotations

from typing import Literal, Protocol

from voicehub.errors import ConfigError

__all__ = ["PHONE_DENOISE", "DenoiseKind", "FrameFilter", "caller_filter", "line_default"]

DenoiseKind = Literal["rnnoise", "off"]

PHONE_DENOISE: DenoiseKind = "off"
"""What a desk that does not say gets on an 8 kHz phone line. RNNoise does not win there on
the noise bench (`voicehub bench --only noise`, docs/noise.md): it takes noise alone for
nobody, but it also suppresses many callers' own words on narrowband audio, so the VAD
misses their turns; phone lines stay as heard."""


class FrameFilter(Protocol):
    """A per-call filter of caller PCM16: the same number of samples out as in."""

    def process(self, pcm16: bytes) -> bytes: ...

    def close(self) -> None: ...


def line_default(sample_rate: int) -> DenoiseKind:
    """The denoise setting of a desk that does not choose: `PHONE_DENOISE` on 8 kHz phone
    audio, off on wideband lines (browsers, WebRTC, LiveKit), whose callers' own devices
    already suppress noise."""
    return PHONE_DENOISE if sample_rate == 8000 else "off"


def caller_filter(kind: DenoiseKind | None, sample_rate: int) -> FrameFilter | None:
    """The filter `kind` names for one call at `sample_rate` (unset: `line_default`); None
    for "off"."""
    if kind is None:
        kind = line_default(sample_rate)
    if kind == "off":
        return None
    if kind == "rnnoise":
        from voicehub.voice.denoise.stream import RNNoiseFilter

        return RNNoiseFilter(sample_rate)
    raise ConfigError(f"denoise {kind!r}: expected 'rnnoise' or 'off'")
