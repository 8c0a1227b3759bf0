"""libopus' encoder through its C API (ctypes), when the system has the library.

PyAV's encode path sends every frame through an `AudioResampler` filter graph (to cut it to
the codec's frame size) before libopus sees it, and PyAV offers no public way around it: that
doubles the CPU of a 20 ms packet. libopus' own API takes a whole 20 ms frame of PCM16 and
returns the packet. `opus_encoder_ctl` is variadic in C; ctypes calls it with fixed
arguments, which the Linux ABIs (x86-64, aarch64) pass as they pass variadic integers, so it
is used on Linux only. Elsewhere, or without the library (Debian's `libopus0`),
`load_libopus` returns None and `rtc_media.OpusPackets` encodes through PyAV.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import sys
from typing import Any

__all__ = ["APPLICATIONS", "LibOpusEncoder", "OpusError", "load_libopus", "open_libopus"]

APPLICATIONS = {"voip": 2048, "audio": 2049, "lowdelay": 2051}
"""libopus' application constants, by the names PyAV's libopus encoder takes."""
_SET_BITRATE, _SET_COMPLEXITY = 4002, 4010
_MAX_PACKET = 1500  # bytes: libopus' recommended output buffer (an MTU)


class OpusError(RuntimeError):
    """libopus refused a call: names the call and libopus' own reason."""


@functools.cache
def load_libopus() -> Any | None:
    """The system's libopus (ctypes library with typed functions), or None where it cannot
    be used (not Linux, or not installed)."""
    if not sys.platform.startswith("linux"):
        return None
    name = ctypes.util.find_library("opus")
    return open_libopus(name) if name is not None else None


def open_libopus(name: str) -> Any | None:
    """The shared library `name` with libopus' functions typed, or None when it cannot be
    loaded or lacks them."""
    try:
        lib = ctypes.CDLL(name)
        _declare(lib)
    except (OSError, AttributeError):  # not loadable, or not the libopus API we call
        return None
    return lib


def _declare(lib: Any) -> None:
    """The C signatures of the functions called (a missing one raises AttributeError)."""
    lib.opus_encoder_create.restype = ctypes.c_void_p
    lib.opus_encoder_create.argtypes = [
        ctypes.c_int32,
        ctypes.c_int,
        ctypes.c_int,
        ctypes.POINTER(ctypes.c_int),
    ]
    lib.opus_encoder_ctl.restype = ctypes.c_int
    lib.opus_encoder_ctl.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int32]
    lib.opus_encode.restype = ctypes.c_int32
    lib.opus_encode.argtypes = [
        ctypes.c_void_p,
        ctypes.c_char_p,
        ctypes.c_int,
        ctypes.c_char_p,
        ctypes.c_int32,
    ]
    lib.opus_encoder_destroy.restype = None
    lib.opus_encoder_destroy.argtypes = [ctypes.c_void_p]
    lib.opus_strerror.restype = ctypes.c_char_p
    lib.opus_strerror.argtypes = [ctypes.c_int]


class LibOpusEncoder:
    """One mono Opus encoder: PCM16 frames of `samples` samples at `rate` in, packets out."""

    def __init__(
        self, lib: Any, rate: int, samples: int, application: str, complexity: int, bitrate: int
    ) -> None:
        self._handle: int | None = None  # set before anything can fail: `__del__` reads it
        if application not in APPLICATIONS:
            raise ValueError(f"unknown Opus application {application!r}: {sorted(APPLICATIONS)}")
        self._lib = lib
        self.samples = samples
        self._frame_bytes = samples * 2
        error = ctypes.c_int()
        handle = lib.opus_encoder_create(rate, 1, APPLICATIONS[application], ctypes.byref(error))
        if error.value != 0 or not handle:
            raise OpusError(f"opus_encoder_create({rate} Hz): {self._reason(error.value)}")
        self._handle = handle
        self._ctl(_SET_BITRATE, bitrate, "bitrate")
        self._ctl(_SET_COMPLEXITY, complexity, "complexity")
        self._out = ctypes.create_string_buffer(_MAX_PACKET)

    def encode(self, pcm16: bytes) -> bytes:
        """One frame (exactly `samples` samples) as one Opus packet."""
        if len(pcm16) != self._frame_bytes:
            raise ValueError(f"an Opus frame is {self._frame_bytes} bytes here, got {len(pcm16)}")
        if self._handle is None:
            raise OpusError("the encoder is closed")
        size = self._lib.opus_encode(self._handle, pcm16, self.samples, self._out, _MAX_PACKET)
        if size < 0:
            raise OpusError(f"opus_encode: {self._reason(size)}")
        return self._out.raw[:size]

    def close(self) -> None:
        """Free the encoder (idempotent; also done when collected)."""
        if self._handle is not None:
            self._lib.opus_encoder_destroy(self._handle)
            self._handle = None

    def __del__(self) -> None:
        self.close()

    def _ctl(self, request: int, value: int, name: str) -> None:
        assert self._handle is not None
        code = self._lib.opus_encoder_ctl(self._handle, request, value)
        if code != 0:
            self.close()
            raise OpusError(f"opus_encoder_ctl({name}={value}): {self._reason(code)}")

    def _reason(self, code: int) -> str:
        reason: bytes | None = self._lib.opus_strerror(code)
        return reason.decode() if reason else f"error {code}"
