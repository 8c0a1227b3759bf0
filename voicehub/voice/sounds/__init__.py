"""Sounds while the agent works: a thinking sound, filler phrases, hold music.

`CallSounds` (`call_sounds`) plays them under a pipeline call, never over speech; the sounds
are bundled (`clips`, files in `data/` made by `synth`). docs/sounds.md has the desk settings.
"""

from __future__ import annotations

from voicehub.voice.sounds.call_sounds import CallSounds, SoundHost, SoundSettings
from voicehub.voice.sounds.clips import SOUND_NAMES, sound_pcm

__all__ = ["SOUND_NAMES", "CallSounds", "SoundHost", "SoundSettings", "sound_pcm"]
