"""The Silero VAD model, loaded from the ONNX file livekit-plugins-silero packages, and the
options its streams decide with.

The model is read as the distribution's data (`importlib.metadata`: no code of the plugin
is imported, so none of its names is used) and run with onnxruntime, with livekit's session
settings (one thread, no spinning). One `SileroModel` serves every stream of a process; each
stream keeps its own RNN state and context (rows of a `SileroBatcher`'s banks).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from voicehub.errors import MissingExtraError, VoicehubError
from voicehub.voice.providers import vendor_import
from voicehub.voice.providers.offline.silero_windows import INT16_MAX, WINDOW

__all__ = ["SILENT_PEAK_DBFS", "SileroModel", "SileroOptions"]

MODEL_DISTRIBUTION = "livekit-plugins-silero"
MODEL_FILE = "silero_vad.onnx"
STATE_SHAPE = (2, 1, 128)  # the model's RNN state for one stream

# A window whose every sample is within this of zero is plainly silent: Silero finds no
# speech in it (Piper speech scaled to a -66 dBFS peak reached p 0.38 at most, against
# the 0.5 that counts as speech; at -60 dBFS it still found some), so the stream decides
# it without running the model (see `SileroOptions.silent_peak_dbfs`).
SILENT_PEAK_DBFS = -70.0
# Windows of silence the model's state takes to forget speech (the distance to its silent
# state falls by e every 30 or so windows of zeros): a stream that skipped n windows moves
# its state this far towards the silent state, exp(-n / SILENT_STATE_WINDOWS).
SILENT_STATE_WINDOWS = 30.0
_SETTLE_WINDOWS = 200  # windows of zeros that bring a fresh state to the silent state


@dataclass
class SileroOptions:
    """livekit's Silero options (same names, same meaning), and the silence gate.

    `silent_peak_dbfs`: windows whose peak stays below this level (dB full scale) are
    decided as silence without running the model, while the stream is not in speech and
    none is accumulating; None runs the model on every window, as livekit's plugin does.
    """

    min_speech_duration: float = 0.05
    min_silence_duration: float = 0.55
    prefix_padding_duration: float = 0.5
    max_buffered_speech: float = 60.0
    activation_threshold: float = 0.5
    deactivation_threshold: float | None = None  # livekit's: activation - 0.15, at least 0.01
    sample_rate: int = 16000
    silent_peak_dbfs: float | None = SILENT_PEAK_DBFS

    def __post_init__(self) -> None:
        if self.sample_rate not in WINDOW:
            raise ValueError(
                f"Silero VAD runs at 8000 or 16000 Hz, not sample_rate={self.sample_rate!r}"
            )
        if self.deactivation_threshold is None:
            self.deactivation_threshold = max(self.activation_threshold - 0.15, 0.01)
        elif self.deactivation_threshold <= 0:
            raise ValueError(
                f"deactivation_threshold must be above 0, got {self.deactivation_threshold!r}"
            )
        if self.silent_peak_dbfs is not None and self.silent_peak_dbfs > -40:
            raise ValueError(
                f"silent_peak_dbfs={self.silent_peak_dbfs!r} would skip audible speech: "
                "use -40 dBFS or lower, or None to run the model on every window"
            )

    @property
    def silent_peak(self) -> int:
        """The gate as an int16 amplitude (-1: no window is skipped)."""
        if self.silent_peak_dbfs is None:
            return -1
        return int(INT16_MAX * 10 ** (self.silent_peak_dbfs / 20))

    @property
    def deactivation(self) -> float:
        """The deactivation threshold, resolved."""
        assert self.deactivation_threshold is not None
        return self.deactivation_threshold


class SileroModel:
    """The Silero ONNX session for one model rate, with its silent state and probability.

    `silent_state` and `silent_probability` are the state and output the model settles to
    on silence (computed at load): a stream that skips silent windows decides them with
    that probability and moves its state towards that state.
    """

    def __init__(self, sample_rate: int = 16000) -> None:
        with vendor_import("onnxruntime"):
            import onnxruntime
        if sample_rate not in WINDOW:
            raise ValueError(f"Silero VAD runs at 8000 or 16000 Hz, not {sample_rate!r}")
        options = onnxruntime.SessionOptions()
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.add_session_config_entry("session.inter_op.allow_spinning", "0")
        options.inter_op_num_threads = 1
        options.intra_op_num_threads = 1
        options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
        self.session: Any = onnxruntime.InferenceSession(
            packaged_model(), sess_options=options, providers=["CPUExecutionProvider"]
        )
        self.sample_rate = sample_rate
        self.window_size, self.context_size = WINDOW[sample_rate]
        self._sr = np.array(sample_rate, dtype=np.int64)
        self._executor: ThreadPoolExecutor | None = None
        self.silent_state, self.silent_probability = self._settle()

    @property
    def executor(self) -> ThreadPoolExecutor:
        """The threads inferences run on (their own: a batch never queues behind the
        loop's other blocking calls), shared by every batcher of this model."""
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=2, thread_name_prefix="silero")
        return self._executor

    def infer(self, inputs: np.ndarray, state: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """One run: `inputs` (rows of context + window, float32), `state` (2, rows, 128);
        the speech probability of each row and the rows' next state."""
        out, state = self.session.run(None, {"input": inputs, "state": state, "sr": self._sr})
        return np.asarray(out, dtype=np.float32).reshape(len(inputs)), state

    def _settle(self) -> tuple[np.ndarray, float]:
        state = np.zeros(STATE_SHAPE, dtype=np.float32)
        inputs = np.zeros((1, self.context_size + self.window_size), dtype=np.float32)
        probability = np.zeros(1, dtype=np.float32)
        for _ in range(_SETTLE_WINDOWS):
            probability, state = self.infer(inputs, state)
        return state.reshape(2, 128), float(probability[0])


def packaged_model() -> bytes:
    """The bytes of the Silero ONNX model that livekit-plugins-silero installs."""
    from importlib import metadata

    try:
        files = metadata.files(MODEL_DISTRIBUTION) or []
    except metadata.PackageNotFoundError:
        raise MissingExtraError(MODEL_DISTRIBUTION, "voice") from None
    for file in files:
        if file.name == MODEL_FILE:
            return file.read_binary()
    raise VoicehubError(
        f"{MODEL_DISTRIBUTION} is installed without its {MODEL_FILE}: reinstall it with "
        "`pip install --force-reinstall livekit-plugins-silero`"
    )
