"""The optional judge: a rubric answered by an OpenAI-compatible model over the call's
timeline (what the caller said, what the agent said, its tools, tasks and deliveries).

Configured by the environment; without a model it is skipped with a note saying what to set:

    VOICEHUB_JUDGE_MODEL      the model name (required to judge)
    VOICEHUB_JUDGE_BASE_URL   an OpenAI-compatible server (default: the openai SDK's)
    VOICEHUB_JUDGE_API_KEY    its key (default: OPENAI_API_KEY; "none" for a local server)

The model answers JSON `{"pass": true|false, "reason": "..."}`; an answer that is not such
JSON fails the scenario, naming what came back.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass

from voicehub.client.report import format_timeline
from voicehub.scenarios.runner import ScenarioRun
from voicehub.voice.providers import vendor_import

__all__ = ["JudgeSettings", "Verdict", "judge", "judge_from_env"]

SKIPPED_NOTE = (
    "judge skipped: no model set (VOICEHUB_JUDGE_MODEL, and VOICEHUB_JUDGE_BASE_URL for a "
    "local OpenAI-compatible server)"
)
_INSTRUCTIONS = (
    "You judge a recorded phone call between a caller and a voice agent against a rubric. "
    "Read the call's timeline and decide whether the agent met the rubric. Answer with JSON "
    'only: {"pass": true or false, "reason": "one sentence"}.'
)


@dataclass(frozen=True)
class JudgeSettings:
    model: str
    base_url: str | None = None
    api_key: str | None = None


@dataclass(frozen=True)
class Verdict:
    passed: bool
    reason: str


def judge_from_env(environ: Mapping[str, str] | None = None) -> JudgeSettings | None:
    env = os.environ if environ is None else environ
    model = env.get("VOICEHUB_JUDGE_MODEL", "").strip()
    if not model:
        return None
    return JudgeSettings(
        model=model,
        base_url=env.get("VOICEHUB_JUDGE_BASE_URL") or None,
        api_key=env.get("VOICEHUB_JUDGE_API_KEY") or env.get("OPENAI_API_KEY") or "none",
    )


def transcript(run: ScenarioRun) -> str:
    """The scenario's calls as the judge reads them."""
    parts = []
    for number, report in enumerate(run.reports, start=1):
        parts.append(f"--- call {number} ---\n{format_timeline(report)}")
    return "\n".join(parts)


async def judge(run: ScenarioRun, rubric: str, settings: JudgeSettings) -> Verdict:
    with vendor_import("openai", "openai"):
        from openai import AsyncOpenAI

    client = AsyncOpenAI(api_key=settings.api_key, base_url=settings.base_url, max_retries=1)
    try:
        answer = await client.chat.completions.create(
            model=settings.model,
            messages=[
                {"role": "system", "content": _INSTRUCTIONS},
                {"role": "user", "content": f"Rubric: {rubric}\n\nTimeline:\n{transcript(run)}"},
            ],
        )
    finally:
        await client.close()
    text = (answer.choices[0].message.content or "").strip() if answer.choices else ""
    return _verdict(text)


def _verdict(text: str) -> Verdict:
    found = re.search(r"\{.*\}", text, re.DOTALL)
    try:
        parsed = json.loads(found.group(0)) if found else None
    except ValueError:
        parsed = None
    if not isinstance(parsed, dict) or not isinstance(parsed.get("pass"), bool):
        return Verdict(False, f"the judge did not answer JSON with a 'pass': {text[:200]!r}")
    return Verdict(bool(parsed["pass"]), str(parsed.get("reason", "")))
