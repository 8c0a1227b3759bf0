"""`voicehub bench --only turns`: does the call end the caller's turn when they finish, and
only then? Does the agent keep talking through an "uh-huh"?

Every item of the evaluation set (`voicehub_dev.bench.turns_eval`) is one call to an example
desk, through a `VoiceStack` (the session under test: the registered voice stacks by
default; `VOICEHUB_TURNS_SESSION=module:callable` names a callable returning another, and
`measure` takes one), with the desk's scripted agent and offline STT, the caller's audio
paced in real time (`voicehub_dev.bench.turns_call`). Several calls run at once
(`VOICEHUB_TURNS_CONCURRENT`, 3 by default): the figures are wall-clock timings, so a
busy machine shifts them.

- `false_cutoff_rate`: requests with a pause of up to 1.0 s inside them that were split
  (two caller turns in the room) or answered before their last word (agent audio played
  while the caller had words left; `replies_started_early` counts replies begun, heard or
  not); `false_cutoff_rate_1_2`
  for the 1.2 s pauses; broken down by pause, by where the pause falls and by voice.
  `tool_reached`: the request's tool was called with its topic (this one also counts what
  the recogniser misheard).
- `eot_delay_ms`: complete requests, from the end of the caller's last voiced frame to the
  agent's reply starting (the turn's commit); `reply_ms`: to its first audio.
- `backchannel_interruptions`: acknowledgements ("uh-huh", "okay", ...) said 1.2 s into
  the agent's answer to a question (`replies`: the share that stopped it, if only for a
  pause it then resumed from; `replies_cut`: the share that ended it for good) and into the
  first delivery of a research result (`deliveries`: how many were cut off, of
  `deliveries_tried`); the same for noises (`noise_interruptions`) and, as the control,
  stop words (`stop_words.replies_stopped`, which should be 1).
- `eot_us_per_turn`: CPU of one end-of-turn model inference (the engine asks once per
  pause), Smart Turn v3.2 on this machine, alone and in batches of 16 (`model`); there,
  too, how well its probabilities tell the cut halves of the requests from the whole ones
  (`auc`; at the policy's threshold, the share of cut halves judged complete,
  `cut_judged_complete`, and of whole requests judged unfinished, `whole_judged_unfinished`),
  and what the pure turn policy would make of this set with the words known
  (`policy_with_known_words`).
"""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import statistics
import tempfile
from collections import defaultdict
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from voicehub.core.events import EventKind
from voicehub.core.hooks import HookContext, HookTrigger
from voicehub.voice.events import ToolCall
from voicehub_dev.bench.stats import summary_ms
from voicehub_dev.bench.turns_call import BenchCall
from voicehub_dev.bench.turns_eval import (
    CompleteRequest,
    PausedRequest,
    complete_requests,
    overlap_clips,
    paused_requests,
    spoken,
)

CHANNELS = Path("channels")
CONCURRENT = int(os.environ.get("VOICEHUB_TURNS_CONCURRENT", "3"))  # calls at once
ROWS = os.environ.get("VOICEHUB_TURNS_ROWS")
"""A file to write every call's row to (JSON lines: what was said, the caller turns the room
holds, the tools called), to trace a figure back to its calls."""
PARTS = ("paused", "complete", "overlaps")
"""The parts of the set (`VOICEHUB_TURNS_PARTS`, comma separated, all by default: a quicker
look at one behaviour; the figures of a part left out are absent)."""
QUESTION = ("research", "what is a heat pump")  # a long answer, for talking over it
RESEARCH = ("research", "could you research heat pumps for me please")  # then a delivery
OVERLAP_AFTER = 1.2  # seconds into the agent's speech the caller's sound starts


def voice_stack() -> Any:
    """The sessions under test: `VOICEHUB_TURNS_SESSION` ("module:callable") or the
    registered voice stacks (`default_voice_stacks`)."""
    named = os.environ.get("VOICEHUB_TURNS_SESSION")
    if named:
        module, _, attribute = named.partition(":")
        return getattr(importlib.import_module(module), attribute)()
    from voicehub.desks.voice_stack import default_voice_stacks

    return default_voice_stacks()


def without_early_start() -> Any:
    """The offline voice stack with the end-of-turn model's early start off
    (`TurnSettings.model_early=None`: the model starts when the policy asks, at the VAD's
    end of speech): `VOICEHUB_TURNS_SESSION=voicehub_dev.bench.turns:without_early_start`,
    to weigh what the early start does to the figures."""
    return _with_policy(model_early=None)


def without_whole_requests() -> Any:
    """The offline voice stack with the whole-request word rule off (`TurnSettings.
    complete_silence` at the ceiling: words the desk answers as they stand no longer cut the
    model's wait short): `VOICEHUB_TURNS_SESSION=voicehub_dev.bench.turns:
    without_whole_requests`, to weigh what the rule does to the false cut-offs."""
    return _with_policy(complete_silence=None)


def _with_policy(**changes: Any) -> Any:
    """The offline voice stack with the desks' turn policy changed (`complete_silence=None`:
    at the policy's ceiling)."""
    import dataclasses

    from voicehub.desks.offline_stack import OfflineStack, PipelineResources
    from voicehub.desks.pipeline_call import desk_engine_options, start_pipeline_call
    from voicehub.desks.voice_stack import VoiceStacks

    class Changed(OfflineStack):
        async def start(self, call: Any) -> Any:
            options = desk_engine_options(call.desk)
            policy = options.turn.policy
            chosen = dict(changes)
            if "complete_silence" in chosen and chosen["complete_silence"] is None:
                chosen["complete_silence"] = policy.max_silence
            policy = dataclasses.replace(policy, **chosen)
            turn = dataclasses.replace(options.turn, policy=policy)
            return await start_pipeline_call(
                call,
                self.call_speech(call.desk),
                options=dataclasses.replace(options, turn=turn),
                prerender_budget=self.shared.prerender_budget,
            )

    return VoiceStacks({"offline": Changed(PipelineResources())})


async def run(store: str = "sqlite", quick: bool = False) -> dict[str, Any]:
    return {"turns": await measure(voice_stack(), store=store, quick=quick)}


async def measure(voice: Any, *, store: str = "sqlite", quick: bool = False) -> dict[str, Any]:
    """Every figure of the section (see the module) for the sessions `voice` starts."""
    from voicehub.desks.desk import load_desks
    from voicehub.hub import Hub
    from voicehub_dev.bench.turns_model import model_figures
    from voicehub_dev.bench.voice_load import sqlite_or_memory

    parts = _parts()
    paused = await asyncio.to_thread(paused_requests, quick) if "paused" in parts else []
    complete = await asyncio.to_thread(complete_requests, quick) if "complete" in parts else []
    clips = await asyncio.to_thread(overlap_clips, quick) if "overlaps" in parts else {}
    question = await asyncio.to_thread(spoken, "piper", QUESTION[1])
    research = await asyncio.to_thread(spoken, "piper", RESEARCH[1])
    desks = load_desks(CHANNELS)
    used = sorted({i.desk for i in paused} | {i.desk for i in complete} | {QUESTION[0]})
    await voice.prepare([desks[name] for name in used])
    records: dict[str, list[dict[str, Any]]] = defaultdict(list)
    with tempfile.TemporaryDirectory() as folder:
        stores = sqlite_or_memory(store, Path(folder))
        hubs = {name: Hub(store=stores(f"turns-{name}"), orchestration=None) for name in used}
        deliveries = _DeliveryLog()
        for hub in hubs.values():
            await hub.start()
            deliveries.watch(hub)
        gate = asyncio.Semaphore(CONCURRENT)
        numbers = iter(range(1_000_000))

        async def call(
            desk: str, realtime: bool, body: Callable[[BenchCall], Awaitable[Any]]
        ) -> Any:
            async with gate:
                room = f"turns-{desk}-{next(numbers)}"
                async with BenchCall(voice, hubs[desk], desks[desk], room, realtime=realtime) as c:
                    return await body(c)

        jobs: list[Awaitable[None]] = []

        async def keep(kind: str, item: dict[str, Any], run: Awaitable[dict[str, Any]]) -> None:
            records[kind].append({**item, **await run})

        for p in paused:
            info = {"voice": p.voice, "pause": p.pause, "position": p.position, "desk": p.desk}
            info |= {"tool": p.tool, "needle": p.needle, "spliced": p.spliced}
            jobs.append(keep("paused", info, call(p.desk, False, _request_of(p))))
        for c in complete:
            info = {"voice": c.voice, "desk": c.desk, "tool": c.tool, "needle": c.needle}
            jobs.append(keep("complete", info, call(c.desk, False, _request_of(c))))
        for kind, listed in clips.items():
            for speaker, words, pcm16 in listed:
                info = {"voice": speaker, "words": words, "kind": kind}
                reply = _over_reply(question, pcm16)
                jobs.append(keep(f"{kind}_reply", info, call(QUESTION[0], True, reply)))
                if kind != "stop" and (kind == "noise" or speaker in ("piper", "flite-slt")):
                    over = _over_delivery(research, pcm16, deliveries)
                    jobs.append(keep(f"{kind}_delivery", info, call(RESEARCH[0], True, over)))
        await asyncio.gather(*jobs)
        for hub in hubs.values():
            await hub.aclose()
    if ROWS:
        lines = [json.dumps({**r, "part": k}, default=str) for k, rs in records.items() for r in rs]
        with Path(ROWS).open("a", encoding="utf-8") as rows:  # noqa: ASYNC230 (once, at the end)
            rows.write("".join(line + "\n" for line in lines))
    figures = _score(records)
    if paused and complete:
        figures["model"] = await asyncio.to_thread(model_figures, paused, complete, desks)
        figures["eot_us_per_turn"] = figures["model"].get("us_per_inference")
    figures["concurrent_calls"] = CONCURRENT
    return figures


def _parts() -> tuple[str, ...]:
    chosen = os.environ.get("VOICEHUB_TURNS_PARTS", "")
    parts = tuple(p.strip() for p in chosen.split(",") if p.strip()) or PARTS
    unknown = sorted(set(parts) - set(PARTS))
    if unknown:
        raise ValueError(f"VOICEHUB_TURNS_PARTS: unknown {unknown}; choose from {PARTS}")
    return parts


def _request_of(item: PausedRequest | CompleteRequest) -> Callable[[BenchCall], Awaitable[Any]]:
    async def request(call: BenchCall) -> dict[str, Any]:
        said = await call.speak(item.pcm16)
        # past the longest a turn may wait (2 s), then quiet: a late commit is seen too
        await call.wait_quiet(1.2, timeout=20.0, not_before=said.last + 2.2)
        history = await call.hub.history(call.room_id)
        turns = [e for e in history if e.kind is EventKind.TRANSCRIPT and e.role == "user"]
        transport = call.transport
        thinking = transport.thinking_times()
        # heard early: agent audio played before the last word (a reply begun and cancelled
        # before any of it played is no cut-off: the caller never heard it)
        early = [t for t in transport.segments if said.first <= t < said.last]
        started = [t for t in thinking if said.first <= t < said.last]
        answer = [t - said.last for t in thinking if t >= said.last]
        audio = [t - said.last for t in transport.segments if t >= said.last]
        tools = [e for _, e in transport.events if isinstance(e, ToolCall)]
        reached = any(t.name == item.tool and item.needle in t.arguments.lower() for t in tools)
        return {
            "said": item.words,
            "heard": [e.text for e in turns],
            "tools": [(t.name, t.arguments) for t in tools],
            "caller_turns": len(turns),
            "cut_off": bool(early) or len(turns) > 1,
            "answered_early": bool(early),
            "reply_started_early": bool(started),
            # to trace an early answer: when agent audio began and replies started, in
            # seconds from the caller's first word (the greeting's are negative)
            "audio_from_first_s": [round(t - said.first, 3) for t in transport.segments],
            "thinking_from_first_s": [round(t - said.first, 3) for t in thinking],
            "eot_s": answer[0] if answer else None,
            "reply_s": audio[0] if audio else None,
            "tool_reached": reached if item.tool else None,
        }

    return request


def _over_reply(question: bytes, clip: bytes) -> Callable[[BenchCall], Awaitable[Any]]:
    async def over(call: BenchCall) -> dict[str, Any]:
        asked = await call.speak(question)
        transport = call.transport
        if not await call.wait_for(lambda: any(t >= asked.last for t in transport.segments), 15):
            return {"valid": False}
        start = next(t for t in transport.segments if t >= asked.last)
        return await _talk_over(call, start, clip)

    return over


def _over_delivery(
    request: bytes, clip: bytes, deliveries: _DeliveryLog
) -> Callable[[BenchCall], Awaitable[Any]]:
    async def over(call: BenchCall) -> dict[str, Any]:
        await call.speak(request)
        room, transport = call.room_id, call.transport
        if not await call.wait_for(lambda: bool(deliveries.attempts[room]), 40):
            return {"valid": False}
        attempted, delivery_id = deliveries.attempts[room][0]
        if not await call.wait_for(lambda: any(t >= attempted for t in transport.segments), 15):
            return {"valid": False}
        start = next(t for t in transport.segments if t >= attempted)
        result = await _talk_over(call, start, clip, settle=False)
        if not result["valid"]:
            return result
        await call.wait_for(lambda: delivery_id in deliveries.outcomes, 60)
        outcome = deliveries.outcomes.get(delivery_id)
        return {**result, "outcome": outcome, "interrupted": outcome != "delivered"}

    return over


async def _talk_over(
    call: BenchCall, start: float, clip: bytes, *, settle: bool = True
) -> dict[str, Any]:
    """The caller's `clip` `OVERLAP_AFTER` seconds into agent speech that began at `start`
    (valid when at least 0.8 s of it was still to play): did it stop the agent, did the
    agent answer it?"""
    await call.wait_for(lambda: call.now() >= start + OVERLAP_AFTER, 10)
    if call.transport.playing_until() < call.now() + 0.8:
        return {"valid": False}
    before = _agent_cuts(await call.hub.history(call.room_id))
    said = await call.speak(clip)
    if settle:
        await call.wait_quiet(1.0, timeout=40.0, not_before=said.last + 2.2)
    else:
        await call.wait_for(lambda: call.now() >= said.last + 1.0, 5)
    clears = [t for t in call.transport.clears if t >= said.first - 0.05]
    answered = [t for t in call.transport.thinking_times() if t >= said.first]
    history = await call.hub.history(call.room_id)
    # the agent's speech ended before its last word since the clip began (a pause it
    # resumed from is not; a greeting the question cut is not the clip's doing)
    cut = _agent_cuts(history) > before
    heard = [e.text for e in history if e.kind is EventKind.TRANSCRIPT and e.role == "user"]
    return {
        "valid": True,
        "stopped": bool(clears),
        "cut": cut,
        "answered": bool(answered),
        "heard": heard[1:],  # the caller's turns after the question
    }


def _agent_cuts(history: list[Any]) -> int:
    """How many of the agent's speeches in `history` (a room's) were cut before their end."""
    return sum(
        1
        for e in history
        if e.kind is EventKind.TRANSCRIPT
        and e.role == "assistant"
        and e.metadata.get("interrupted")
    )


class _DeliveryLog:
    """Delivery attempts and outcomes per room, from the hubs' delivery hooks."""

    def __init__(self) -> None:
        self.attempts: dict[str, list[tuple[float, str]]] = defaultdict(list)
        self.outcomes: dict[str, str] = {}

    def watch(self, hub: Any) -> None:
        hub.hooks.add(HookTrigger.BEFORE_DELIVER, self._attempt, name="turns-bench")
        hub.hooks.add(HookTrigger.AFTER_DELIVER, self._outcome, name="turns-bench")

    async def _attempt(self, event: Any, context: HookContext) -> None:
        now = asyncio.get_running_loop().time()
        self.attempts[event.room_id].append((now, str(event.metadata.get("delivery_id"))))

    async def _outcome(self, event: Any, context: HookContext) -> None:
        self.outcomes.setdefault(
            str(event.metadata.get("delivery_id")), str(event.metadata.get("outcome"))
        )


def _rate(rows: list[dict[str, Any]], key: str) -> float:
    values = [bool(row[key]) for row in rows if row.get(key) is not None]
    return round(sum(values) / len(values), 4) if values else float("nan")


def _by(rows: list[dict[str, Any]], field: str, key: str) -> dict[str, float]:
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        groups[str(row[field])].append(row)
    return {name: _rate(group, key) for name, group in sorted(groups.items())}


def _median_ms(rows: list[dict[str, Any]], key: str) -> float:
    values = [row[key] for row in rows if row.get(key) is not None]
    return round(statistics.median(values) * 1000, 1) if values else float("nan")


def _score(records: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    paused = records["paused"]
    target = [row for row in paused if row["pause"] <= 1.0]
    complete = records["complete"]
    eot = [row["eot_s"] for row in complete if row["eot_s"] is not None]
    figures: dict[str, Any] = {
        "false_cutoff_rate": _rate(target, "cut_off"),
        "false_cutoff_rate_1_2": _rate([r for r in paused if r["pause"] > 1.0], "cut_off"),
        "paused_requests": len(paused),
        "spliced": sum(1 for row in paused if row["spliced"]),
        "cutoff_by_pause": _by(paused, "pause", "cut_off"),
        "cutoff_by_position": _by(target, "position", "cut_off"),
        "replies_started_early": _rate(target, "reply_started_early"),
        "tool_reached": _rate(paused, "tool_reached"),
        "eot_delay_ms": {k: v for k, v in summary_ms(eot).items() if k in ("median", "p95")},
        "reply_ms": {"median": _median_ms(complete, "reply_s")},
        "complete_requests": len(complete),
        "complete_cutoff_rate": _rate(complete, "cut_off"),
        "complete_unanswered": sum(1 for row in complete if row["eot_s"] is None),
        "complete_tool_reached": _rate(complete, "tool_reached"),
    }
    voices: dict[str, dict[str, float]] = defaultdict(dict)
    for voice, rate in _by(target, "voice", "cut_off").items():
        voices[voice]["false_cutoff_rate"] = rate
    for voice in {row["voice"] for row in complete}:
        voices[voice]["eot_delay_ms_median"] = _median_ms(
            [row for row in complete if row["voice"] == voice], "eot_s"
        )
    backchannel = [r for r in records["backchannel_reply"] if r["valid"]]
    delivered = [r for r in records["backchannel_delivery"] if r["valid"]]
    for voice, rate in _by(backchannel, "voice", "stopped").items():
        voices[voice]["backchannel_replies_stopped"] = rate
    figures["voices"] = dict(sorted(voices.items()))
    figures["backchannel_interruptions"] = {
        "replies": _rate(backchannel, "stopped"),
        "replies_cut": _rate(backchannel, "cut"),
        "replies_tried": len(backchannel),
        "replies_answered": _rate(backchannel, "answered"),
        "deliveries": sum(1 for row in delivered if row["interrupted"]),
        "deliveries_tried": len(delivered),
        "by_word": _by(backchannel, "words", "stopped"),
    }
    noise_replies = [r for r in records["noise_reply"] if r["valid"]]
    noise_deliveries = [r for r in records["noise_delivery"] if r["valid"]]
    figures["noise_interruptions"] = {
        "replies": _rate(noise_replies, "stopped"),
        "replies_tried": len(noise_replies),
        "deliveries": sum(1 for row in noise_deliveries if row["interrupted"]),
        "deliveries_tried": len(noise_deliveries),
    }
    stops = [r for r in records["stop_reply"] if r["valid"]]
    figures["stop_words"] = {
        "replies_stopped": _rate(stops, "stopped"),
        "replies_cut": _rate(stops, "cut"),
        "tried": len(stops),
    }
    return figures
