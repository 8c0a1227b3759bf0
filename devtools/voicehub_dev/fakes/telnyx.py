"""The tests' fake Telnyx: the caller side `voicehub call --carrier telnyx` speaks too
(`voicehub.client.telnyx`, written from the carrier's published docs; docs/carriers.md)."""

from __future__ import annotations

from voicehub.client.telnyx import *  # noqa: F403
from voicehub.client.telnyx import __all__ as __all__
