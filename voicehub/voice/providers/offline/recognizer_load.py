"""How loaded this process's offline recognizers are: the signal for admitting calls.

An offline call costs the machine mostly its speech recognition: Moonshine's and Whisper's
decodings on their decoding threads (`decode_queue`), PocketSphinx's in its worker
processes (`sphinx_workers`). Each reports the seconds it spent decoding; `RecognizerLoad`
turns them into the share of the recognizers' capacity used over the last stretch (at least
`min_window` seconds): 1.0 means they decoded all the time and can no longer keep up, so
callers would wait longer and longer for their answers. A final transcript that has waited
for a decoder longer than `late_final` seconds also counts as 1.0 at once (the queue is
already behind). Admission (`voicehub.desks.call_admission`, `--max-load`) refuses new calls
above a limit: `DEFAULT_MAX_LOAD` leaves headroom for the calls already admitted, whose
turns come in bursts.

A call admitted now decodes nothing for seconds (its greeting plays first), so a load
measured now misses the calls just let in: admitted on it, a burst of callers overloads
the decoders a little later and their requests go unanswered. Given the live `calls`, the
load therefore learns what one call costs the busiest recognizer (its share per live call,
averaged over about `learn_seconds`) and reports at least that times the calls live now.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["DEFAULT_MAX_LOAD", "RecognizerLoad", "offline_recognizer_load"]

DEFAULT_MAX_LOAD = 0.8
"""The admission limit for the offline stack: new calls are refused once the recognizers
were busy 80% of the time (docs/speech-recognition.md: the calls that makes per machine)."""


@dataclass(frozen=True, slots=True)
class Capacity:
    """Seconds of decoding done so far, by how many decoders at once, and how long the
    oldest final waiting for one has waited."""

    busy_seconds: float
    decoders: int
    oldest_final_wait: float = 0.0


class RecognizerLoad:
    """The load of the recognizers `sources` report (each a `Capacity` now, or None for
    one not in use): the busiest one's share of its capacity since the previous reading
    (readings closer than `min_window` seconds repeat the previous figure); with `calls`,
    at least the learned share per call times the calls live now (see the module)."""

    def __init__(
        self,
        sources: list[Callable[[], Capacity | None]],
        *,
        min_window: float = 2.0,
        late_final: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
        calls: Callable[[], int] | None = None,
        learn_seconds: float = 30.0,
    ) -> None:
        self._sources = sources
        self._min_window = min_window
        self._late_final = late_final
        self._clock = clock
        self._calls = calls
        self._learn_seconds = learn_seconds
        self._last: dict[int, tuple[float, float]] = {}  # source index -> (time, busy)
        self._loads: dict[int, float] = {}
        self._learned_at = clock()  # when `per_call` last learned
        self.per_call: float | None = None
        """The busiest recognizer's share per live call, learned (None: not yet)."""

    def __call__(self) -> float:
        """The load now: 0.0 (idle) to 1.0 (decoding all the time), or more."""
        now = self._clock()
        measured = 0.0
        for index, source in enumerate(self._sources):
            capacity = source()
            if capacity is None:
                continue
            measured = max(measured, self._load_of(index, capacity, now))
        if self._calls is None:
            return measured
        calls = self._calls()
        self._learn(now, measured, calls)
        return max(measured, (self.per_call or 0.0) * calls)

    def _learn(self, now: float, measured: float, calls: int) -> None:
        """Fold a new window's share per call into `per_call` (an average over about
        `learn_seconds`). A window with no call live teaches nothing, nor one with no
        decoding at all: its calls are still in their greetings (learning 0 there would
        admit the first burst of callers on the measured share alone)."""
        elapsed = now - self._learned_at
        if elapsed < self._min_window:
            return
        self._learned_at = now
        if calls <= 0 or measured <= 0.0:
            return
        sample = measured / calls
        if self.per_call is None:
            self.per_call = sample
            return
        weight = min(1.0, elapsed / self._learn_seconds)
        self.per_call += weight * (sample - self.per_call)

    def _load_of(self, index: int, capacity: Capacity, now: float) -> float:
        if capacity.oldest_final_wait >= self._late_final:
            return 1.0
        last = self._last.get(index)
        if last is None:
            self._last[index] = (now, capacity.busy_seconds)
            return 0.0
        since, busy = last
        elapsed = now - since
        if elapsed < self._min_window:
            return self._loads.get(index, 0.0)
        load = (capacity.busy_seconds - busy) / (elapsed * max(1, capacity.decoders))
        self._last[index] = (now, capacity.busy_seconds)
        self._loads[index] = max(0.0, load)
        return self._loads[index]


def _moonshine_capacity() -> Capacity | None:
    """The Moonshine queue's first lane (the calls' own decodings). Its second lane (second
    opinions) is not counted: a second opinion is skipped when that lane is behind, so it
    never holds a call's answer for long."""
    from voicehub.voice.providers.offline import moonshine_stt

    recognizer = moonshine_stt.built_shared_moonshine()
    if recognizer is None:
        return None
    stats = recognizer.queue.stats()
    return Capacity(stats.busy_seconds, stats.workers, stats.oldest_final_wait)


def _whisper_capacity() -> Capacity | None:
    from voicehub.voice.providers.offline import whisper_engine

    recognizer = whisper_engine.built_shared_recognizer()
    if recognizer is None:
        return None
    stats = recognizer.queue.stats()
    return Capacity(stats.busy_seconds, stats.workers, stats.oldest_final_wait)


def _sphinx_capacity() -> Capacity | None:
    from voicehub.voice.providers.offline import sphinx_workers

    workers = sphinx_workers.built_shared_workers()
    if workers is None:
        return None
    stats = workers.stats()
    return Capacity(stats.decode_seconds, workers.processes, stats.oldest_wait_seconds)


def offline_recognizer_load(
    *,
    min_window: float = 2.0,
    clock: Callable[[], float] = time.monotonic,
    calls: Callable[[], int] | None = None,
) -> RecognizerLoad:
    """The load of this process's shared Moonshine, Whisper and PocketSphinx recognizers
    (those in use): a callable to read whenever a call asks to be admitted; given the live `calls`,
    it also counts the calls just admitted (see the module)."""
    sources = [_moonshine_capacity, _whisper_capacity, _sphinx_capacity]
    return RecognizerLoad(sources, min_window=min_window, clock=clock, calls=calls)
