"""The synthetic caller behind `voicehub call`: a WebSocket client and its call report."""
