"""`voicehub bench --only phone`: the cost of the phone codec, and tool choice on phone audio.

- `codec_us_per_frame`: decode 20 ms of caller mu-law and upsample it to 16 kHz, plus
  downsample 20 ms of agent audio and encode it (what `TwilioMediaTransport` does per frame).
- `tool_accuracy` / `tool_accuracy_wideband`: requests to the research desk, spoken by
  Piper, recognized by PocketSphinx at 16 kHz (wideband) or after the phone path (8 kHz,
  300-3400 Hz, mu-law), then answered by the desk's scripted front agent; a request counts
  when the agent picks the expected tool with the expected topic word. A small set with one
  voice: a smoke figure, not the issue's evaluation set.
"""

from __future__ import annotations

import asyncio
import time
import tomllib
from pathlib import Path
from typing import Any

import numpy as np

from voicehub.voice.audio import (
    Resampler,
    int16_to_pcm16,
    lin2ulaw,
    pcm16_to_int16,
    resample_pcm16,
    ulaw2lin,
)

# (words, expected tool, a word the tool's arguments must hold, or "")
_REQUESTS = [
    ("please research solar panels", "delegate_workers", "solar"),
    ("could you research heat pumps for me please", "delegate_workers", "heat"),
    ("can you look into wind turbines", "delegate_workers", "wind"),
    ("find out about home batteries please", "delegate_workers", "batter"),
    ("could you dig into home insulation", "delegate_workers", "insulation"),
    ("research electric cars for me", "delegate_workers", "car"),
    ("how is it going", "check_tasks", ""),
    ("any news", "check_tasks", ""),
    ("never mind", "cancel_task", ""),
    ("cancel that please", "cancel_task", ""),
    ("what is a smart meter", "search_knowledge", "meter"),
    ("what are led bulbs", "search_knowledge", ""),
]


def codec_cost(frames: int) -> float:
    """Microseconds per 20 ms frame for both directions of the phone path."""
    up, down = Resampler(8000, 16000), Resampler(16000, 8000)
    rng = np.random.default_rng(1)
    caller = lin2ulaw(int16_to_pcm16(rng.integers(-8000, 8000, 160)))
    agent = int16_to_pcm16(rng.integers(-8000, 8000, 320))
    started = time.perf_counter()
    for _ in range(frames):
        up.push(pcm16_to_int16(ulaw2lin(caller)))
        lin2ulaw(int16_to_pcm16(down.push(pcm16_to_int16(agent))))
    return (time.perf_counter() - started) / frames * 1e6


def phone_band(pcm16: bytes) -> bytes:
    """16 kHz speech as it arrives from a phone: 8 kHz, 300-3400 Hz, through mu-law."""
    narrow = pcm16_to_int16(resample_pcm16(pcm16, 16000, 8000)).astype(np.float64)
    spectrum = np.fft.rfft(narrow)
    freqs = np.fft.rfftfreq(len(narrow), 1 / 8000)
    spectrum[(freqs < 300) | (freqs > 3400)] = 0
    band = np.clip(np.fft.irfft(spectrum, len(narrow)), -32768, 32767).astype(np.int16)
    return ulaw2lin(lin2ulaw(int16_to_pcm16(band)))


def tool_accuracy(quick: bool) -> tuple[float, float]:
    from voicehub.agents.llm import ChatMessage, ToolCallChunk, ToolSpec
    from voicehub.agents.scripted import ScriptedLLM
    from voicehub.voice.providers.offline import synthesize, transcribe

    # The research desk's front agent, read from its file (bench sits below `desks`).
    with (Path("channels") / "research.toml").open("rb") as file:
        front = tomllib.load(file)["agents"][0]["scripted"]
    llm = ScriptedLLM(front["rules"], fallback=front.get("fallback", ""))
    tools = ("delegate_workers", "check_tasks", "cancel_task", "search_knowledge")
    specs = [ToolSpec(name=name) for name in tools]
    requests = _REQUESTS[:4] if quick else _REQUESTS
    right = {"wide": 0, "phone": 0}
    for words, tool, needle in requests:
        speech = synthesize(words, voice="piper", sample_rate=16000)
        for band, heard in (
            ("wide", transcribe(speech, 16000)),
            ("phone", transcribe(phone_band(speech), 8000)),
        ):
            chunks = llm.respond([ChatMessage(role="user", content=heard)], specs)
            calls = [c.call for c in chunks if isinstance(c, ToolCallChunk)]
            if calls and calls[0].name == tool and needle in calls[0].arguments.lower():
                right[band] += 1
    return right["phone"] / len(requests), right["wide"] / len(requests)


async def run(store: str = "sqlite", quick: bool = False) -> dict[str, Any]:
    codec = codec_cost(2_000 if quick else 20_000)
    phone, wide = await asyncio.to_thread(tool_accuracy, quick)
    return {
        "phone": {
            "codec_us_per_frame": round(codec, 1),
            "tool_accuracy": round(phone, 3),
            "tool_accuracy_wideband": round(wide, 3),
            "requests": len(_REQUESTS[:4] if quick else _REQUESTS),
        }
    }
