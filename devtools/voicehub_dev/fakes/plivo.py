"""The tests' fake Plivo: the caller side `voicehub call --carrier plivo` speaks too
(`voicehub.client.plivo`, written from the carrier's published docs; docs/carriers.md)."""

from __future__ import annotations

from voicehub.client.plivo import *  # noqa: F403
from voicehub.client.plivo import __all__ as __all__
