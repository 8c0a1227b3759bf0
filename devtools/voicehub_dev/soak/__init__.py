"""`voicehub soak`: many synthetic callers on a real server for minutes, with barge-ins,
hang-ups and call-backs, checking that every result is spoken exactly once.

    result = await run_soak(SoakOptions(calls=10, minutes=2.0))
    print(format_soak(result))

Modules: `options` (what to run), `talkover` (overlap of agent delivery audio with the
caller's voice, from a call's timeline), `caller` (one caller's seeded behaviour over many
calls), `server_process` (the server as a subprocess, its RSS and loop lag), `accounting`
(results lost and spoken twice, against the server's REST API), `run` and `report`.
"""

from voicehub_dev.soak.accounting import SoakTally, account
from voicehub_dev.soak.options import SoakOptions
from voicehub_dev.soak.report import format_soak, soak_json
from voicehub_dev.soak.run import SoakResult, run_soak

__all__ = [
    "SoakOptions",
    "SoakResult",
    "SoakTally",
    "account",
    "format_soak",
    "run_soak",
    "soak_json",
]
