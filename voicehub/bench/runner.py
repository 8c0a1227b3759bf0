"""Runs the benchmark sections and prints or writes their figures."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

Section = Callable[[str, bool], Coroutine[Any, Any, dict[str, Any]]]


def _sections() -> dict[str, Section]:
    from voicehub.bench import delegation, delivery, realtime, voice

    return {
        "delegation": delegation.run,
        "delivery": delivery.run,
        "voice": voice.run,
        "realtime": realtime.run,
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


def run_bench(
    only: list[str] | None, store: str, quick: bool, json_path: Path | None
) -> dict[str, Any]:
    """Run the chosen sections (all by default), print each figure, optionally write JSON."""
    sections = _sections()
    unknown = sorted(set(only or []) - set(sections))
    if unknown:
        raise SystemExit(f"unknown bench section(s) {unknown}; choose from {sorted(sections)}")
    figures: dict[str, Any] = {}
    for name, section in sections.items():
        if only and name not in only:
            continue
        result: dict[str, Any] = asyncio.run(section(store, quick))
        for key, value in result.items():
            figures.setdefault(key, {}).update(value)
        for key, value in flatten(result):
            print(f"{key:55s} {value}", flush=True)
    if json_path is not None:
        json_path.write_text(json.dumps(figures, indent=2) + "\n")
        print(f"wrote {json_path}")
    return figures
