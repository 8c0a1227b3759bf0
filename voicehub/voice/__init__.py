"""Voice engine: audio utilities, the VoiceSession seam, and speech providers."""
