"""Smart Turn v3.2, run locally: the pipeline engine's end-of-turn model.

Smart Turn (pipecat's open end-of-turn model, BSD-2) reads the last 8 s of the caller's
audio and says how likely the caller has finished: from intonation and rhythm, not words,
so it costs no recogniser. The 8.7 MB ONNX file ships inside the pinned `pipecat-ai`
wheel; it is read from there as data (pipecat itself is not imported), checked against
the hash below at load, and nothing is ever downloaded.

Requests from every call are batched (`SmartTurnModel`): a request waits while a batch is
running, and at most `tick` seconds after the previous batch started, then every request
waiting goes through one feature pass and one ONNX run in the model's own thread, off the
event loop. A lone request on an idle model goes at once.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from voicehub.errors import VoicehubError
from voicehub.voice.providers import vendor_import
from voicehub.voice.turns.log_mel import SAMPLE_RATE, fit_window, log_mel_batch

__all__ = [
    "MODEL_PACKAGE",
    "MODEL_PATH",
    "MODEL_SHA256",
    "SAMPLE_RATE",
    "BatchStats",
    "SmartTurnModel",
    "TurnModelError",
    "check_model_file",
    "model_file",
    "shared_turn_model",
    "turn_model_unavailable",
]

log = logging.getLogger("voicehub.voice")

MODEL_PACKAGE = "pipecat-ai"
MODEL_PACKAGE_VERSION = "1.14.0"
MODEL_PATH = "pipecat/audio/turn/smart_turn/data/smart-turn-v3.2-cpu.onnx"
MODEL_SHA256 = "2bb026316b14a660486a75b1733cd3fbab8c2fd0314dc9af7be49f8cca967e4f"
MAX_BATCH = 32  # requests per run: a bigger batch only delays its first answers


class TurnModelError(VoicehubError):
    """The end-of-turn model is missing, of another version, or altered."""


def model_file() -> Path:
    """The Smart Turn model inside the pinned `pipecat-ai` wheel, after checking the
    package's version and the file's hash (TurnModelError naming what to reinstall)."""
    from importlib import metadata

    reinstall = f"pip install '{MODEL_PACKAGE}=={MODEL_PACKAGE_VERSION}'"
    try:
        distribution = metadata.distribution(MODEL_PACKAGE)
    except metadata.PackageNotFoundError:
        raise TurnModelError(
            f"the end-of-turn model ships in {MODEL_PACKAGE}, which is not installed: "
            f"pip install 'voicehub[voice]'"
        ) from None
    if distribution.version != MODEL_PACKAGE_VERSION:
        raise TurnModelError(
            f"{MODEL_PACKAGE} {distribution.version} is installed; voicehub checks the "
            f"Smart Turn model of version {MODEL_PACKAGE_VERSION}: {reinstall}"
        )
    return check_model_file(Path(str(distribution.locate_file(MODEL_PATH))))


def check_model_file(path: Path) -> Path:
    """`path`, once it is known to hold the pinned Smart Turn model (TurnModelError naming
    the file when it is missing or differs from the pinned hash)."""
    reinstall = f"pip install --force-reinstall '{MODEL_PACKAGE}=={MODEL_PACKAGE_VERSION}'"
    if not path.is_file():
        raise TurnModelError(f"the Smart Turn model file {path} is missing: {reinstall}")
    if _sha256(path) != MODEL_SHA256:
        raise TurnModelError(
            f"the Smart Turn model file {path} does not match the pinned hash: {reinstall}"
        )
    return path


@functools.cache
def turn_model_unavailable() -> str | None:
    """Why the end-of-turn model cannot run here (a package missing, the file altered), or
    None when it can (once per process: the check reads the whole file)."""
    try:
        model_file()
        with vendor_import("onnxruntime"):
            import onnxruntime  # noqa: F401
    except VoicehubError as exc:
        return str(exc)
    return None


def _sha256(path: Path) -> str:
    with path.open("rb") as file:
        return hashlib.file_digest(file, "sha256").hexdigest()


@dataclass
class _Request:
    audio: npt.NDArray[np.float32]
    answer: asyncio.Future[float]


@dataclass
class BatchStats:
    """Counters for the bench: runs, utterances, and the model thread's CPU time."""

    batches: int = 0
    utterances: int = 0
    cpu_seconds: float = 0.0
    sizes: list[int] = field(default_factory=list)


class SmartTurnModel:
    """An `EndOfTurnModel` on Smart Turn v3.2, batched across calls (see the module).

    One per process (`shared_turn_model`): it serves every call, on any event loop (a
    request is answered on the loop that asked). `session` is an onnxruntime session on
    the model file; `tick` is the shortest time between two batches' starts.
    """

    def __init__(self, session: Any, *, tick: float = 0.01) -> None:
        self.session = session
        self.tick = tick
        self.stats = BatchStats()
        self._waiting: list[_Request] = []
        self._running = False
        self._timer: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._last_batch = float("-inf")
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="smart-turn")

    @classmethod
    def load(cls, path: Path | None = None, *, tick: float = 0.01) -> SmartTurnModel:
        """Load the model file (the pinned wheel's by default), checked against its hash
        (TurnModelError when it cannot be used)."""
        path = model_file() if path is None else check_model_file(path)
        with vendor_import("onnxruntime"):
            import onnxruntime as ort

        options = ort.SessionOptions()
        # One thread per run: calls are batched, and the engine's loop needs the other core.
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        try:
            session = ort.InferenceSession(
                str(path), sess_options=options, providers=["CPUExecutionProvider"]
            )
        except Exception as exc:  # onnxruntime raises its own types
            raise TurnModelError(f"the Smart Turn model {path} does not load: {exc}") from exc
        return cls(session, tick=tick)

    async def completion_probability(self, audio: npt.NDArray[np.float32]) -> float:
        """Probability in [0, 1] that the speech in `audio` (16 kHz mono float32 in
        [-1, 1], ending now) is a complete turn; only its last 8 s are read."""
        if not isinstance(audio, np.ndarray) or audio.ndim != 1:
            raise ValueError("audio must be a one-dimensional numpy array of samples")
        if audio.dtype != np.float32:
            raise ValueError(f"audio must be float32 samples in [-1, 1], not {audio.dtype}")
        loop = asyncio.get_running_loop()
        if loop is not self._loop:  # requests and timer of a loop that ended died with it
            self._loop, self._waiting, self._timer = loop, [], None
            self._running, self._last_batch = False, float("-inf")
        answer: asyncio.Future[float] = loop.create_future()
        self._waiting.append(_Request(fit_window(audio), answer))
        self._schedule()
        return await answer

    def probabilities(self, utterances: list[npt.NDArray[np.float32]]) -> list[float]:
        """Probabilities of `utterances` in one batch, in this thread (tests, the bench)."""
        windows = np.stack([fit_window(audio) for audio in utterances])
        return [float(p) for p in self._infer(windows)]

    def _schedule(self) -> None:
        if self._running or self._timer is not None or not self._waiting:
            return
        loop = asyncio.get_running_loop()
        due = self._last_batch + self.tick
        if loop.time() >= due:
            self._flush()
        else:
            self._timer = loop.call_at(due, self._flush)

    def _flush(self) -> None:
        self._timer = None
        batch = [r for r in self._waiting[:MAX_BATCH] if not r.answer.done()]
        self._waiting = self._waiting[MAX_BATCH:]
        if not batch:
            self._schedule()
            return
        loop = asyncio.get_running_loop()
        self._running, self._last_batch = True, loop.time()
        windows = np.stack([request.audio for request in batch])
        run = loop.run_in_executor(self._executor, self._infer, windows)
        run.add_done_callback(lambda done: self._resolve(batch, done))

    def _infer(self, windows: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        """Features and one ONNX run for a batch (on the model's thread)."""
        import time

        started = time.thread_time()
        features = log_mel_batch(windows)
        (logits,) = self.session.run(None, {"input_features": features})
        # the exported model ends in a sigmoid: its output is the probability already
        probabilities = np.clip(np.asarray(logits, dtype=np.float32).reshape(len(windows)), 0, 1)
        self.stats.cpu_seconds += time.thread_time() - started
        self.stats.batches += 1
        self.stats.utterances += len(windows)
        self.stats.sizes.append(len(windows))
        return probabilities

    def _resolve(self, batch: list[_Request], done: asyncio.Future[Any]) -> None:
        self._running = False
        error = None if done.cancelled() else done.exception()
        if done.cancelled() or error is not None:
            log.error("end-of-turn batch of %d failed: %r", len(batch), error)
            for request in batch:
                if not request.answer.done():
                    request.answer.set_exception(
                        TurnModelError(f"the end-of-turn model failed: {error!r}")
                    )
        else:
            for request, probability in zip(batch, done.result().tolist(), strict=True):
                if not request.answer.done():  # the engine may have stopped waiting
                    request.answer.set_result(float(probability))
        self._schedule()


@functools.cache
def shared_turn_model() -> SmartTurnModel:
    """The process's one Smart Turn model, loaded on first use (TurnModelError when it
    cannot be; `turn_model_unavailable` says why without loading it)."""
    return SmartTurnModel.load()
