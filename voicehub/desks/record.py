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
    transcript: bool = False
    keep_days: float = Field(default=30.0, ge=0)

    @property
    def enabled(self) -> bool:
        return self.audio or self.transcript
