"""What a soak run does: how many callers, for how long, how they behave."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["SoakOptions"]

_RAMP_PER_CALLER = 0.3
_RAMP_MAX = 30.0


@dataclass(frozen=True)
class SoakOptions:
    """A soak run. `calls` callers run at once for `minutes`; each places call after call
    on its own conversation (a call-back resumes it). Probabilities are per call.

    The cadence (see `caller`): callers start spread over `ramp` seconds (default: 0.3 s
    per caller, at most 30 s); in a call, a caller speaks `turn_pause` seconds after the
    agent falls quiet, asks for research, then takes `follow_ups` more turns (a status
    question or thanks) while the analysts work; between calls it waits `pause` seconds.
    """

    calls: int = 4
    minutes: float = 1.0
    desk: str = "research"
    seed: int = 1
    url: str | None = None  # a running server; None starts `voicehub serve` on a free port
    token: str | None = None
    barge_in: float = 0.3  # talk over a result being spoken
    hang_up: float = 0.3  # hang up before the results are in (they are held; call back)
    pause: tuple[float, float] = (0.5, 3.0)  # seconds between a caller's calls
    turn_pause: tuple[float, float] = (0.5, 2.0)  # after the agent falls quiet, before speaking
    follow_ups: tuple[int, int] = (0, 2)  # more turns per call after the request
    ramp: float | None = None  # seconds over which callers start (None: 0.3 s each, <= 30 s)
    settle_timeout: float = 60.0  # how long a call waits for its results before hanging up
    # How long a caller waits for the agent to answer before speaking anyway: long, since
    # on a loaded server a late answer is a figure (loop lag), not a failed call.
    turn_timeout: float = 60.0
    collect_attempts: int = 3  # tries of the last call that collects held results
    sample_every: float = 5.0  # seconds between samples of the server's RSS and loop lag
    playout_speed: float = 1.0  # the callers' virtual speakers (1.0: real time)
    max_calls: int | None = None  # the started server's call limit (`serve --max-calls`)
    # "cloud": the desk on Deepgram against the fake Deepgram in its own process
    # (`client.soak.cloud_stack`); "offline": the desk as its file says
    stack: Literal["offline", "cloud"] = "offline"

    def __post_init__(self) -> None:
        if self.calls < 1:
            raise ValueError(f"calls must be at least 1, got {self.calls}")
        if self.minutes <= 0:
            raise ValueError(f"minutes must be positive, got {self.minutes}")
        for name in ("pause", "turn_pause", "follow_ups"):
            low, high = getattr(self, name)
            if not 0 <= low <= high:
                raise ValueError(
                    f"{name} is a range (low, high) with 0 <= low <= high, got {low}, {high}"
                )
        if self.stack not in ("offline", "cloud"):
            raise ValueError(f"stack is 'offline' or 'cloud', got {self.stack!r}")
        if self.stack == "cloud" and self.url is not None:
            raise ValueError("--stack cloud starts its own server (and fake Deepgram): drop --url")
        for name in ("barge_in", "hang_up"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} is a probability from 0 to 1, got {value}")

    @property
    def ramp_seconds(self) -> float:
        """Seconds over which the callers place their first calls."""
        if self.ramp is not None:
            return self.ramp
        return min(_RAMP_MAX, _RAMP_PER_CALLER * self.calls)
