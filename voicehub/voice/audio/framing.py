"""Fixed-duration frames: their byte sizes, checking them, and cutting a stream into them."""

from __future__ import annotations

from voicehub.errors import ProtocolError

FRAME_MS = 20
"""Frame duration every transport and the voice session agree on."""


def frame_bytes(sample_rate: int, frame_ms: int = FRAME_MS, sample_width: int = 2) -> int:
    """Bytes in one mono frame: 640 for 20 ms at 16 kHz PCM16, 160 for 20 ms of 8 kHz mu-law."""
    samples, rest = divmod(sample_rate * frame_ms, 1000)
    if rest or samples <= 0:
        raise ValueError(f"{frame_ms} ms at {sample_rate} Hz is not a whole number of samples")
    return samples * sample_width


def check_frame(
    data: bytes, sample_rate: int, frame_ms: int = FRAME_MS, sample_width: int = 2
) -> None:
    """Raise ProtocolError unless ``data`` is exactly one frame."""
    expected = frame_bytes(sample_rate, frame_ms, sample_width)
    if len(data) != expected:
        kind = "PCM16" if sample_width == 2 else f"{8 * sample_width}-bit"
        raise ProtocolError(
            f"{kind} frame has {len(data)} bytes: expected {expected} "
            f"({frame_ms} ms at {sample_rate} Hz)"
        )


class FrameSplitter:
    """Cut a byte stream into fixed frames (20 ms by default), keeping the remainder.

    Transports deliver audio in arbitrary chunk sizes; VAD and STT want fixed frames.
    """

    def __init__(self, sample_rate: int, frame_ms: int = FRAME_MS, sample_width: int = 2) -> None:
        self.sample_rate = sample_rate
        self.frame_ms = frame_ms
        self.frame_size = frame_bytes(sample_rate, frame_ms, sample_width)
        self._pending = bytearray()

    @property
    def pending(self) -> int:
        """Bytes held back until the next push completes a frame."""
        return len(self._pending)

    def push(self, data: bytes | bytearray | memoryview) -> list[bytes]:
        """Append ``data``; return every complete frame, in order."""
        self._pending += data
        whole = len(self._pending) - len(self._pending) % self.frame_size
        frames = [
            bytes(self._pending[i : i + self.frame_size]) for i in range(0, whole, self.frame_size)
        ]
        del self._pending[:whole]
        return frames

    def flush(self, pad: bool = True) -> bytes | None:
        """Return the remainder as a last frame (zero-padded if ``pad``), or None if empty."""
        if not self._pending:
            return None
        rest = bytes(self._pending)
        self._pending.clear()
        return rest.ljust(self.frame_size, b"\x00") if pad else rest
