"""Pieces of the realtime (speech-to-speech) voice session: its settings and the GA session
object (`config`), and the playout bookkeeping behind truncation (`playout`)."""
