"""Errors voicehub raises. Each message says what is wrong and what to do about it."""

from __future__ import annotations


class VoicehubError(Exception):
    """Base class of every error voicehub raises on purpose."""


class ConfigError(VoicehubError):
    """A desk file or a constructor argument is invalid."""


class UnknownAgentError(VoicehubError):
    """An agent id was named that the hub or orchestration does not know."""


class RoomNotFoundError(VoicehubError):
    """A room id was named that does not exist (or is closed)."""


class RoomClosedError(VoicehubError):
    """An event was posted to, or work started in, a room that is closed."""


class ToolError(VoicehubError):
    """A tool was called with bad arguments or failed; the model sees the message."""


class StoreError(VoicehubError):
    """The store could not read or write (corrupt file, schema mismatch)."""


class StoreUnavailableError(StoreError):
    """The store cannot be reached for now (Redis down or restarting, a SQLite file locked by
    another process): the same call may succeed once it is back."""


class MissingExtraError(VoicehubError):
    """An optional dependency is missing; the message names the pip extra to install."""

    def __init__(self, package: str, extra: str) -> None:
        super().__init__(
            f"{package} is not installed: install it with `pip install 'voicehub[{extra}]'`"
        )
        self.package = package
        self.extra = extra


class ProtocolError(VoicehubError):
    """A peer sent a frame that breaks the wire protocol (bad JSON, wrong size, unknown type)."""
