"""`voicehub bench --only faults`: real faults injected into live research calls, and what
the caller notices. Each row is one call asking for research; the fault starts before the
request (what the request itself meets) or once both analysts work:

- `redis_paused_10s`: redis-server SIGSTOPped for 10 s (unreachable, not restarted);
- `redis_restarted`: redis-server stopped (SIGTERM, AOF flushed) and started again 2 s later;
- `redis_dropped_10s`: the TCP proxy in front of Redis cuts every connection (RST) for 10 s;
- `redis_readonly_10s`: the proxy answers every command READONLY for 10 s (a fail-over);
- `model_500`, `model_429`: analyst-b's model answers 500 / 429 (Retry-After: 1) for 10 s;
- `model_hangs_30s`: analyst-b's model sends nothing for 30 s, then answers;
- `tool_never_returns`: analyst-b calls an MCP tool that never answers (its own timeout
  longer than the task's 20 s);
- `stt_raises`: the recognizer's stream fails mid-call, before the request;
- `stt_hangs_10s`: the recognizer answers nothing for 10 s while the caller asks;
- `stt_lost`: the recognizer stream that hears the caller's request answers nothing more,
  for good (streams opened after those 10 s answer);
- `deepgram_dropped`: (on a desk recognizing with Deepgram, the fake) the listen socket
  aborted (no close frame) a second into the caller's request;
- `tts_raises_10s`, `tts_hangs_10s`: every synthesis raises / sends nothing for 10 s while
  the results come in;
- `tts_lost_10s`: every synthesis started in those 10 s never sends audio at all (lost
  requests; later ones answer);
- `loop_stall_2s`: the server's event loop is blocked 2 s;
- `sqlite_locked_10s`: one instance on SQLite; another process holds `BEGIN EXCLUSIVE` 10 s;
- `sqlite_disk_full_10s`: one instance on SQLite on a 16 MB tmpfs, filled for 10 s.

The rows' figures: see `call`.
"""

from voicehub_dev.bench.faults.matrix import run
from voicehub_dev.bench.faults.rig import FaultyModel, RedisProcess, lock_sqlite

__all__ = ["FaultyModel", "RedisProcess", "lock_sqlite", "run"]
