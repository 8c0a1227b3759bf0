"""voicehub's pipeline engine: a pure turn state machine and the asyncio driver that runs
one call on it (VAD, STT, the agent runner, TTS, playout marks), with no livekit session."""
