"""What a soak run does: how many callers, for how long, how they behave."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["SoakOptions"]


@dataclass(frozen=True)
class SoakOptions:
    """A soak run. `calls` callers run at once for `minutes`; each places call after call
    on its own conversation (a call-back resumes it). Probabilities are per call."""

    calls: int = 4
    minutes: float = 1.0
    desk: str = "research"
    seed: int = 1
    url: str | None = None  # a running server; None starts `voicehub serve` on a free port
    token: str | None = None
    barge_in: float = 0.3  # talk over a result being spoken
    hang_up: float = 0.3  # hang up before the results are in (they are held; call back)
    pause: tuple[float, float] = (0.5, 3.0)  # seconds between a caller's calls
    settle_timeout: float = 60.0  # how long a call waits for its results before hanging up
    sample_every: float = 5.0  # seconds between samples of the server's RSS and loop lag
    playout_speed: float = 1.0  # the callers' virtual speakers (1.0: real time)

    def __post_init__(self) -> None:
        if self.calls < 1:
            raise ValueError(f"calls must be at least 1, got {self.calls}")
        if self.minutes <= 0:
            raise ValueError(f"minutes must be positive, got {self.minutes}")
        for name in ("barge_in", "hang_up"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} is a probability from 0 to 1, got {value}")
