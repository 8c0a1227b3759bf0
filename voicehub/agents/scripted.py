"""The scripted LLM: the offline default brain.

Deterministic rules from configuration, like a good IVR. Each rule matches a phrase or a regex
in the latest user message (or in a framework instruction), and then says a line, calls a tool
with arguments taken from the message, or both. When the tool's result comes back, the rule's
`reply` template turns it into speech.

Templates use `{name}` placeholders: regex named groups, `message` (the matched text),
`last_user` (the latest user message), `result` (the tool output), and `result.field` for a
field of a JSON tool result. Unknown placeholders render empty. Strings nested in a rule's
arguments (a list of plan steps, say) are rendered too.
"""

from __future__ import annotations

import contextlib
import difflib
import json
import re
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from voicehub.agents.llm import (
    ChatMessage,
    LLMChunk,
    TextDelta,
    ToolCall,
    ToolCallChunk,
    ToolChoice,
    ToolSpec,
)
from voicehub.agents.scripted_vocabulary import example_requests, rule_vocabulary
from voicehub.core.phonetics import sounds_alike

__all__ = [
    "ScriptedLLM",
    "ScriptedRule",
    "example_requests",
    "render",
    "render_nested",
    "rule_vocabulary",
]

_PLACEHOLDER = re.compile(r"\{([A-Za-z_][\w.]*)\}")


class ScriptedRule(BaseModel):
    """One rule. At least one of `match`/`regex` and one of `say`/`tool` must be set
    (`match=["*"]` matches anything)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    match: tuple[str, ...] = ()
    regex: str | None = None
    on: Literal["user", "instruction"] = "user"
    say: str | None = None
    tool: str | None = None
    arguments: dict[str, Any] = Field(default_factory=dict)
    reply: str | None = None

    @model_validator(mode="after")
    def _check(self) -> ScriptedRule:
        if not self.match and self.regex is None:
            raise ValueError("a rule needs `match` phrases or a `regex`")
        if self.say is None and self.tool is None:
            raise ValueError("a rule needs `say` or `tool`")
        if self.regex is not None:
            try:
                re.compile(self.regex)
            except re.error as exc:
                raise ValueError(f"regex {self.regex!r} is invalid: {exc}") from None
        return self


class ScriptedLLM:
    """An `LLM` driven by `ScriptedRule`s. Identical input gives identical output."""

    def __init__(
        self,
        rules: Sequence[ScriptedRule | Mapping[str, Any]] = (),
        *,
        fallback: str = "Sorry, I can't help with that yet.",
        instruction_fallback: str | None = None,
    ) -> None:
        self.rules = [
            r if isinstance(r, ScriptedRule) else ScriptedRule.model_validate(r) for r in rules
        ]
        self._compiled = [_compile(rule) for rule in self.rules]
        self.fallback = fallback
        self.instruction_fallback = instruction_fallback

    async def stream(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolSpec] = (),
        *,
        tool_choice: ToolChoice = "auto",
    ) -> AsyncIterator[LLMChunk]:
        for chunk in self.respond(messages, tools, tool_choice=tool_choice):
            yield chunk

    def respond(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolSpec] = (),
        *,
        tool_choice: ToolChoice = "auto",
    ) -> list[LLMChunk]:
        """The whole turn at once (the streaming API wraps this)."""
        if not messages:
            return [TextDelta(text=self.fallback)]
        last = messages[-1]
        if last.role == "tool":
            return self._after_tool(messages)
        last_user = next((m.content for m in reversed(messages) if m.role == "user"), "")
        on = "instruction" if last.role == "system" else "user"
        text = last.content if last.role in ("system", "user") else last_user
        available = {spec.name for spec in tools}
        # A recognizer's punctuation between words ("find out about, wind turbines") is
        # noise to the rules: a caller turn also matches without it. A second, tolerant
        # pass for a caller turn nothing matched: speech recognition often gets one word
        # of a trigger phrase wrong ("how was it going").
        plain = _without_punctuation(text) if on == "user" else text
        passes = [(i, r, False) for i, r in enumerate(self.rules)]
        passes += [(i, r, True) for i, r in enumerate(self.rules) if on == "user"]
        for index, rule, tolerant in passes:
            if rule.on != on:
                continue
            if tolerant:
                groups = _near_match(rule, self._compiled[index], plain)
            else:
                groups = _match(self._compiled[index], rule, text)
                if groups is None and plain != text:
                    groups = _match(self._compiled[index], rule, plain)
            if groups is None:
                continue
            wants_tool = rule.tool is not None and tool_choice != "none"
            if wants_tool and tool_choice not in ("auto", "required", rule.tool):
                continue
            if wants_tool and rule.tool not in available:
                continue  # the tool is not offered to this agent right now
            values = {**groups, "message": text, "last_user": last_user}
            chunks: list[LLMChunk] = []
            if rule.say is not None:
                chunks.append(TextDelta(text=render(rule.say, values)))
            if wants_tool and rule.tool is not None:
                arguments = render_nested(rule.arguments, values)
                # The id depends only on the input (determinism) and the conversation length
                # (unique within a conversation); the rule index lets the reply find its rule.
                call = ToolCall(
                    id=f"call_{index}_{len(messages)}",
                    name=rule.tool,
                    arguments=json.dumps(arguments),
                )
                chunks.append(ToolCallChunk(call=call))
            if chunks:
                return chunks
        if on == "instruction" and self.instruction_fallback is not None:
            return [
                TextDelta(
                    text=render(
                        self.instruction_fallback, {"message": text, "last_user": last_user}
                    )
                )
            ]
        return [TextDelta(text=self.fallback)]

    def calls_tool(self, text: str) -> bool:
        """Whether a caller turn saying `text` makes a rule call a tool (any tool a rule
        names), tolerant matching included. A speech recognizer asks this to tell a
        request it heard from one it may have misheard (`WhisperRecognizer`)."""
        offered = [ToolSpec(name=rule.tool) for rule in self.rules if rule.tool is not None]
        chunks = self.respond([ChatMessage(role="user", content=text)], offered)
        return any(isinstance(chunk, ToolCallChunk) for chunk in chunks)

    def tool_arguments(self, text: str) -> str:
        """The string values of the arguments of the tool call a caller turn saying `text`
        makes (as `calls_tool`), joined by spaces: what the request is about ("" for no
        tool call, or one without arguments). A speech recognizer asks this to tell a
        request about something the desk knows from one about something it may have
        misheard (`Relisten`)."""
        offered = [ToolSpec(name=rule.tool) for rule in self.rules if rule.tool is not None]
        chunks = self.respond([ChatMessage(role="user", content=text)], offered)
        calls = [chunk.call for chunk in chunks if isinstance(chunk, ToolCallChunk)]
        if not calls:
            return ""
        values = json.loads(calls[0].arguments).values()
        return " ".join(_strings(value) for value in values).strip()

    def _after_tool(self, messages: Sequence[ChatMessage]) -> list[LLMChunk]:
        results: list[str] = []
        for message in reversed(messages):
            if message.role != "tool":
                break
            results.append(message.content)
        results.reverse()
        asking = messages[-len(results) - 1] if len(messages) > len(results) else None
        rule = self._rule_of(asking)
        last_user = next((m.content for m in reversed(messages) if m.role == "user"), "")
        result = " ".join(results)
        values: dict[str, Any] = {"result": result, "last_user": last_user, "message": last_user}
        if _may_be_json(result):  # a failed parse raises: about 10 us on every plain result
            with contextlib.suppress(json.JSONDecodeError):
                values["result_data"] = json.loads(result)
        template = rule.reply if rule is not None and rule.reply is not None else "{result}"
        return [TextDelta(text=render(template, values))]

    def _rule_of(self, message: ChatMessage | None) -> ScriptedRule | None:
        if message is None or not message.tool_calls:
            return None
        parts = message.tool_calls[0].id.split("_")
        if len(parts) == 3 and parts[0] == "call" and parts[1].isdigit():
            index = int(parts[1])
            if index < len(self.rules):
                return self.rules[index]
        return None


def _strings(value: Any) -> str:
    """Every string inside `value` (a rendered argument), joined by spaces."""
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        return " ".join(_strings(item) for item in value.values())
    if isinstance(value, list):
        return " ".join(_strings(item) for item in value)
    return ""


_JSON_STARTS = frozenset('{["-0123456789')


def _may_be_json(text: str) -> bool:
    """False when `json.loads(text)` must fail: JSON text starts (after white space) with an
    object, array, string, number or a literal (true, false, null)."""
    stripped = text.lstrip(" \t\n\r")
    if not stripped:
        return False
    return stripped[0] in _JSON_STARTS or stripped.startswith(("true", "false", "null"))


def _compile(rule: ScriptedRule) -> list[re.Pattern[str]]:
    patterns = [re.compile(rule.regex, re.IGNORECASE | re.DOTALL)] if rule.regex else []
    for phrase in rule.match:
        if phrase == "*":
            patterns.append(re.compile(r"(?s).*"))
        else:
            patterns.append(re.compile(r"\b" + re.escape(phrase) + r"\b", re.IGNORECASE))
    return patterns


def _match(patterns: list[re.Pattern[str]], rule: ScriptedRule, text: str) -> dict[str, str] | None:
    for pattern in patterns:
        found = pattern.search(text)
        if found is not None:
            return {k: (v or "").strip() for k, v in found.groupdict().items()}
    return None


_PUNCTUATION = re.compile(r"[,;:!?\"]+|\.(?!\d)|(?<!\w)'|'(?!\w)")


def _without_punctuation(text: str) -> str:
    """`text` with punctuation between words turned into spaces (apostrophes inside words
    and decimal points stay): "Please find out about, wind turbines." -> "Please find out
    about wind turbines"."""
    return " ".join(_PUNCTUATION.sub(" ", text).split())


def render_nested(value: Any, values: Mapping[str, Any]) -> Any:
    """`value` with every string inside it rendered (tables and lists too: a plan's steps)."""
    if isinstance(value, str):
        return render(value, values)
    if isinstance(value, Mapping):
        return {key: render_nested(item, values) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [render_nested(item, values) for item in value]
    return value


def _near_match(
    rule: ScriptedRule, pattern: list[re.Pattern[str]], text: str
) -> dict[str, str] | None:
    """Groups of `rule` when `text` says one of its trigger phrases with one slip of the
    recognizer (`_slips`). A `match` rule then matches; a `regex` rule matches the text with
    the phrase put right (its alternatives are its phrases), so its groups still take the
    words after it."""
    words = re.findall(r"[\w']+", text)
    lowered = [word.lower() for word in words]
    phrases = rule_vocabulary([rule]) if rule.regex is not None else list(rule.match)
    for phrase in phrases:
        wanted = re.findall(r"[\w']+", phrase.lower())
        if len(wanted) < 2:
            continue  # one word is too little to guess from
        for start, end in _slips(lowered, wanted):
            if rule.regex is None:
                return {}
            repaired = " ".join(words[:start] + wanted + words[end:])
            groups = _match(pattern, rule, repaired)
            if groups is not None:
                return groups
    return None


def _slips(heard: list[str], wanted: list[str]) -> Iterator[tuple[int, int]]:
    """Spans `heard[start:end]` that say `wanted` with one slip a recognizer makes:
    - one word wrong: an inner or last word of a phrase of three or more words; its first
      word only when spelled or sounding alike (`_alike`, `sounds_alike`: "write up on" for
      "read up on"; a phrase is known by its start: "is it going to rain" is not "how's it
      going" misheard, IS against HS); a word of a two-word phrase only when spelled alike
      ("did into" for "dig into"; "any nose" is not taken for "any news");
    - an inner word of a phrase of three or more words dropped ("read on" for "read up on");
    - words split or joined ("in to" for "into", "nevermind" for "never mind")."""
    size = len(wanted)
    joined = "".join(wanted)
    inner_dropped = [wanted[:i] + wanted[i + 1 :] for i in range(1, size - 1)]
    for start in range(len(heard)):
        # Split or joined first: the words are all there ("in to" is not "in" misheard).
        for length in (size - 1, size + 1):
            span = heard[start : start + length]
            if length > 0 and len(span) == length and "".join(span) == joined:
                yield start, start + length
        window = heard[start : start + size]
        if len(window) == size:
            wrong = [(a, b) for a, b in zip(window, wanted, strict=True) if a != b]
            if len(wrong) == 1 and _slip_allowed(window[0], *wrong[0], wanted):
                yield start, start + size
        if heard[start : start + size - 1] in inner_dropped:
            yield start, start + size - 1


def _slip_allowed(first: str, heard: str, meant: str, wanted: list[str]) -> bool:
    """Whether `heard`, said for `meant` in a span starting with `first`, is a slip of the
    recognizer in phrase `wanted` (`_slips`)."""
    if len(wanted) == 2:
        return _alike(heard, meant)
    return first == wanted[0] or _alike(heard, meant) or sounds_alike(heard, meant)


def _alike(heard: str, meant: str) -> bool:
    """Words a recognizer confuses: same first letter, mostly the same letters ("did" and
    "dig"; not "nose" and "news", nor "get" and "forget"). Not "if" for "is", though a phone
    line blurs s and f: "what if it rains" would then be a question for the knowledge base
    (the phone bench's unrelated utterances). A heard word of one or two letters is too
    little to go on: "what a lovely day", heard "what I lovely day", is not "what is", nor
    "I'll dig in the paper" "dig into" (both false triggers on the phone bench)."""
    return (
        len(heard) >= 3
        and heard[:1] == meant[:1]
        and difflib.SequenceMatcher(None, heard, meant).ratio() >= 0.6
    )


def render(template: str, values: Mapping[str, Any]) -> str:
    """Fill `{name}` and `{name.field}` placeholders; unknown names render empty."""

    def lookup(found: re.Match[str]) -> str:
        head, *path = found.group(1).split(".")
        value: Any = values.get(head)
        if path and head == "result":
            value = values.get("result_data")
        for key in path:
            value = value.get(key) if isinstance(value, Mapping) else None
        if value is None:
            return ""
        return value if isinstance(value, str) else json.dumps(value)

    return _PLACEHOLDER.sub(lookup, template)
