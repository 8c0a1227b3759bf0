"""The tests' fake Vonage: the caller side `voicehub call --carrier vonage` speaks too
(`voicehub.client.vonage`, written from the carrier's published docs; docs/carriers.md)."""

from __future__ import annotations

from voicehub.client.vonage import *  # noqa: F403
from voicehub.client.vonage import __all__ as __all__
