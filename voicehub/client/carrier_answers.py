"""What the carriers' sides share around the stream: the answer they read and the tunnel."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from voicehub.client.carrier_line import CarrierLine, Dialect
from voicehub.core.clock import Clock, SystemClock

__all__ = ["StreamAnswer", "Tunnel"]


@dataclass(frozen=True)
class StreamAnswer:
    """The media stream a carrier's answer asks for: its URL (as written), the parameters
    it carries, the call it belongs to, and where the call goes once the stream closes."""

    url: str
    parameters: dict[str, str]
    call_id: str
    caller: str
    after_stream: str | None = None  # the <Redirect> URL, if the answer has one
    attributes: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Tunnel:
    """The public URL the carrier was given, ending at the local server."""

    local_url: str  # http://127.0.0.1:<port>
    public_url: str  # https://voicehub.test

    def local(self, public: str, scheme: str = "http") -> str:
        parts, local = urlsplit(public), urlsplit(self.local_url)
        scheme = scheme if parts.scheme in ("https", "http") else "ws"
        query = f"?{parts.query}" if parts.query else ""
        return f"{scheme}://{local.netloc}{parts.path}{query}"

    def public(self, path: str) -> str:
        return self.public_url.rstrip("/") + path

    @contextlib.asynccontextmanager
    async def open_stream(
        self,
        answer: StreamAnswer,
        dialect: Dialect,
        *,
        clock: Clock | None = None,
        playout_speed: float = 16.0,
        hang_up: bool = True,
    ) -> AsyncIterator[CarrierLine]:
        """Open the media stream the answer named; hang up (or just close) at the end."""
        line = CarrierLine(
            self.local(answer.url, scheme="ws"),
            dialect,
            clock=clock or SystemClock(),
            playout_speed=playout_speed,
        )
        await line.open()
        try:
            yield line
        finally:
            await line.hang_up() if hang_up else await line.close()
