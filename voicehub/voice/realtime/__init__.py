"""Pieces of the realtime (speech-to-speech) voice session, one concept each:

- `config`: its settings and the GA `session` object; `connection`: one SDK connection;
- `link`: the connection kept up (reconnect with backoff); `recap`: what a restored
  session is told about the call;
- `model_events`: what the model's events do to the call; `responses`, `playout_marks`: the
  responses, speaking requests and playout bookkeeping behind truncation;
- `tool_runs`, `tools`: the model's function calls; `session_updates`: `session.update`
  answers; `recorder`: room and client events; `audio_batch`, `pcm_resampler`: caller audio up.
"""
