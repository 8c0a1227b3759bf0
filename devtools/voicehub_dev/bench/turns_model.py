"""The end-of-turn model's part of the `turns` bench: its cost, how well it separates cut
requests from whole ones on the evaluation set, and what the turn policy would make of it.

- `us_per_inference`: CPU (of the thread running it) of one Smart Turn inference, batch of
  one: what a turn costs, since the engine asks once per pause. `us_per_inference_batched`:
  per utterance in batches of 16 (many calls pausing at once). `ms_per_inference`: wall.
- `auc`: the chance that a whole request (the paused ones rejoined, and the complete ones)
  gets a higher probability than the first half of a paused one, both followed by 0.2 s of
  silence (what the model hears when it is asked); 0.5 is chance.
- `policy_with_known_words`: the pure policy (`voicehub.voice.turns.policy`) on this set,
  the words before each pause known exactly (the recogniser's part left out) and read as
  the desk reads them (`voicehub.desks.turns.desk_words_open`, `desk_words_complete`): its false
  cut-off rate (pauses up to 1.0 s) and end-of-turn delay on complete requests, in mode
  "model" and in mode "vad" (silence alone, for comparison).
"""

from __future__ import annotations

import statistics
import time
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import numpy as np

from voicehub.voice.turns.policy import (
    AskModel,
    Commit,
    TurnEvidence,
    TurnSettings,
    WakeAt,
    decide,
)
from voicehub_dev.bench.turns_eval import RATE, CompleteRequest, PausedRequest


def _floats(pcm16: bytes) -> np.ndarray:
    return np.frombuffer(pcm16, dtype="<i2").astype(np.float32) / 32768.0


def _halves(item: PausedRequest) -> tuple[np.ndarray, np.ndarray]:
    """The request cut at its pause (what the caller said before it) and whole."""
    samples = np.frombuffer(item.pcm16, dtype="<i2")
    run = round(item.pause * RATE)
    zero = np.concatenate([[0], (samples == 0).astype(np.int64)])
    counts = np.cumsum(zero)
    ends = np.flatnonzero(counts[run:] - counts[:-run] == run)
    cut = int(ends[0]) if len(ends) else len(samples) // 2
    return _floats(item.pcm16[: 2 * cut]), _floats(item.pcm16)


def _tail(audio: np.ndarray, seconds: float) -> np.ndarray:
    return np.concatenate([audio, np.zeros(round(seconds * RATE), dtype=np.float32)])


def auc(positives: Sequence[float], negatives: Sequence[float]) -> float:
    """Share of (positive, negative) pairs ranked right (ties count half)."""
    if not positives or not negatives:
        return float("nan")
    pos, neg = np.asarray(positives)[:, None], np.asarray(negatives)[None, :]
    return float(np.mean((pos > neg) + 0.5 * (pos == neg)))


def _commit_time(
    settings: TurnSettings,
    words_open: bool,
    probability: float,
    latency: float,
    words_complete: bool = False,
) -> float:
    """Seconds of silence after which the policy commits, the model answering `latency`
    seconds after it is asked (the words, known at once, making a whole request when
    `words_complete`)."""
    evidence = TurnEvidence(0.0, words_open=words_open, words_complete=words_complete)
    now = 0.0
    for _ in range(8):
        decision = decide(evidence, settings, now)
        if isinstance(decision, Commit):
            return now
        if isinstance(decision, AskModel):
            now += latency
            evidence = TurnEvidence(
                0.0,
                words_open,
                asked=True,
                probability=probability,
                words_complete=words_complete,
            )
        elif isinstance(decision, WakeAt):
            now = decision.time
    return now


def model_figures(
    paused: Sequence[PausedRequest], complete: Sequence[CompleteRequest], desks: Any
) -> dict[str, Any]:
    """The figures of the module, or why the model could not be measured."""
    from voicehub.errors import VoicehubError
    from voicehub.voice.turns.smart_turn import SmartTurnModel

    try:
        model = SmartTurnModel.load()
    except VoicehubError as exc:
        return {"unavailable": str(exc)}
    settings = TurnSettings()
    asked_after = settings.model_silence
    cuts, wholes = [], []
    for item in paused:
        cut, whole = _halves(item)
        cuts.append(_tail(cut, asked_after))
        wholes.append(_tail(whole, asked_after))
    completes = [_tail(_floats(item.pcm16), asked_after) for item in complete]
    model.probabilities(completes[:1])  # warm up
    cpu, wall = [], []
    for audio in completes + wholes[:16]:
        started, thread = time.perf_counter(), time.thread_time()
        model.probabilities([audio])
        cpu.append(time.thread_time() - thread)
        wall.append(time.perf_counter() - started)
    batch = (cuts + wholes)[:16]
    thread = time.thread_time()
    model.probabilities(batch)
    batched = (time.thread_time() - thread) / len(batch)
    p_cut = model.probabilities(cuts)
    p_whole = model.probabilities(wholes)
    p_complete = model.probabilities(completes)
    latency = statistics.median(wall)
    from voicehub.desks.turns import desk_words_complete, desk_words_open

    names = {item.desk for item in paused} | {item.desk for item in complete}
    words_open = {name: desk_words_open(desks[name]) for name in names}
    requests = {name: desk_words_complete(desks[name]) for name in names}
    policy: dict[str, Any] = {}
    for mode in ("model", "vad"):
        chosen = TurnSettings(mode)
        cut_off: list[bool] = []
        per_voice: dict[str, list[bool]] = defaultdict(list)
        for item, p in zip(paused, p_cut, strict=True):
            if item.pause > 1.0:
                continue
            is_open = words_open[item.desk](item.before)
            is_whole = requests[item.desk](item.before)
            early = bool(_commit_time(chosen, is_open, p, latency, is_whole) < item.pause)
            cut_off.append(early)
            per_voice[item.voice].append(early)
        delays = [
            _commit_time(
                chosen,
                words_open[item.desk](item.words),
                p,
                latency,
                requests[item.desk](item.words),
            )
            for item, p in zip(complete, p_complete, strict=True)
        ]
        policy[mode] = {
            "false_cutoff_rate": round(float(np.mean(cut_off)), 4),
            "eot_delay_ms_median": round(statistics.median(delays) * 1000, 1),
            "voices": {v: round(float(np.mean(c)), 4) for v, c in sorted(per_voice.items())},
        }
    voices = sorted({item.voice for item in paused})
    return {
        "us_per_inference": round(statistics.median(cpu) * 1e6, 1),
        "us_per_inference_batched": round(batched * 1e6, 1),
        "ms_per_inference": round(latency * 1000, 2),
        "auc": round(auc([*p_whole, *p_complete], p_cut), 4),
        # at the policy's threshold: the cut halves it calls complete, the whole requests
        # it calls unfinished (the suite checks only the decision, on committed speech)
        "cut_judged_complete": round(float(np.mean(np.asarray(p_cut) >= settings.threshold)), 4),
        "whole_judged_unfinished": round(
            float(np.mean(np.asarray([*p_whole, *p_complete]) < settings.threshold)), 4
        ),
        "auc_voices": {
            voice: round(
                auc(
                    [p for i, p in zip(paused, p_whole, strict=True) if i.voice == voice]
                    + [p for i, p in zip(complete, p_complete, strict=True) if i.voice == voice],
                    [p for i, p in zip(paused, p_cut, strict=True) if i.voice == voice],
                ),
                4,
            )
            for voice in voices
        },
        "policy_with_known_words": policy,
    }
