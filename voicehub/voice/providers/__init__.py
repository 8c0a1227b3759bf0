"""Speech providers (STT, TTS, VAD) behind livekit-agents plugin interfaces.

Vendor SDKs are imported lazily, inside :func:`vendor_import`, so that a missing optional
extra surfaces as a :class:`~voicehub.errors.MissingExtraError` naming the extra to install
when the provider is used, not when voicehub is imported.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from voicehub.errors import MissingExtraError


@contextmanager
def vendor_import(package: str, extra: str = "voice") -> Iterator[None]:
    """Turn an ImportError inside the block into MissingExtraError(package, extra).

    Example::

        with vendor_import("piper-tts"):
            from piper import PiperVoice
    """
    try:
        yield
    except ImportError as exc:
        raise MissingExtraError(package, extra) from exc
