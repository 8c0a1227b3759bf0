"""Caller audio to the model in batches of `input_audio_buffer.append`.

Each append is a WebSocket message: a JSON frame, a base64 encoding, a send through the
SDK and a syscall, whatever its size, and at one per 20 ms frame it was most of the relay's
cost. So frames are batched, by what they hold (the caller's per-frame speech evidence,
`voice.speech_evidence`, says which frames are speech-like):

- **the start of speech goes at once**: a speech-like frame after quiet ones flushes the
  batch, so the server VAD hears a barge-in as soon as it is said (no audio held back);
- **speech goes in 60 ms batches**: the server VAD counts audio, not wall time, so a batch
  only delays what it decides by the audio still waiting here; 60 ms cuts the appends
  threefold, and longer batches save little more;
- **quiet audio goes in 120 ms batches**: nothing waits on it (a pause inside a turn is
  flushed at once, below), and a caller is quiet much of a call. Not longer: speech the
  evidence takes for quiet (soft, over a loud noise floor) is held back at most 100 ms;
- **the end of a turn is not held back**: while the model hears the caller (between its
  `speech_started` and `speech_stopped`), a quiet frame flushes the batch at once, so the
  silence that ends the turn reaches the server as it happens.

Control events flush first as well (`flush`), so audio and commits keep their order.

A batch goes to the model as 24 kHz PCM16 (`audio/pcm`), or, on a phone line, as G.711
mu-law at 8 kHz (`audio/pcmu`, `mulaw=True`): the caller's own mu-law again (encoding the
transport's decode is exact), one table lookup per batch, nothing resampled. Audio at the
model's rate already is handed over as it was gathered, not copied.
"""

from __future__ import annotations

from voicehub.errors import ConfigError
from voicehub.voice.audio import lin2ulaw
from voicehub.voice.realtime.config import MODEL_RATE
from voicehub.voice.realtime.pcm_resampler import PcmResampler

__all__ = ["BATCH_MS", "QUIET_BATCH_MS", "AudioBatcher"]

BATCH_MS = 60
QUIET_BATCH_MS = 120


class AudioBatcher:
    """PCM16 frames at the transport rate in, batches in the model's input format out
    (24 kHz PCM16, or mu-law at 8 kHz with `mulaw`)."""

    def __init__(
        self,
        from_rate: int,
        batch_ms: int = BATCH_MS,
        quiet_batch_ms: int = QUIET_BATCH_MS,
        *,
        mulaw: bool = False,
    ) -> None:
        if mulaw and from_rate != 8000:
            raise ConfigError(f"mu-law batches need 8 kHz audio, not {from_rate} Hz")
        self.batch_bytes = from_rate * 2 * batch_ms // 1000
        self.quiet_batch_bytes = from_rate * 2 * quiet_batch_ms // 1000
        self.in_turn = False  # the model hears the caller speaking: flush at pauses
        self._mulaw = mulaw
        resampled = not mulaw and from_rate != MODEL_RATE
        self._resampler = PcmResampler(from_rate, MODEL_RATE) if resampled else None
        self._pending = bytearray()
        self._voiced = False  # the last frame was speech-like

    def push(self, pcm16: bytes, voiced: bool) -> bytes | bytearray | None:
        """Add one frame (`voiced`: speech-like); the batch to send if one is due."""
        onset = voiced and not self._voiced
        self._voiced = voiced
        self._pending += pcm16
        if onset or (self.in_turn and not voiced):
            return self.flush()
        limit = self.batch_bytes if voiced or self.in_turn else self.quiet_batch_bytes
        return self.flush() if len(self._pending) >= limit else None

    def flush(self) -> bytes | bytearray:
        """Everything waiting, in the model's format (may be empty); the caller owns it."""
        pending = self._pending
        if not pending:
            return b""
        if self._resampler is not None:  # the encoders read the buffer in place
            batch: bytes | bytearray = self._resampler.push(pending)
        elif self._mulaw:
            batch = lin2ulaw(pending)
        else:
            self._pending = bytearray()  # handed over whole: nothing to convert
            return pending
        pending.clear()
        return batch

    def reset(self) -> None:
        """Drop what waits (the connection it was for is gone)."""
        self._pending.clear()
        self.in_turn = self._voiced = False
