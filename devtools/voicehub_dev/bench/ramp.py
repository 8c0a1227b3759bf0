"""How the capacity benches find their figure: `Ramp`, step up, then refine.

A ramp tries rising counts (calls at once) until one fails, then narrows the gap between
the largest count that passed and the first that failed by halving it, until the two are
within `resolution` of each other (a share of the passing count, at least one call apart).
The figure is the largest count that passed. A first count that fails is refined towards
zero the same way, so a machine slower than the steps were chosen for still gets its
figure (on an AMD EPYC with AVX2 only, the voice ramp's first step, 100 calls, failed and
the figure read 0). Pure: the caller runs each count and says whether it passed.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field

__all__ = ["Ramp"]


@dataclass
class Ramp:
    """Which count to try next (`next()`, None when the figure is found); `passed(count,
    ok)` records each try. `steps` rise; `refinements` bounds the halvings after the
    first failure (each try of a load bench costs minutes)."""

    steps: Sequence[int]
    resolution: float = 0.1
    refinements: int = 4
    tried: dict[int, bool] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.steps or any(b <= a for a, b in itertools.pairwise(self.steps)):
            raise ValueError(f"a ramp's steps must rise, got {list(self.steps)}")
        if self.steps[0] < 1:
            raise ValueError(f"a ramp starts at one call or more, got {self.steps[0]}")

    @property
    def figure(self) -> int:
        """The largest count that passed, below every count that failed (0: none passed)."""
        failed = min((n for n, ok in self.tried.items() if not ok), default=None)
        return max(
            (n for n, ok in self.tried.items() if ok and (failed is None or n < failed)),
            default=0,
        )

    def passed(self, count: int, ok: bool) -> None:
        """The try of `count` passed (`ok`) or failed."""
        self.tried[count] = ok

    def next(self) -> int | None:
        """The next count to try, or None: done."""
        failed = min((n for n, ok in self.tried.items() if not ok), default=None)
        if failed is None:
            untried = [n for n in self.steps if n not in self.tried]
            return untried[0] if untried else None
        refined = sum(1 for n in self.tried if n not in self.steps)
        if refined >= self.refinements:
            return None
        low = self.figure
        if failed - low <= max(1.0, low * self.resolution):
            return None
        middle = (low + failed) // 2
        return middle if middle not in self.tried else None
