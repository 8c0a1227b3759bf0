"""The package re-exports every concept module's public names, so old imports keep working."""

from __future__ import annotations

import importlib
import inspect
from types import GenericAlias, ModuleType

import voicehub.voice.audio as audio

CONCEPTS = ("pcm", "g711", "resample", "framing", "wav", "level")


def public_names(module: ModuleType) -> list[str]:
    """Names a module defines itself (imports of other modules' names are left out)."""
    names = []
    for name, value in vars(module).items():
        if name.startswith("_") or name == "annotations" or inspect.ismodule(value):
            continue
        defined_in = getattr(value, "__module__", module.__name__)
        is_alias = isinstance(value, GenericAlias)  # Int16Array and the like: constants
        if callable(value) and not is_alias and defined_in != module.__name__:
            continue
        names.append(name)
    return names


def test_every_public_name_of_the_concept_modules_is_re_exported() -> None:
    for concept in CONCEPTS:
        module = importlib.import_module(f"voicehub.voice.audio.{concept}")
        for name in public_names(module):
            assert name in audio.__all__, f"{concept}.{name} is not re-exported"
            assert getattr(audio, name) is getattr(module, name)


def test_all_lists_only_names_that_exist() -> None:
    assert all(hasattr(audio, name) for name in audio.__all__)
