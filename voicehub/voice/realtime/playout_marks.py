"""What the caller has really heard of the model's audio, from the transport's marks.

Each assistant audio item is one "speech" (its item id is the speech id `VoiceActivity`
tracks). While its audio goes out, a progress mark (`<item>@<ms>`) follows every
`mark_every_ms` of audio, and a final mark (`<item>`) follows its last delta. Transports
confirm marks in order, so a confirmation also settles every earlier mark. The last
confirmed progress mark is the heard position a barge-in truncates the item at: never
later than what was played, at most `mark_every_ms` (plus the transport's ack delay) early.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

__all__ = ["Playout", "Speech"]


@dataclass(eq=False)
class Speech:
    """One assistant audio item on its way to the caller. Times are ms of model audio."""

    item_id: str
    response_id: str
    sent_ms: float = 0.0
    marked_ms: float = 0.0
    heard_ms: float = 0.0
    generating: bool = True
    played: bool = False
    cut: bool = False
    transcript: str | None = None
    posted: bool = False
    withheld: bool = False  # held before its first frame went out: nobody heard it

    @property
    def settled(self) -> bool:
        """Fully played, or cut by a barge-in: nothing more will happen to it."""
        return self.played or self.cut


class Playout:
    """The speeches of one call and the marks still waiting for confirmation."""

    def __init__(self, mark_every_ms: float = 200.0) -> None:
        self.mark_every_ms = mark_every_ms
        self.speeches: dict[str, Speech] = {}
        self._marks: deque[tuple[str, Speech, float, bool]] = deque()

    def audio(self, item_id: str, response_id: str, ms: float) -> tuple[Speech, bool, str | None]:
        """`ms` more audio of `item_id` goes out: (its speech, whether it is new, the
        progress mark to send after this audio, if one is due)."""
        speech = self.speeches.get(item_id)
        new = speech is None
        if speech is None:
            speech = self.speeches[item_id] = Speech(item_id, response_id)
        speech.sent_ms += ms
        if speech.sent_ms - speech.marked_ms < self.mark_every_ms:
            return speech, new, None
        speech.marked_ms = speech.sent_ms
        mark = f"{item_id}@{int(speech.sent_ms)}"
        self._marks.append((mark, speech, speech.sent_ms, False))
        return speech, new, mark

    def finish(self, item_id: str) -> str | None:
        """The item's audio is complete: the final mark to send (None if cut or unknown)."""
        speech = self.speeches.get(item_id)
        if speech is None or speech.cut or not speech.generating:
            return None
        speech.generating = False
        self._marks.append((item_id, speech, speech.sent_ms, True))
        return item_id

    def confirm(self, mark_id: str) -> list[Speech]:
        """The transport played up to `mark_id`: the speeches this completes, in order.
        Unknown, cut or repeated marks are ignored."""
        if all(mark != mark_id for mark, _, _, _ in self._marks):
            return []
        played: list[Speech] = []
        while self._marks:
            mark, speech, position, final = self._marks.popleft()
            speech.heard_ms = max(speech.heard_ms, position)
            if final:
                speech.played = True
                played.append(speech)
            if mark == mark_id:
                break
        return played

    def cut(self) -> list[Speech]:
        """Barge-in: every speech not yet fully played is cut (the transport is cleared,
        so its pending marks will never come)."""
        cut = [s for s in self.speeches.values() if not s.settled]
        for speech in cut:
            speech.cut = True
            speech.generating = False
        self._marks.clear()
        return cut

    def withhold(self, speech: Speech) -> None:
        """`speech` goes out not at all (held at its first frame): cut, its marks dropped,
        the other speeches untouched."""
        speech.cut = speech.withheld = True
        speech.generating = False
        self._marks = deque(entry for entry in self._marks if entry[1] is not speech)

    @property
    def unsettled(self) -> bool:
        """Some speech is still generating or waiting for its playout confirmation."""
        return any(not s.settled for s in self.speeches.values())

    def forget(self, speech: Speech) -> None:
        """Drop a settled speech (keeps the table small on long calls)."""
        if speech.settled:
            self.speeches.pop(speech.item_id, None)
