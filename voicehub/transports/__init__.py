"""Transports carry a call's audio between a client and a `VoiceSession`.

`websocket`: the browser and `voicehub call` protocol (PCM16 16 kHz frames, JSON events).
"""
