"""Runs the benchmark sections and prints or writes their figures."""

from __future__ import annotations

import asyncio
import json
import math
import statistics
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from voicehub_dev.bench.wakeups import CountingEventLoop

Section = Callable[[str, bool], Coroutine[Any, Any, dict[str, Any]]]


def _sections() -> dict[str, Section]:
    from voicehub_dev.bench import (
        audio,
        cloud_pipeline,
        delegation,
        delivery,
        delivery_talkover,
        failover,
        faults,
        mcp,
        memory,
        noise,
        observability,
        offline_load,
        phone,
        realtime,
        stt_final,
        tts,
        turns,
        v2v,
        vad_batch,
        voice,
        webrtc,
    )

    return {
        "delegation": delegation.run,
        "delivery": delivery.run,
        "delivery_talkover": delivery_talkover.run,
        "voice": voice.run,
        "v2v": v2v.run,
        "vad": vad_batch.run,
        "audio": audio.run,
        "phone": phone.run,
        "stt_final": stt_final.run,
        "tts": tts.run,
        "offline": offline_load.run,
        "webrtc": webrtc.run,
        "realtime": realtime.run,
        "cloud_pipeline": cloud_pipeline.run,
        "memory": memory.run,
        "failover": failover.run,
        "faults": faults.run,
        "turns": turns.run,
        "observability": observability.run,
        "noise": noise.run,
        "noise_accuracy": noise.run_accuracy,
        "mcp": mcp.run,
    }


def flatten(figures: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    rows: list[tuple[str, Any]] = []
    for key, value in figures.items():
        name = f"{prefix}.{key}" if prefix else key
        if isinstance(value, dict):
            rows.extend(flatten(value, name))
        else:
            rows.append((name, value))
    return rows


def spread(rounds: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, list[float]]]:
    """Nested figures with each number replaced by its median over `rounds`, and the
    (min, median, max) of every numeric figure by flattened name. Other values (settings,
    per-run lists) are kept from the last round."""
    per_name: dict[str, list[float]] = {}
    for figures in rounds:
        for name, value in flatten(figures):
            if isinstance(value, int | float) and not isinstance(value, bool):
                per_name.setdefault(name, []).append(value)
    ranges = {
        name: [min(values), statistics.median(values), max(values)]
        for name, values in per_name.items()
        if all(math.isfinite(v) for v in values)
    }
    return _with_medians(rounds[-1], ranges), ranges


def _with_medians(
    figures: dict[str, Any], ranges: dict[str, list[float]], prefix: str = ""
) -> dict[str, Any]:
    merged: dict[str, Any] = {}
    for key, value in figures.items():
        name = f"{prefix}.{key}" if prefix else key
        if isinstance(value, dict):
            merged[key] = _with_medians(value, ranges, name)
        elif name in ranges:
            merged[key] = _number(ranges[name][1])
        else:
            merged[key] = value
    return merged


def _number(value: float) -> float:
    return round(value, 4) if isinstance(value, float) else value


def run_bench(
    only: list[str] | None,
    store: str,
    quick: bool,
    json_path: Path | None,
    rounds: int = 3,
) -> dict[str, Any]:
    """Run the chosen sections (all by default) `rounds` times each, print each figure as
    its median with (min .. max) over the rounds, and optionally write the medians as JSON
    (the spread goes under the top-level key `spread`)."""
    sections = _sections()
    unknown = sorted(set(only or []) - set(sections))
    if unknown:
        raise SystemExit(f"unknown bench section(s) {unknown}; choose from {sorted(sections)}")
    if rounds < 1:
        raise SystemExit(f"--rounds must be at least 1, got {rounds}")
    figures: dict[str, Any] = {}
    ranges: dict[str, list[float]] = {}
    for name, section in sections.items():
        if only and name not in only:
            continue
        results: list[dict[str, Any]] = []
        for round_ in range(rounds):
            print(f"# {name}: round {round_ + 1} of {rounds}", flush=True)
            # on a loop that can count its wake-ups (bench.wakeups), at no cost otherwise
            with asyncio.Runner(loop_factory=CountingEventLoop) as runner:
                results.append(runner.run(section(store, quick)))
        result, section_ranges = spread(results)
        ranges.update(section_ranges)
        for key, value in result.items():
            figures.setdefault(key, {}).update(value)
        for key, value in flatten(result):
            if key in section_ranges:
                low, _, high = section_ranges[key]
                value = f"{value}  ({_number(low)} .. {_number(high)}, {len(results)} rounds)"
            print(f"{key:55s} {value}", flush=True)
    if json_path is not None:
        document = {**figures, "spread": {"rounds": rounds, "min_median_max": ranges}}
        json_path.write_text(json.dumps(document, indent=2) + "\n")
        print(f"wrote {json_path}")
    return figures
