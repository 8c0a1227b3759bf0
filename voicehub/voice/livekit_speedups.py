"""One hot spot of livekit-agents (pinned, 1.8.9), removed without changing its answers.

`AgentActivity.on_vad_inference_done` runs for every VAD window of every call (about 31 a
second) and, while the caller speaks, reads `min_endpointing_delay`, which resolves the
endpointing options anew: `_resolve_endpointing` asks `isinstance(turn_detection,
_StreamingTurnDetector)`, a runtime-checkable Protocol, which Python 3.11 answers by
collecting the Protocol's attributes again each time (about 40 us on this machine; the
rest of the window's handling is a few us). When `turn_detection` is a mode name ("vad",
"stt", ...) or None, the answer is known without asking: a string or None has none of the
Protocol's members, so the legacy defaults apply. `install()` swaps in a resolver that
says so and defers to livekit's own for anything else (a turn detector object).
"""

from __future__ import annotations

from typing import Any

from voicehub.voice.providers import vendor_import

with vendor_import("livekit-agents"):
    from livekit.agents.voice import agent_activity, turn

__all__ = ["install", "resolve_endpointing"]

_livekit_resolve = turn._resolve_endpointing


def resolve_endpointing(
    config: turn.EndpointingOptions | None = None, *, turn_detection: Any = None
) -> turn.EndpointingOptions:
    """livekit's `_resolve_endpointing`, without the Protocol check for a mode name."""
    if turn_detection is None or isinstance(turn_detection, str):
        base = turn._ENDPOINTING_DEFAULTS
        return turn.EndpointingOptions(**(base if config is None else {**base, **config}))
    return _livekit_resolve(config, turn_detection=turn_detection)


def install() -> None:
    """Use `resolve_endpointing` where livekit's activity resolves its options
    (idempotent; only `agent_activity`'s reference changes)."""
    agent_activity._resolve_endpointing = resolve_endpointing  # type: ignore[attr-defined]
