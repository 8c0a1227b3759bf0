"""`voicehub bench --only v2v`: voice to voice on the embedded stack, before and after.

The `voice` section's latency harness (`voice_latency.v2v_latency`: Piper callers paced in
real time, the scripted agent, Silero, Smart Turn as `turn = "model"` ships it), run for two
stacks in turns, pass after pass, so both see the same load:

- `before`: the stack shipped until 2026-12-02: Whisper (`stt = "auto"` chose it), Piper
  rendering whole sentences, the VAD ending speech after 0.35 s of silence, the model
  alone holding a turn it hears as unfinished up to the 2 s ceiling;
- `after`: the shipped stack: Moonshine with Whisper as its second opinion (`auto`), Piper
  speaking in vocoder chunks, the VAD ending speech after `END_SILENCE`, words the agent
  answers as they stand holding the turn for the model only up to `complete_silence`
  (`voicehub.voice.turns.policy`);
- `after_no_words` (only when `VOICEHUB_V2V_STACKS` names it): `after` with that word rule
  off, the model alone holding a turn up to the ceiling, to weigh the rule.

`VOICEHUB_V2V_STACKS` (comma separated, `before,after` by default) chooses the stacks run.

`v2v_ms`: median, p95 and max over every turn of every pass (8 turns a pass; 5 passes: 40
turns each, 2 with `--quick`), from the caller's last voiced frame to the agent's first
audio frame; `understood`: turns whose final held the turn's keyword; `stages_ms`: where a
turn's time goes, the median over passes of each pass's median time from the last voiced
frame to the client's events (the VAD's end of speech, the recognizer's final, the reply
starting); `eot_inferences_per_turn`: end-of-turn model runs per caller turn (the early
start at pauses inside speech included).
"""

from __future__ import annotations

import asyncio
import os
import statistics
import tempfile
from pathlib import Path
from typing import Any

from voicehub_dev.bench.stats import summary_ms

STACKS = os.environ.get("VOICEHUB_V2V_STACKS", "before,after")


async def _stacks() -> dict[str, tuple[Any, Any, float, bool]]:
    from voicehub.voice.providers.offline import MoonshineSTT, WhisperSTT
    from voicehub.voice.providers.offline.moonshine_stt import SecondOpinion
    from voicehub.voice.providers.offline.tts_engines import PiperEngine
    from voicehub.voice.providers.offline.vad import END_SILENCE
    from voicehub_dev.bench.tts import WholeSentences, piper_plugin

    chosen = [name.strip() for name in STACKS.split(",") if name.strip()]
    if not chosen or not set(chosen) <= {"before", "after", "after_no_words"}:
        raise ValueError(
            f"VOICEHUB_V2V_STACKS={STACKS!r}: expected a comma-separated choice of "
            "before, after, after_no_words"
        )
    engine = await asyncio.to_thread(PiperEngine.load)
    whisper = WhisperSTT()
    moonshine = MoonshineSTT(second_opinion=SecondOpinion(WhisperSTT()))
    for model in (whisper, moonshine):
        await asyncio.to_thread(model.prewarm)
    chunked = piper_plugin(engine)
    every = {
        "before": (whisper, piper_plugin(WholeSentences(engine)), 0.35, False),
        "after": (moonshine, chunked, END_SILENCE, True),
        "after_no_words": (moonshine, chunked, END_SILENCE, False),
    }
    return {name: every[name] for name in chosen}


async def run(store: str = "sqlite", quick: bool = False) -> dict[str, Any]:
    from voicehub.voice.turns.setup import turn_setup
    from voicehub_dev.bench.voice_latency import TURNS, v2v_latency

    stacks = await _stacks()
    setup = await asyncio.to_thread(turn_setup, "model", 2.0, owner="the v2v bench")
    if setup.model is None:
        raise RuntimeError("the end-of-turn model did not load: see the warning above")
    passes = 1 if quick else 5
    turns = 2 if quick else len(TURNS)
    latencies: dict[str, list[float]] = {name: [] for name in stacks}
    stages: dict[str, list[dict[str, float]]] = {name: [] for name in stacks}
    inferences = dict.fromkeys(stacks, 0)
    counts: dict[str, dict[str, int]] = {
        name: {"understood": 0, "unanswered": 0, "turns": 0} for name in stacks
    }
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(passes):
            for name, (stt, tts, silence, whole_requests) in stacks.items():
                tuning = {"vad_min_silence_s": silence, "min_endpointing_delay_s": 0.0}
                asked = _inferences(setup.model)
                figures = await v2v_latency(
                    store,
                    Path(tmp),
                    turns,
                    "silero",
                    tuning,
                    providers=(stt, tts),
                    turns_setup=setup,
                    whole_requests=whole_requests,
                )
                inferences[name] += _inferences(setup.model) - asked
                stages[name].append(figures["stages_median_ms"])
                latencies[name] += [ms / 1000 for ms in figures["latencies_ms"]]
                for key in counts[name]:
                    counts[name][key] += int(figures[key])
    return {
        "v2v": {
            **{
                name: {
                    "v2v_ms": summary_ms(latencies[name]),
                    **counts[name],
                    "stages_ms": _median_stages(stages[name]),
                    # per caller turn said, each pass's warm-up turn included
                    "eot_inferences_per_turn": round(inferences[name] / (passes * (turns + 1)), 2),
                }
                for name in stacks
            },
            "passes": passes,
            "load_before": round(load, 2),
            "load_after": round(os.getloadavg()[0], 2),
        }
    }


def _inferences(model: Any) -> int:
    """End-of-turn inferences run so far (Smart Turn's counter; 0 for a model without one)."""
    stats = getattr(model, "stats", None)
    return int(stats.utterances) if stats is not None else 0


def _median_stages(passes: list[dict[str, float]]) -> dict[str, float]:
    """Each stage's median over the passes' medians (stages a pass did not see left out)."""
    names = {name for figures in passes for name in figures}
    return {
        name: round(statistics.median([f[name] for f in passes if name in f]), 1)
        for name in sorted(names)
    }
