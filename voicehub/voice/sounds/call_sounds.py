"""Sounds under a call while the agent works: `CallSounds`.

Three kinds, each chosen by the desk (`SoundSettings`):

- the *thinking* sound, after the caller's turn while the reply is not ready (its model or its
  tools run and nothing is being said), once it has been late for `thinking_after` seconds;
- a *filler* phrase (said in the agent's voice, rendered when first needed) when the reply's
  tools have run for `filler_after` seconds with nothing said, at most once per reply;
- *hold* music while the caller's work runs in the background and the call has been quiet
  (idle, as delivery means it) for `hold_after` seconds.

The rules that keep them out of the way:

- Never over speech: a sound plays only while no speech of the agent is playing, paused or
  queued, and the caller is neither speaking (the VAD) nor voiced in the last
  `CALLER_QUIET` seconds (the per-frame evidence); it stops at the first frame either starts.
- Stopped the instant the agent's next speech is ready: the speech player awaits
  `before_speech` right before that speech's first frame, which ends the sound (and waits for
  a frame being sent to be out) so nothing of the sound follows.
- Never counted as agent speech: the sounds go to the transport and touch no `VoiceActivity`
  state, so a result waiting for an idle call waits for none of them; and at most
  `LEAD_FRAMES` of sound (40 ms) is ever queued ahead, which is all a speech can find before
  it in the transport's buffer.

Audio goes out paced on the call's clock, one 20 ms frame per frame time, `LEAD_FRAMES` ahead.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol

from voicehub.voice.audio import frame_bytes
from voicehub.voice.sounds.clips import sound_pcm

if TYPE_CHECKING:
    from voicehub.core.clock import Clock
    from voicehub.voice.activity import ActivitySnapshot, VoiceActivity
    from voicehub.voice.transport import CallTransport

__all__ = ["CALLER_QUIET", "LEAD_FRAMES", "CallSounds", "SoundHost", "SoundSettings"]

log = logging.getLogger("voicehub.voice")

CALLER_QUIET = 0.25
"""Seconds since the caller's last speech-like frame before a sound may play."""
LEAD_FRAMES = 2
"""Frames of sound sent ahead of their time (a transport plays on through a late wake-up)."""
_FILLER_POLL = 0.1  # seconds between looks at a late reply's tools (their start wakes nobody)
_HOLD_RECHECK = 5.0  # seconds between looks at the store for running work while quiet

Kind = Literal["thinking", "filler", "hold"]


@dataclass(frozen=True)
class SoundSettings:
    """A desk's sounds (`[voice.sounds]`): each sound's name (`clips.SOUND_NAMES`) or None,
    the seconds before each starts, the filler phrases, and the sounds' level in dB."""

    thinking: str | None = None
    thinking_after: float = 1.0
    hold: str | None = None
    hold_after: float = 4.0
    fillers: tuple[str, ...] = ()
    filler_after: float = 1.5
    volume_db: float = -12.0

    @property
    def any(self) -> bool:
        return self.thinking is not None or self.hold is not None or bool(self.fillers)


class SoundHost(Protocol):
    """What `CallSounds` reads of its call."""

    def speech_pending(self) -> bool:
        """The agent has speech playing, paused or queued."""
        ...

    def tools_running(self) -> object | None:
        """The reply whose tools are running now (any object naming it), or None."""
        ...

    async def work_running(self) -> bool:
        """Background work (workers' tasks) is queued or running for this caller."""
        ...

    async def render(self, text: str) -> bytes:
        """`text` said in the agent's voice, PCM16 at the call's rate."""
        ...


@dataclass
class _Playing:
    kind: Kind
    pcm: bytes
    loop: bool


class CallSounds:
    """One call's sounds (see the module docstring). Run `run()` as a task for the call's
    life; set the speech player's wait hook to await `before_speech` first."""

    def __init__(
        self,
        settings: SoundSettings,
        activity: VoiceActivity,
        clock: Clock,
        transport: CallTransport,
        host: SoundHost,
    ) -> None:
        self.settings = settings
        self._activity, self._clock, self._transport, self._host = (
            activity,
            clock,
            transport,
            host,
        )
        self._rate = transport.sample_rate
        self._frame = frame_bytes(self._rate)
        self._send = asyncio.Lock()
        self._halt = False
        self.playing: Kind | None = None
        """The sound going out now, if any."""
        self.frames_sent = 0
        """Frames of sound sent on this call (all kinds)."""
        self._late_since: float | None = None  # the reply late, with nothing said, since
        self._filler_reply: object | None = None  # the latest reply that had its filler
        self._fillers_said = 0
        self._work_checked: tuple[float, bool] | None = None  # (when, running) while quiet

    # -- the speech player's seam ---------------------------------------------------------

    async def before_speech(self) -> None:
        """The agent's next speech is about to send its first frame: end the sound now; when
        this returns, no more of it will be sent."""
        if self.playing is not None:
            self._halt = True
        async with self._send:  # a frame on its way is out
            pass

    # -- the watcher --------------------------------------------------------------------------

    async def run(self) -> None:
        """Watch the call and play what is due (a task of the call)."""
        if not self.settings.any:
            return
        while True:
            version = self._activity.version
            choice, wake_in = await self._next()
            if choice is not None:
                await self._play(choice)
                continue
            await self._wait(version, wake_in)

    async def _wait(self, version: int, seconds: float | None) -> None:
        waits: set[asyncio.Future[object]] = {
            asyncio.ensure_future(self._activity.wait_for_change(version))
        }
        if seconds is not None:
            waits.add(asyncio.ensure_future(self._clock.sleep(max(seconds, 0.0))))
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiting in waits:
                waiting.cancel()
            for waiting in waits:
                with contextlib.suppress(asyncio.CancelledError):
                    await waiting

    # -- what is due --------------------------------------------------------------------------

    def _caller_quiet(self, snapshot: ActivitySnapshot) -> bool:
        return not snapshot.user_speaking and not self._activity.voiced_within(CALLER_QUIET)

    def _late(self, snapshot: ActivitySnapshot) -> bool:
        """A reply is being made, nothing of it is being said, and the caller is quiet."""
        return (
            (snapshot.agent_thinking or snapshot.user_turn_awaiting_answer)
            and not snapshot.agent_speaking
            and not self._host.speech_pending()
            and self._caller_quiet(snapshot)
        )

    def _quiet_call(self, snapshot: ActivitySnapshot) -> bool:
        return (
            snapshot.is_idle
            and snapshot.session_live
            and not self._host.speech_pending()
            and self._caller_quiet(snapshot)
        )

    async def _next(self) -> tuple[_Playing | None, float | None]:
        """The sound due now, else None and the seconds until something may be due."""
        now = self._clock.now()
        snapshot = self._activity.snapshot()
        settings = self.settings
        wakes: list[float] = []
        voiced_at = self._activity.caller_voiced_at
        if voiced_at is not None and now < voiced_at + CALLER_QUIET:
            wakes.append(voiced_at + CALLER_QUIET - now)
        if self._late(snapshot):
            if self._late_since is None:
                self._late_since = now
            late = now - self._late_since
            reply = self._host.tools_running()
            if settings.fillers:
                if reply is not None and reply is not self._filler_reply:
                    if late >= settings.filler_after:
                        self._filler_reply = reply  # one filler per reply
                        pcm = await self._filler_pcm()
                        # rendering took time: still late, still quiet?
                        if pcm and self._late(self._activity.snapshot()):
                            return _Playing("filler", pcm, loop=False), None
                        return None, 0.0
                    wakes.append(settings.filler_after - late)
                else:
                    wakes.append(_FILLER_POLL)  # tools may start: their start wakes nobody
            if settings.thinking is not None:
                if late >= settings.thinking_after:
                    pcm = sound_pcm(settings.thinking, self._rate, settings.volume_db)
                    return _Playing("thinking", pcm, loop=True), None
                wakes.append(settings.thinking_after - late)
        else:
            self._late_since = None
        if settings.hold is not None and self._quiet_call(snapshot):
            idle_since = snapshot.idle_since if snapshot.idle_since is not None else now
            quiet = now - idle_since
            if quiet >= settings.hold_after:
                if await self._work_running(now):
                    pcm = sound_pcm(settings.hold, self._rate, settings.volume_db)
                    return _Playing("hold", pcm, loop=True), None
                wakes.append(_HOLD_RECHECK)
            else:
                wakes.append(settings.hold_after - quiet)
        else:
            self._work_checked = None
        return None, (min(wakes) if wakes else None)

    async def _work_running(self, now: float) -> bool:
        checked = self._work_checked
        if checked is None or now - checked[0] >= _HOLD_RECHECK:
            try:
                running = await self._host.work_running()
            except Exception:
                log.exception("sounds: could not read the call's running work")
                running = False
            checked = self._work_checked = (now, running)
        return checked[1]

    async def _filler_pcm(self) -> bytes:
        fillers = self.settings.fillers
        text = fillers[self._fillers_said % len(fillers)]
        self._fillers_said += 1
        try:
            return await self._host.render(text)
        except Exception:
            log.exception("sounds: the filler %r could not be rendered", text)
            return b""

    def _still_wanted(self, playing: _Playing) -> bool:
        snapshot = self._activity.snapshot()
        if playing.kind == "hold":
            return self._quiet_call(snapshot)
        return self._late(snapshot)

    # -- playing ------------------------------------------------------------------------------

    async def _play(self, playing: _Playing) -> None:
        """Send `playing` paced until it ends (a filler) or stops being wanted."""
        self._halt = False
        self.playing = playing.kind
        frame = self._frame
        pcm = playing.pcm
        if len(pcm) % frame:
            pcm += bytes(frame - len(pcm) % frame)
        started = self._clock.now()
        sent = 0
        try:
            while not self._halt and self._still_wanted(playing):
                if playing.kind == "hold" and not await self._work_running(self._clock.now()):
                    break  # the work ended (a result, if any, comes as speech)
                offset = (sent * frame) % len(pcm)
                if not playing.loop and sent * frame >= len(pcm):
                    break
                due = started + (sent - LEAD_FRAMES) * 0.02
                wait = due - self._clock.now()
                if wait > 0:
                    await self._clock.sleep(wait)
                    continue  # look again: the call may have moved on meanwhile
                async with self._send:
                    if self._halt:
                        break
                    await self._transport.send_audio(pcm[offset : offset + frame])
                sent += 1
                self.frames_sent += 1
        finally:
            self.playing = None
            self._halt = False
            if playing.kind == "filler":
                self._late_since = self._clock.now()  # the thinking sound waits anew after it
