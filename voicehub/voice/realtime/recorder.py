"""What a realtime call records: room events and the caller's client events, in order.

Both go through one `EventOutbox`, so the event reader never waits on the store or the
caller's socket, and a transcript posted to the room precedes its client event.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from voicehub.core.events import EventKind
from voicehub.voice.event_outbox import EventOutbox, voice_event
from voicehub.voice.events import ProviderError, ServerEvent

if TYPE_CHECKING:
    from voicehub.voice.session import CallRuntime
    from voicehub.voice.transport import CallTransport

__all__ = ["CallRecorder"]

log = logging.getLogger("voicehub.voice.realtime")


class CallRecorder:
    """Posts to room `room_id` and sends client events on `transport`; `speaker()` names
    the agent that speaks now (the source of assistant events)."""

    def __init__(
        self,
        hub: CallRuntime,
        room_id: str,
        transport: CallTransport,
        speaker: Callable[[], str],
    ) -> None:
        self.hub, self.room_id, self.transport = hub, room_id, transport
        self._speaker = speaker
        self.outbox = EventOutbox(room_id)

    def post(self, kind: EventKind, text: str, *, role: str = "assistant", **meta: Any) -> None:
        """Append an event to the room (`source` in `meta` overrides the speaking agent)."""
        source = meta.pop("source", None) or self._speaker()
        event = voice_event(kind, text, role=role, source=source, metadata=meta)
        self.outbox.put(lambda: self.hub.post(self.room_id, event))

    def send_client(self, event: ServerEvent) -> None:
        """Send `event` to the caller's client."""
        self.outbox.put(lambda: self.transport.send_event(event))

    def report(self, code: str, message: str) -> None:
        """A model fault: in the client's events, the room's history and the log."""
        log.warning("room %s: model %s: %s", self.room_id, code, message)
        self.send_client(ProviderError(source="model_error", message=f"{code}: {message}"))
        self.post(EventKind.SYSTEM, f"model error {code}: {message}", role="system")

    def note(self, message: str) -> None:
        """A model event worth keeping that is not a fault (a restored connection)."""
        log.info("room %s: %s", self.room_id, message)
        self.post(EventKind.SYSTEM, message, role="system")
