"""Piper's first audio before its first sentence is synthesized whole: :class:`ChunkedVoice`.

A Piper voice (VITS) is one ONNX graph: text encoder, durations and flow up to a latent of
one frame per 256 samples, then the vocoder (HiFi-GAN) from that latent to audio. The
vocoder is most of the cost and reads the latent locally, so the graph is split once, at the
vocoder's input (the input of its first convolution, `/dec/conv_pre/Conv`), and the latent
is decoded in chunks, each with `PAD` frames of its neighbours on both sides, kept only for
their context: the chunks join into the audio the whole graph gives (the largest difference
measured was under 1e-6 of full scale with 12 frames; 8 frames left 1.3e-3). The first chunk
is short (`FIRST_FRAMES`) so that it comes soon; the rest are longer (`FRAMES`), fewer runs.

Piper normalizes each sentence to full scale, which needs the whole sentence; chunks are
scaled by one fixed `GAIN` instead (the joe voice's sentence peaks measured 0.29-0.64 of
full scale, so the loudest come out near full scale and none clip).

The idea is the `streaming-vits` package's (MIT); none of its code is used.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from voicehub.voice.audio import Int16Array
from voicehub.voice.providers import vendor_import

__all__ = ["FIRST_FRAMES", "FRAMES", "GAIN", "PAD", "ChunkedVoice", "chunk_spans"]

FIRST_FRAMES = 16
"""Latent frames of a sentence's first chunk (about 0.19 s of audio at 22.05 kHz)."""
FRAMES = 64
"""Latent frames of every later chunk."""
PAD = 12
"""Latent frames of context decoded on each side of a chunk and dropped."""
GAIN = 1.5
"""The fixed scale of chunked audio (see the module)."""
_VOCODER_INPUT_NODE = "/dec/conv_pre/Conv"


def chunk_spans(
    frames: int, first: int = FIRST_FRAMES, size: int = FRAMES
) -> list[tuple[int, int]]:
    """The (start, end) latent frames of each chunk of a sentence of `frames` frames."""
    spans: list[tuple[int, int]] = []
    start = 0
    while start < frames:
        end = min(frames, start + (first if not spans else size))
        spans.append((start, end))
        start = end
    return spans


class ChunkedVoice:
    """A Piper voice's graph split at the vocoder (see the module): `latent` runs the text
    side, `audio` decodes a latent in chunks. Both blocking; thread-safe as onnxruntime's
    sessions are."""

    def __init__(self, model_path: str, *, threads: int = 1) -> None:
        with vendor_import("onnx"):
            import onnx
            from onnx.utils import Extractor
        with vendor_import("piper-tts"):
            import onnxruntime

        model = onnx.load(model_path)
        latent = vocoder_input(model.graph.node)
        inputs = [i.name for i in model.graph.input]
        outputs = [o.name for o in model.graph.output]
        extractor = Extractor(model)
        front = extractor.extract_model(inputs, [latent])
        back = extractor.extract_model([latent], outputs)

        def session(graph: Any) -> Any:
            options = onnxruntime.SessionOptions()
            options.intra_op_num_threads = threads
            options.inter_op_num_threads = 1
            options.enable_cpu_mem_arena = False  # as the whole voice's (tts_engines)
            return onnxruntime.InferenceSession(
                graph.SerializeToString(), options, providers=["CPUExecutionProvider"]
            )

        self._front = session(front)
        self._back = session(back)
        self._latent_name = latent
        self._hop = 256

    def latent(self, phoneme_ids: Sequence[int], scales: Sequence[float]) -> np.ndarray:
        """The latent of one sentence's phoneme ids (noise, length and noise-width scales,
        as Piper orders them): shape (1, channels, frames)."""
        feed = {
            "input": np.array([list(phoneme_ids)], np.int64),
            "input_lengths": np.array([len(phoneme_ids)], np.int64),
            "scales": np.array(list(scales), np.float32),
        }
        result: np.ndarray = self._front.run(None, feed)[0]
        return result

    def vocode(self, latent: np.ndarray) -> np.ndarray:
        """`latent` decoded in one run, as floats (what the chunks join into, unscaled)."""
        wave: np.ndarray = self._back.run(None, {self._latent_name: latent})[0]
        return wave.reshape(-1)

    def audio(self, latent: np.ndarray) -> Iterator[Int16Array]:
        """`latent` decoded chunk by chunk (`chunk_spans`), scaled by `GAIN`, as int16."""
        frames = latent.shape[2]
        for start, end in chunk_spans(frames):
            low, high = max(0, start - PAD), min(frames, end + PAD)
            wave = self._back.run(None, {self._latent_name: latent[:, :, low:high]})[0]
            kept = wave.reshape(-1)[(start - low) * self._hop : (end - low) * self._hop]
            scaled = np.clip(kept * GAIN, -1.0, 1.0) * 32767.0
            yield scaled.astype(np.int16)


def vocoder_input(nodes: Sequence[Any]) -> str:
    """The name of the tensor the vocoder reads: the input of its first convolution
    (ValueError when the graph has none: not a Piper VITS voice)."""
    for node in nodes:
        if node.name == _VOCODER_INPUT_NODE:
            return str(node.input[0])
    raise ValueError(f"the voice's graph has no {_VOCODER_INPUT_NODE} node to split at")
