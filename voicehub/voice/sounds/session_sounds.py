"""`attach_sounds`: a desk's sounds on a pipeline call, through the engine's public seams.

The sounds read the session's activity, its speech player (speech playing or queued) and its
replies (tools running); the player's `wait` hook, awaited right before each speech's first
frame, ends the sound first. Fillers are said in the voice of the agent on the call.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING

from voicehub.core.store.base import TaskStatus
from voicehub.voice.engine.tts_audio import one_text, synthesized_pcm
from voicehub.voice.sounds.call_sounds import CallSounds, SoundSettings

if TYPE_CHECKING:
    from voicehub.voice.engine.session import PipelineVoiceSession

__all__ = ["attach_sounds"]

log = logging.getLogger("voicehub.voice")


class _SessionHost:
    """`SoundHost` over a `PipelineVoiceSession`."""

    def __init__(self, session: PipelineVoiceSession) -> None:
        self._session = session

    def speech_pending(self) -> bool:
        player = self._session.player
        playing = player.current
        return (playing is not None and not playing.done) or bool(player.queued)

    def tools_running(self) -> object | None:
        reply = self._session.replies.current
        return reply if reply is not None and reply.in_tools else None

    async def work_running(self) -> bool:
        session = self._session
        tasks = await session.hub.store.list_tasks(
            parent_room_id=session.room_id, statuses=[TaskStatus.QUEUED, TaskStatus.RUNNING]
        )
        return bool(tasks)

    async def render(self, text: str) -> bytes:
        session = self._session
        chunks = [
            chunk
            async for chunk in synthesized_pcm(session.voice, one_text(text), session.sample_rate)
        ]
        return b"".join(chunks)


def attach_sounds(session: PipelineVoiceSession, settings: SoundSettings) -> CallSounds | None:
    """Play `settings`' sounds on `session` (before its `start`); None when it has none. The
    sounds' task starts now and ends with the session."""
    if not settings.any:
        return None
    sounds = CallSounds(
        settings, session.activity, session.hub.clock, session.transport, _SessionHost(session)
    )
    session.player.before_speech(sounds.before_speech)
    task = asyncio.get_running_loop().create_task(sounds.run(), name="voicehub-call-sounds")

    def stop() -> None:
        task.cancel()

    session.on_close(stop)
    task.add_done_callback(_log_failure)
    return sounds


def _log_failure(task: asyncio.Task[None]) -> None:
    with contextlib.suppress(asyncio.CancelledError):
        error = task.exception()
        if error is not None:
            log.error("call sounds failed: %s", error)
