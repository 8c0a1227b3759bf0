"""The type of the object `argparse` gives for adding subcommands (each CLI module adds its
own parser to it)."""

from __future__ import annotations

import argparse
from typing import Any, Protocol

__all__ = ["Subcommands"]


class Subcommands(Protocol):
    """What `ArgumentParser.add_subparsers()` returns, as the CLI modules use it."""

    def add_parser(self, name: str, **kwargs: Any) -> argparse.ArgumentParser: ...
