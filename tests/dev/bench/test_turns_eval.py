"""The turns bench's evaluation set is sound: with the words known, every request gets its
tool from its desk, the half before each pause is open or is a known hard case, and a
pause lands where the comma was, as silence of the length asked for."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import numpy as np
import pytest

from voicehub.agents.llm import ChatMessage, ToolCallChunk, ToolSpec
from voicehub.agents.scripted import ScriptedLLM
from voicehub.desks.desk import load_desks
from voicehub.desks.turns import desk_words_open
from voicehub_dev.bench import turns_eval
from voicehub_dev.bench.turns import _score
from voicehub_dev.bench.turns_eval import COMPLETE_REQUESTS, PAUSED_REQUESTS, with_pause

CHANNELS = Path(__file__).resolve().parents[3] / "channels"


def front(desk: str) -> tuple[ScriptedLLM, list[ToolSpec]]:
    with (CHANNELS / f"{desk}.toml").open("rb") as file:
        scripted = tomllib.load(file)["agents"][0]["scripted"]
    llm = ScriptedLLM(scripted["rules"], fallback=scripted.get("fallback", ""))
    tools = sorted({rule.tool for rule in llm.rules if rule.tool is not None})
    return llm, [ToolSpec(name=name) for name in tools]


def called(desk: str, words: str) -> tuple[str, str] | None:
    llm, tools = front(desk)
    chunks = llm.respond([ChatMessage(role="user", content=words)], tools)
    calls = [c.call for c in chunks if isinstance(c, ToolCallChunk)]
    return (calls[0].name, json.loads(calls[0].arguments)) if calls else None


@pytest.mark.parametrize(
    ("desk", "words", "tool", "needle"),
    [(d, w.replace(" | ", " "), t, n) for d, w, _, t, n in PAUSED_REQUESTS if t]
    + [(d, w, t, n) for d, w, t, n in COMPLETE_REQUESTS if t],
)
def test_every_request_said_whole_gets_its_tool(
    desk: str, words: str, tool: str, needle: str
) -> None:
    call = called(desk, words)
    assert call is not None and call[0] == tool, (words, call)
    assert needle in json.dumps(call[1]).lower(), (words, call)


def test_the_words_before_most_pauses_are_open_to_the_desk() -> None:
    desks = load_desks(CHANNELS)
    closed = [
        before.strip()
        for desk, marked, *_ in PAUSED_REQUESTS
        if not desk_words_open(desks[desk])(before := marked.split("|")[0])
    ]
    # the hard cases, left for the end-of-turn model: a polite tail, a subject alone
    assert closed == ["research solar panels", "my router"]
    assert not any(desk_words_open(desks[d])(w) for d, w, *_ in COMPLETE_REQUESTS)


@pytest.mark.slow
def test_a_pause_replaces_the_comma_with_silence_of_its_length(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VOICEHUB_BENCH_CACHE", str(tmp_path))
    pcm16, spliced = with_pause("piper", "could you research | heat pumps for me please", 0.7)
    assert not spliced
    samples = np.frombuffer(pcm16, dtype="<i2")
    silent = np.concatenate([[0], (samples == 0).astype(np.int8), [0]])
    edges = np.flatnonzero(np.diff(silent))
    runs = list(zip(edges[::2], edges[1::2], strict=True))
    longest = max(runs, key=lambda run: run[1] - run[0])
    assert longest[1] - longest[0] >= round(0.7 * turns_eval.RATE)
    assert longest[1] - longest[0] < round(0.8 * turns_eval.RATE)
    assert 0.2 < longest[0] / len(samples) < 0.6  # after "could you research"
    assert with_pause("piper", "could you research | heat pumps for me please", 0.7)[0] == pcm16


def test_the_score_counts_cut_offs_up_to_a_second_and_interruptions() -> None:
    paused = [
        {"voice": "piper", "pause": p, "position": "verb", "spliced": False, "cut_off": c,
         "reply_started_early": c, "tool_reached": True}
        for p, c in ((0.3, False), (0.6, True), (1.0, False), (1.2, True))
    ]  # fmt: skip
    complete = [
        {"voice": "piper", "eot_s": s, "reply_s": s, "cut_off": False, "tool_reached": True}
        for s in (0.5, 0.7, None)
    ]
    over = {"valid": True, "voice": "piper", "words": "okay"}
    records = {
        "paused": paused,
        "complete": complete,
        "backchannel_reply": [
            {**over, "stopped": True, "cut": False, "answered": False},  # paused, resumed
            {**over, "stopped": True, "cut": True, "answered": True},
            {**over, "stopped": False, "cut": False, "answered": False},
            {**over, "stopped": False, "cut": False, "answered": False},
        ],
        "backchannel_delivery": [{**over, "stopped": True, "interrupted": True}, {"valid": False}],
        "noise_reply": [],
        "noise_delivery": [],
        "stop_reply": [{**over, "stopped": True, "cut": True, "answered": False}],
    }  # fmt: skip
    figures = _score(records)
    assert figures["false_cutoff_rate"] == pytest.approx(1 / 3, abs=1e-3)
    assert figures["false_cutoff_rate_1_2"] == 1.0
    assert figures["eot_delay_ms"]["median"] == pytest.approx(600)
    assert figures["complete_unanswered"] == 1
    assert figures["backchannel_interruptions"]["replies"] == 0.5
    assert figures["backchannel_interruptions"]["replies_cut"] == 0.25
    assert figures["backchannel_interruptions"]["replies_answered"] == 0.25
    assert figures["backchannel_interruptions"]["deliveries"] == 1
    assert figures["backchannel_interruptions"]["deliveries_tried"] == 1
    assert figures["stop_words"]["replies_stopped"] == 1.0
    assert figures["stop_words"]["replies_cut"] == 1.0
    assert figures["voices"]["piper"]["false_cutoff_rate"] == pytest.approx(1 / 3, abs=1e-3)


def test_a_part_of_the_set_is_chosen_by_name_and_an_unknown_one_named_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from voicehub_dev.bench.turns import PARTS, _parts

    monkeypatch.delenv("VOICEHUB_TURNS_PARTS", raising=False)
    assert _parts() == PARTS
    monkeypatch.setenv("VOICEHUB_TURNS_PARTS", "overlaps, paused")
    assert _parts() == ("overlaps", "paused")
    monkeypatch.setenv("VOICEHUB_TURNS_PARTS", "overlaps,pauses")
    with pytest.raises(ValueError, match=r"unknown \['pauses'\]"):
        _parts()
