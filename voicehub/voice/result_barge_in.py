"""A result yields to the caller's live voice, not to livekit's late hearing of earlier audio.

`DeliverySpeaker` stops a result at the caller's first speech-like frame (per-frame evidence,
the instant the frame arrives). livekit has its own "interruption by audio activity": at a VAD
start of speech, and at every final transcript in case the VAD missed the speech
(`AgentActivity.on_final_transcript` calls `_interrupt_by_audio_activity`). The final comes
when the recognizer is done, which on a loaded machine can be seconds after the words: a final
of something the caller said before the result began then cut the result short, and it was
offered again for nothing (seen in CI: a one-frame noise before the result, its final late).

So for a result's speech (and its offer's question) livekit's audio-activity interruption is
skipped; the speech stays interruptible otherwise, so a completed caller turn still supersedes
it (the caller gets an answer; the result is offered again at the next gap). Nothing is lost
by skipping: the evidence reacts to any speech livekit's VAD would, sooner (it errs towards
"voiced", see `voicehub.voice.speech_evidence`).

Applies to livekit agents 1.8.9 (pinned), where the method exists with this meaning; on any
other version livekit runs as shipped and a warning says results may be cut by late finals.
"""

from __future__ import annotations

import logging
import weakref
from typing import TYPE_CHECKING, Any

from voicehub.voice.providers import vendor_import

with vendor_import("livekit-agents"):
    from livekit.agents import __version__ as agents_version
    from livekit.agents.voice import agent_activity

if TYPE_CHECKING:
    from livekit.agents.voice.speech_handle import SpeechHandle

__all__ = ["AGENTS_VERSION", "install", "yields_only_to_the_caller"]

log = logging.getLogger("voicehub.voice")

AGENTS_VERSION = "1.8.9"

_RESULTS: weakref.WeakSet[SpeechHandle] = weakref.WeakSet()
_livekit_interrupt_by_audio_activity = agent_activity.AgentActivity._interrupt_by_audio_activity


def yields_only_to_the_caller(handle: SpeechHandle) -> SpeechHandle:
    """Mark `handle` (a result's speech) as cut only by the caller's live voice or a
    completed caller turn, never by livekit's audio-activity interruption."""
    _RESULTS.add(handle)
    return handle


def _interrupt_by_audio_activity(self: Any) -> None:
    speech = self._current_speech
    if speech is not None and speech in _RESULTS:
        return  # the per-frame evidence decides (see the module docstring)
    _livekit_interrupt_by_audio_activity(self)


def install() -> bool:
    """Apply the patch (idempotent); False, with a warning, on another livekit version."""
    if agents_version != AGENTS_VERSION:
        log.warning(
            "livekit agents %s, not %s: results may be cut by late final transcripts",
            agents_version,
            AGENTS_VERSION,
        )
        return False
    agent_activity.AgentActivity._interrupt_by_audio_activity = (  # type: ignore[method-assign]
        _interrupt_by_audio_activity
    )
    return True
