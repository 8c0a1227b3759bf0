"""The desk file's `[record]` table: recordings and transcripts of its calls (opt-in).

    [record]
    audio = true        # a stereo WAV per call: the caller left, the agent right
    transcript = true   # a JSON transcript per call: who said what when, tools, results
    keep_days = 30      # delete them after this many days (0: keep them)

Off unless the desk asks. The server keeps them under its recordings folder, per
conversation (a call-back's recording joins its conversation), serves them under the REST
view (`/api/rooms/{room}/recordings`) with the same access token, and deletes them with the
conversation.
"""

from __future__ import annotations

from pydantic import Field

from voicehub.desks.sections import StrictModel

__all__ = ["RecordConfig"]


class RecordConfig(StrictModel):
    """What to keep of each call to the desk."""

    audio: bool = False
    """Record each call's audio as a stereo WAV: the caller left, the agent (results too)
    right, served under the REST view with the access token."""
    transcript: bool = False
    """Keep each call's transcript as JSON, with timings, tool calls, tasks and deliveries."""
    keep_days: float = Field(default=30.0, ge=0)
    """Days a recording is kept before it is deleted (0: kept until deleted by hand)."""

    @property
    def enabled(self) -> bool:
        return self.audio or self.transcript
