"""Model responses of a realtime call, and the speaking requests (say, generate, inject)
waiting on them.

A request tags its `response.create` with `metadata = {"voicehub": token}`; the server
echoes the metadata in `response.created`, which binds the response to the request even if
the model starts another response (a caller turn) at the same moment. A request ends
FINISHED once its response completed and every audio item of it was played (confirmed by
the transport), INTERRUPTED if the response was cancelled, an item was cut, the server
refused the request, or the call ended. A `gated` request (a delivery) ends DEFERRED
instead when it was held at its first audio frame: nothing of it was heard.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from voicehub.delivery.injector import InjectOutcome
from voicehub.errors import VoicehubError
from voicehub.voice.realtime.playout_marks import Speech

__all__ = ["ModelResponse", "SpeakRequest"]


@dataclass(eq=False)
class ModelResponse:
    """One `response.created` ... `response.done`, with the tool calls it asked for."""

    id: str
    token: str | None = None
    status: str | None = None  # set by response.done
    speeches: list[Speech] = field(default_factory=list)
    tool_calls: list[asyncio.Task[dict[str, str]]] = field(default_factory=list)

    @property
    def done(self) -> bool:
        return self.status is not None


@dataclass(eq=False)
class SpeakRequest:
    """A say / generate_reply / inject waiting for its response and its playout."""

    token: str
    future: asyncio.Future[InjectOutcome]
    gated: bool = False  # a delivery: held at its first frame if the caller speaks
    response: ModelResponse | None = None
    held: bool = False  # it was: nothing of it went out

    def settle(self) -> None:
        """Resolve the future if the response says how it went (call after each change)."""
        response = self.response
        if self.future.done() or response is None:
            return
        if self.held:
            self.future.set_result(InjectOutcome.DEFERRED)
        elif response.status == "cancelled" or any(s.cut for s in response.speeches):
            self.future.set_result(InjectOutcome.INTERRUPTED)
        elif response.status == "failed":
            self.future.set_exception(VoicehubError(f"model response {response.id} failed"))
        elif response.done and all(s.played for s in response.speeches):
            self.future.set_result(InjectOutcome.FINISHED)

    def abandon(self) -> None:
        """The request will not be answered (refused, or the call ended)."""
        if not self.future.done():
            self.future.set_result(InjectOutcome.INTERRUPTED)
