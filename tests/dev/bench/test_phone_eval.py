"""The phone bench's evaluation set is sound: with perfect recognition every request gets
its tool and no unrelated utterance gets one, so what the bench counts wrong is the
recognizer's (or the tolerant matching's) doing."""

from __future__ import annotations

import json
import tomllib
from collections import Counter
from pathlib import Path

import pytest

from voicehub.agents.llm import ChatMessage, ToolCallChunk, ToolSpec
from voicehub.agents.scripted import ScriptedLLM
from voicehub_dev.bench.phone_eval import (
    FRESH2_REQUESTS,
    FRESH2_UNRELATED,
    FRESH3_REQUESTS,
    FRESH3_UNRELATED,
    FRESH_REQUESTS,
    FRESH_UNRELATED,
    HALVES,
    PARTS,
    REQUESTS,
    UNRELATED,
    phrasings,
)

CHANNELS = Path(__file__).resolve().parents[3] / "channels"
TOOLS = [
    ToolSpec(name=n) for n in ("delegate_workers", "check_tasks", "cancel_task", "search_knowledge")
]


@pytest.fixture(scope="module")
def front() -> ScriptedLLM:
    with (CHANNELS / "research.toml").open("rb") as file:
        scripted = tomllib.load(file)["agents"][0]["scripted"]
    return ScriptedLLM(scripted["rules"], fallback=scripted["fallback"])


def called(llm: ScriptedLLM, words: str) -> tuple[str, str] | None:
    chunks = llm.respond([ChatMessage(role="user", content=words)], TOOLS)
    calls = [c.call for c in chunks if isinstance(c, ToolCallChunk)]
    return (calls[0].name, json.dumps(json.loads(calls[0].arguments))) if calls else None


EVERY_REQUEST = REQUESTS + FRESH_REQUESTS + FRESH2_REQUESTS + FRESH3_REQUESTS
EVERY_UNRELATED = UNRELATED + FRESH_UNRELATED + FRESH2_UNRELATED + FRESH3_UNRELATED


@pytest.mark.parametrize(("words", "tool", "needle"), EVERY_REQUEST)
def test_each_request_said_plainly_gets_its_tool(
    front: ScriptedLLM, words: str, tool: str, needle: str
) -> None:
    call = called(front, words)
    assert call is not None and call[0] == tool and needle in call[1].lower()


@pytest.mark.parametrize("words", EVERY_UNRELATED)
def test_no_unrelated_utterance_said_plainly_calls_a_tool(front: ScriptedLLM, words: str) -> None:
    assert called(front, words) is None


def test_unrelated_utterances_are_not_requests() -> None:
    requests = {words for words, _, _ in EVERY_REQUEST}
    assert not requests & set(EVERY_UNRELATED)
    assert len(UNRELATED) >= 20 and len(FRESH_UNRELATED) >= 10 and len(FRESH2_UNRELATED) >= 10
    assert len(FRESH3_UNRELATED) >= 10


def test_the_set_splits_into_tuning_held_out_and_fresh_phrasings() -> None:
    listed = phrasings(quick=False)
    assert len(listed) == len(EVERY_REQUEST) + len(EVERY_UNRELATED)
    halves = {half: [p for p in listed if p[3] == half] for half in PARTS}
    assert sum(len(found) for found in halves.values()) == len(listed)
    # Each half has requests of every tool and unrelated utterances.
    tools = {tool for _, tool, _ in REQUESTS}
    for found in halves.values():
        assert {tool for _, tool, _, _ in found if tool} == tools
        assert any(not tool for _, tool, _, _ in found)
    fresh = {words for words, _, _, _ in halves["fresh"]}
    assert fresh == {w for w, _, _ in FRESH_REQUESTS} | set(FRESH_UNRELATED)
    assert not fresh & ({w for w, _, _ in REQUESTS} | set(UNRELATED))  # new phrasings only
    fresh2 = {words for words, _, _, _ in halves["fresh2"]}
    assert fresh2 == {w for w, _, _ in FRESH2_REQUESTS} | set(FRESH2_UNRELATED)
    seen = {w for w, _, _ in REQUESTS + FRESH_REQUESTS} | set(UNRELATED + FRESH_UNRELATED)
    assert not fresh2 & seen
    # Same tools and mix as the fresh part.
    assert Counter(t for _, t, _ in FRESH2_REQUESTS) == Counter(t for _, t, _ in FRESH_REQUESTS)
    fresh3 = {words for words, _, _, _ in halves["fresh3"]}
    assert fresh3 == {w for w, _, _ in FRESH3_REQUESTS} | set(FRESH3_UNRELATED)
    assert not fresh3 & (seen | fresh2)
    assert Counter(t for _, t, _ in FRESH3_REQUESTS) == Counter(t for _, t, _ in FRESH_REQUESTS)
    # Last, so the parts before it keep their audio (eSpeak NG's depends on what came before).
    assert [p[3] for p in listed][-len(fresh3) :] == ["fresh3"] * len(fresh3)
    assert set(HALVES) < set(PARTS)
