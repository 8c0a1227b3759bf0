"""How a `voicehub call` ended, in words and as an exit code.

Every call ends one of these ways, and the command says which (one line on stderr) and
exits with its code, so a script can tell them apart:

| ending      | code | when |
|-------------|------|------|
| settled     | 0    | the conversation settled (results spoken) and the caller hung up |
| timed out   | 1    | `--timeout` passed before it settled (what it still waited for is named) |
| refused     | 3    | the server refused the call: unknown desk, token, a desk that cannot start |
| ended       | 4    | the server closed a live call (an error, a newer connection replaced it) |
| draining    | 5    | the server is shutting down: it refused the call, or ended it (drain) |
| interrupted | 130  | Ctrl-C: the caller hung up |

(2 is the CLI's own: a usage error, or no server at the address.)
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from voicehub.client.report import CallReport
from voicehub.errors import VoicehubError
from voicehub.voice.events import CallError, CallStatus

__all__ = [
    "CallClosed",
    "CallEnding",
    "CallRefused",
    "Ending",
    "ending_of",
    "interrupted",
    "refusal",
]

# Close codes of voicehub.transports.websocket.CloseCode, as the client sees them.
_GOING_AWAY = 1001  # the drain's end (or a server stopping)
_TRY_AGAIN_LATER = 1013  # refused while draining
_INTERNAL_ERROR = 1011  # the server could not start or run the call
_REPLACED = 4409
_REFUSING = {4400, 4401, 4404}  # bad request, unauthorized, unknown desk


class Ending(StrEnum):
    SETTLED = "settled"
    TIMED_OUT = "timed out"
    REFUSED = "refused"
    ENDED = "ended"
    DRAINING = "draining"
    INTERRUPTED = "interrupted"


EXIT_CODES = {
    Ending.SETTLED: 0,
    Ending.TIMED_OUT: 1,
    Ending.REFUSED: 3,
    Ending.ENDED: 4,
    Ending.DRAINING: 5,
    Ending.INTERRUPTED: 130,
}


@dataclass(frozen=True)
class CallEnding:
    """One call's ending: its kind, the sentence that explains it, its exit code.
    `refused`: the call never ran (the server refused it, or could not start it), so there
    is no conversation to summarize, no agent audio and nothing to call back to."""

    kind: Ending
    message: str
    refused: bool = False

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.kind]


class CallRefused(VoicehubError):
    """The server did not start the call (raised by `CallClient.connect`)."""

    def __init__(self, message: str, report: CallReport) -> None:
        super().__init__(message)
        self.report = report


class CallClosed(Exception):
    """The server closed the call while the caller was still talking or waiting."""


def interrupted(conversation: str) -> CallEnding:
    return CallEnding(
        Ending.INTERRUPTED,
        f"interrupted (Ctrl-C): hung up; results not yet spoken are held for "
        f"conversation {conversation}",
    )


def refusal(exc: CallRefused) -> CallEnding:
    """The ending of a call that never started: how the server refused it, or that it
    did not answer in time."""
    if exc.report.closed_by_server:
        return _closed(exc.report)
    return CallEnding(Ending.TIMED_OUT, f"timed out: {exc}")


def ending_of(report: CallReport, *, timeout: float) -> CallEnding:
    """Classify a finished call from what the server sent and how the socket closed."""
    if report.settled:
        return CallEnding(Ending.SETTLED, "the conversation settled; hung up")
    if report.closed_by_server:
        return _closed(report)
    return CallEnding(
        Ending.TIMED_OUT,
        f"timed out: the conversation did not settle within {timeout:g} s "
        f"({_still_waiting(report)}); hung up (raise --timeout to wait longer)",
    )


def _closed(report: CallReport) -> CallEnding:
    code, reason = report.close_code, report.close_reason
    errors = report.events_of(CallError)
    # the reason the server gave; a WebRTC close's own event (closed_CODE) only repeats the
    # close reason, so an earlier, fuller one comes first
    told = [e for e in errors if not e.code.startswith("closed_")] or errors
    said = told[-1].message if told else reason or "no reason given"
    held = f"results not yet spoken are held: call back with --conversation {report.conversation}"
    if code == _TRY_AGAIN_LATER or any(e.code == "draining" for e in errors):
        return CallEnding(
            Ending.DRAINING,
            f"refused: the server is draining (shutting down): {said}",
            refused=True,
        )
    if code == _GOING_AWAY:
        return CallEnding(
            Ending.DRAINING,
            f"the server ended the call: it is shutting down ({reason or code}); {held}",
        )
    failed_to_start = any(e.code == "session_failed" for e in errors)
    if code in _REFUSING or failed_to_start:
        return CallEnding(Ending.REFUSED, f"refused ({code}): {said}", refused=True)
    if code == _REPLACED:
        return CallEnding(Ending.ENDED, f"ended: {said}")
    return CallEnding(Ending.ENDED, f"the server ended the call ({code}): {said}; {held}")


def _still_waiting(report: CallReport) -> str:
    statuses = report.events_of(CallStatus)
    if not statuses:
        return "the server never said it was idle"
    last = statuses[-1]
    parts = [
        f"{count} {what}"
        for count, what in (
            (last.running_tasks, "running task(s)"),
            (last.background_jobs, "background job(s)"),
            (last.pending_deliveries, "result(s) waiting to be spoken"),
        )
        if count
    ]
    if not last.idle:
        parts.append("the agent busy")
    return "still: " + ", ".join(parts) if parts else "not yet quiet"
