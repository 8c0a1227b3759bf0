"""The scripted LLM: the offline default brain.

Deterministic rules from configuration, like a good IVR. Each rule matches a phrase or a regex
in the latest user message (or in a framework instruction), and then says a line, calls a tool
with arguments taken from the message, or both. When the tool's result comes back, the rule's
`reply` template turns it into speech.

Templates use `{name}` placeholders: regex named groups, `message` (the matched text),
`last_user` (the latest user message), `result` (the tool output), and `result.field` for a
field of a JSON tool result. Unknown placeholders render empty. Strings nested in a rule's
arguments (a list of plan steps, say) are rendered too.

A caller turn is matched on its words without punctuation first (a recogniser's commas are
not the caller's), so a regex group taken from one holds no punctuation: "heat pumps
for me," is the topic "heat pumps" (a regex that needs the punctuation, as a worker's
prompt may, still matches the text as written). A half request ("could you research", and nothing
more) gets the rule's `ask`, and the caller's next turn is read after it
(`voicehub.agents.scripted_intent`).
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import AsyncIterator, Mapping, Sequence
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
from voicehub.agents.scripted_intent import (
    PROBE,
    continuation,
    filler_cuts,
    previous_user_turn,
    without_punctuation,
)
from voicehub.agents.scripted_matching import compile_rule, match_rule, near_match
from voicehub.agents.scripted_vocabulary import example_requests, rule_vocabulary

__all__ = [
    "ScriptedLLM",
    "ScriptedRule",
    "example_requests",
    "render",
    "render_nested",
    "rule_vocabulary",
]

_PLACEHOLDER = re.compile(r"\{([A-Za-z_][\w.]*)\}")
_RESULT_FIELD = re.compile(r"\{result\.")


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
    ask: str | None = None
    """Said when the caller names the request but not its subject ("could you research"):
    for a rule whose regex takes the subject in a named group; the next turn supplies it."""

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
        if self.ask is not None and (self.regex is None or "(?P<" not in self.regex):
            raise ValueError("`ask` needs a `regex` with a named group (the request's subject)")
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
        self._compiled = [compile_rule(rule) for rule in self.rules]
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
        if on == "instruction":
            found = self._first_match(text, text, on, available, tool_choice)
            values = {"message": text, "last_user": last_user}
            if found is not None:
                return self._chunks(*found, values, tool_choice, len(messages))
            if self.instruction_fallback is not None:
                return [TextDelta(text=render(self.instruction_fallback, values))]
            return [TextDelta(text=self.fallback)]
        # A recognizer's punctuation ("heat pumps for me,") is noise to the rules, and never
        # reaches a tool's arguments or the agent's words.
        plain = without_punctuation(text)
        half = self.half_request(plain, available)
        skip = {half[0]} if half is not None else set()
        found = self._first_match(text, plain, on, available, tool_choice, skip)
        if half is not None and not self._is_request(text, plain, available, skip):
            ask = self.rules[half[0]].ask
            if ask is not None:
                return [TextDelta(text=render(ask, {"message": text, "last_user": last_user}))]
        previous = previous_user_turn(messages)
        if previous is not None and (found is None or self._only_asks(found[0])):
            # only words no rule takes on their own ("hi" or "never mind" are not subjects),
            # or that a rule would only ask about: "could you research" earlier, "heat
            # pumps" now is one request, not a topic to ask what to do with
            pending = self.half_request(without_punctuation(previous), available)
            if pending is not None:
                combined = f"{pending[1]} {continuation(plain)}"
                groups = match_rule(self._compiled[pending[0]], self.rules[pending[0]], combined)
                if groups is not None:
                    found, plain = (pending[0], groups), combined
        if found is None:
            return [TextDelta(text=self.fallback)]
        index, groups = found
        values = {"message": text, "last_user": last_user}
        return self._chunks(index, groups, values, tool_choice, len(messages))

    def _only_asks(self, index: int) -> bool:
        """Whether rule `index` takes any words (a catch-all) or only asks the caller what
        they want done (its tool is `ask_user`): a pending half request says it."""
        rule = self.rules[index]
        return "*" in rule.match or rule.tool == "ask_user"

    def half_request(self, plain: str, available: set[str]) -> tuple[int, str] | None:
        """The rule a caller turn saying `plain` (no punctuation) asks for without saying
        what about ("could you research um"), and its words without the trailing fillers
        ("could you research"); None for anything else (`voicehub.agents.scripted_intent`).
        Only rules with a named group whose tool is offered count."""
        for index, rule in enumerate(self.rules):
            if rule.on != "user" or rule.regex is None or "(?P<" not in rule.regex:
                continue
            if rule.tool is not None and rule.tool not in available:
                continue
            pattern = self._compiled[index][0]
            for cut in filler_cuts(plain):
                if pattern.search(cut) is not None:
                    continue
                probed = pattern.search(f"{cut} {PROBE}")
                if probed is not None and any(
                    PROBE in (value or "") for value in probed.groupdict().values()
                ):
                    return index, cut
        return None

    def awaits_more(self, text: str) -> bool:
        """Whether a caller turn saying `text` is a half request that waits for its
        subject ("could you research", `half_request`) and no request of its own ("any
        news on my research" is one), with every rule's tool offered: the turn policy
        waits on it (`voicehub.voice.turns.words.ends_open`)."""
        offered = {rule.tool for rule in self.rules if rule.tool is not None}
        plain = without_punctuation(text)
        half = self.half_request(plain, offered)
        if half is None:
            return False
        return not self._is_request(plain, plain, offered, {half[0]})

    def takes(self, text: str) -> bool:
        """Whether a rule of its own answers a caller turn saying `text` as it was heard:
        matched exactly (no tolerant pass), a catch-all ("*") not counting. The turn policy
        asks this to tell words that make a whole request (`voicehub.voice.turns.words.
        makes_request`)."""
        plain = without_punctuation(text)
        for index, rule in enumerate(self.rules):
            if rule.on != "user" or "*" in rule.match:
                continue
            if match_rule(self._compiled[index], rule, plain) is not None:
                return True
        return False

    def _is_request(self, text: str, plain: str, available: set[str], skip: set[int]) -> bool:
        """Whether a rule calling an offered tool (not a catch-all) matches the turn."""
        others = {
            index
            for index, rule in enumerate(self.rules)
            if rule.tool is None or rule.tool not in available or "*" in rule.match
        }
        return self._first_match(text, plain, "user", available, "auto", skip | others) is not None

    def _first_match(
        self,
        text: str,
        plain: str,
        on: str,
        available: set[str],
        tool_choice: ToolChoice,
        skip: set[int] | None = None,
    ) -> tuple[int, dict[str, str]] | None:
        """The first rule matching `text` (a caller turn: `plain`, its words without
        punctuation, first), and its groups; for a caller turn nothing matched, a second,
        tolerant pass: speech recognition often gets one word of a trigger phrase wrong
        ("how was it going")."""
        passes = [(i, r, False) for i, r in enumerate(self.rules)]
        passes += [(i, r, True) for i, r in enumerate(self.rules) if on == "user"]
        for index, rule, tolerant in passes:
            if rule.on != on or (skip and index in skip):
                continue
            if tolerant:
                groups = near_match(rule, self._compiled[index], plain)
            else:
                groups = match_rule(self._compiled[index], rule, plain)
                if groups is None and plain != text:
                    groups = match_rule(self._compiled[index], rule, text)
            if groups is None:
                continue
            wants_tool = rule.tool is not None and tool_choice != "none"
            if wants_tool and tool_choice not in ("auto", "required", rule.tool):
                continue
            if wants_tool and rule.tool not in available:
                continue  # the tool is not offered to this agent right now
            if rule.say is None and not wants_tool:
                continue  # nothing to say, and its tool not wanted
            return index, groups
        return None

    def _chunks(
        self,
        index: int,
        groups: dict[str, str],
        values: dict[str, Any],
        tool_choice: ToolChoice,
        length: int,
    ) -> list[LLMChunk]:
        rule = self.rules[index]
        values = {**groups, **values}
        chunks: list[LLMChunk] = []
        if rule.say is not None:
            chunks.append(TextDelta(text=render(rule.say, values)))
        if rule.tool is not None and tool_choice != "none":
            arguments = render_nested(rule.arguments, values)
            # The id depends only on the input (determinism) and the conversation length
            # (unique within a conversation); the rule index lets the reply find its rule.
            call = ToolCall(
                id=f"call_{index}_{length}", name=rule.tool, arguments=json.dumps(arguments)
            )
            chunks.append(ToolCallChunk(call=call))
        return chunks

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
        if "result_data" not in values and _RESULT_FIELD.search(template):
            # fields of an answer that is not JSON (a tool's error, an MCP server's on_error
            # text): the answer itself, not a reply with holes in it
            template = "{result}"
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


def render_nested(value: Any, values: Mapping[str, Any]) -> Any:
    """`value` with every string inside it rendered (tables and lists too: a plan's steps)."""
    if isinstance(value, str):
        return render(value, values)
    if isinstance(value, Mapping):
        return {key: render_nested(item, values) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [render_nested(item, values) for item in value]
    return value


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
