"""ask_user: an agent asks the person in the room one or more questions and waits.

Questions are typed (freeform, yes-no, confirm, single-select, multi-select), may have options
and a default (used when the person skips, does not answer in time, or is not understood after
a few tries), may `store` their answer under a key that later questions test with `show_if`
("key == value"), and may end the interview early with `finish_if`. The tool answers with the
answers as JSON.

How a question reaches the person is an `Asker`: one small method, so a text room and a voice
call can both serve it. `TextAsker` posts the question as the agent's message and takes the
next user message in the room as the answer, without letting that message start another agent
reply. A voice session implements `Asker` by speaking the question and returning the next final
transcript.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, model_validator

from voicehub.agents.tools import Tool, ToolContext
from voicehub.core.events import ChannelType, Event, EventKind
from voicehub.core.hooks import Hook, HookContext, HookExecution, HookTrigger
from voicehub.errors import ToolError
from voicehub.orchestration.answers import AnswerValue, QuestionType, parse_answer, same_answer

if TYPE_CHECKING:
    from voicehub.core.room import Room
    from voicehub.orchestration.runtime import OrchestrationRuntime

ANSWER_ROUTE = "ask_user answer"
"""`_routed_to` of a message taken as an answer. Agent ids never contain spaces, so no agent
answers the message itself."""

ANSWER_HOOK_PRIORITY = 1000
"""The interception runs after routing and user hooks, so its stamp is the final word."""

AnswerStatus = Literal["answered", "default", "skipped", "not_shown", "not_asked"]
_CONDITION = re.compile(r"^\s*([\w.-]+)\s*(==|!=)\s*(.*?)\s*$")


class Asker(Protocol):
    """Puts one question to the person in a room and returns the reply, or None when they
    skipped it or did not answer in time."""

    async def ask(self, room_id: str, text: str, *, again: str = "") -> str | None:
        """Present `text` in `room_id`; the reply as said or typed, or None. `again` is the
        question alone (without the interview's preamble), what a reminder repeats ('':
        `text`)."""
        ...


class Option(BaseModel):
    """A choice of a select question."""

    model_config = ConfigDict(extra="forbid")

    label: str = Field(min_length=1)
    description: str = ""


class Question(BaseModel):
    """One question. `default` is used on skip, timeout or when the reply is not understood."""

    model_config = ConfigDict(extra="forbid")

    question: str = Field(min_length=1)
    type: QuestionType = "freeform"
    options: list[Option] = Field(default_factory=list)
    default: str | None = None
    header: str = ""
    store: str | None = Field(default=None, description="key to store the answer under")
    show_if: str | None = Field(default=None, description='only ask when "key == value"')
    finish_if: str | None = Field(default=None, description="stop asking on this answer")

    @model_validator(mode="after")
    def _check(self) -> Question:
        selects = self.type in ("single-select", "multi-select")
        if selects and not self.options:
            raise ValueError(f"a {self.type} question needs options")
        if not selects and self.options:
            raise ValueError(f"options are only for select questions, not {self.type}")
        if self.show_if is not None:
            Condition.parse(self.show_if)
        typed_default = self.default is not None and self.type != "freeform"
        if typed_default and self.default_value() is None:
            raise ValueError(f"default {self.default!r} is not a valid {self.type} answer")
        return self

    @property
    def labels(self) -> list[str]:
        """The option labels, in order."""
        return [option.label for option in self.options]

    def default_value(self) -> AnswerValue:
        """The default as an answer ("yes", a label, labels), or None when there is none."""
        if self.default is None:
            return None
        parsed = parse_answer(self.type, self.labels, self.default)
        return None if parsed is None or parsed.skipped else parsed.value


@dataclass(frozen=True)
class Condition:
    """`key == value` or `key != value`, tested against stored answers."""

    key: str
    negated: bool
    value: str

    @classmethod
    def parse(cls, text: str) -> Condition:
        """Read `key == value` / `key != value` (quotes around the value are dropped)."""
        found = _CONDITION.match(text)
        if found is None:
            raise ValueError(f'condition {text!r} must look like "key == value" or "key != value"')
        key, operator, value = found.groups()
        return cls(key, operator == "!=", value.strip("'\""))

    def holds(self, stored: dict[str, AnswerValue]) -> bool:
        """Whether the condition is true for the answers stored so far (a missing key
        equals nothing)."""
        equal = same_answer(stored.get(self.key), self.value)
        return not equal if self.negated else equal


class AnswerRecord(BaseModel):
    """How one question went."""

    question: str
    type: QuestionType
    answer: AnswerValue = None
    status: AnswerStatus
    store: str | None = None


class Interview(BaseModel):
    """All the answers; `stored` maps `store` keys to answers."""

    answers: list[AnswerRecord]
    stored: dict[str, AnswerValue] = Field(default_factory=dict)
    finished_early: bool = False


def render_question(question: Question, *, preamble: str = "", retry: bool = False) -> str:
    """The question as text a person reads or hears, with its options and how to answer."""
    lines = [preamble.strip()] if preamble.strip() else []
    if retry:
        lines.append("Sorry, I didn't catch that.")
    head = f"{question.header}: " if question.header else ""
    lines.append(head + question.question)
    for number, option in enumerate(question.options, 1):
        about = f" - {option.description}" if option.description else ""
        lines.append(f"{number}. {option.label}{about}")
    hint = {
        "yes-no": "Please answer yes or no.",
        "confirm": "Please say yes to confirm or no to cancel.",
        "single-select": "Please say the option or its number.",
        "multi-select": 'Please say one or more options, like "1 and 3", or "all" or "none".',
        "freeform": "",
    }[question.type]
    if retry and hint:
        lines.append(hint)
    return "\n".join(lines)


async def run_interview(
    asker: Asker,
    room_id: str,
    questions: list[Question],
    preamble: str = "",
    *,
    max_reasks: int = 2,
) -> Interview:
    """Ask `questions` in order through `asker` and gather the answers.

    A reply that is not understood is asked again with a hint, at most `max_reasks` times;
    then, as on skip or timeout, the default is used (or the question counts as skipped).
    """
    stored: dict[str, AnswerValue] = {}
    records: list[AnswerRecord] = []
    finished = False
    intro = preamble
    for question in questions:
        status: AnswerStatus
        value: AnswerValue = None
        if finished:
            status = "not_asked"
        elif question.show_if is not None and not Condition.parse(question.show_if).holds(stored):
            status = "not_shown"
        else:
            value, status = await _ask_one(asker, room_id, question, intro, max_reasks)
            intro = ""  # the preamble goes with the first question asked
            if question.store and value is not None:
                stored[question.store] = value
            if question.finish_if is not None and same_answer(value, question.finish_if):
                finished = True
        records.append(
            AnswerRecord(
                question=question.question,
                type=question.type,
                answer=value,
                status=status,
                store=question.store,
            )
        )
    return Interview(answers=records, stored=stored, finished_early=finished)


async def _ask_one(
    asker: Asker, room_id: str, question: Question, preamble: str, max_reasks: int
) -> tuple[AnswerValue, AnswerStatus]:
    text = render_question(question, preamble=preamble)
    again = render_question(question)
    for _ in range(max_reasks + 1):
        reply = await asker.ask(room_id, text, again=again)
        if reply is None:
            break  # skipped or timed out: the person is not there to ask again
        parsed = parse_answer(question.type, question.labels, reply)
        if parsed is None:
            text = render_question(question, retry=True)
            continue
        if parsed.skipped:
            break
        return parsed.value, "answered"
    default = question.default_value() if question.type != "freeform" else question.default
    return (default, "default") if default is not None else (None, "skipped")


def ask_user_tool(asker: Asker, *, max_reasks: int = 2) -> Tool:
    """The `ask_user(questions, preamble)` tool, asking through `asker`."""

    async def ask_user(questions: list[Question], context: ToolContext, preamble: str = "") -> str:
        """Ask the user one or more questions and wait for the answers (JSON). Use it when
        you need a clarification or a decision only the user can make. Types: freeform,
        yes-no, confirm, single-select, multi-select (give options with a label each)."""
        if not questions:
            raise ToolError("questions is empty: give at least one question")
        if not context.room_id:
            raise ToolError("ask_user needs a room; it was called outside one")
        result = await run_interview(
            asker, context.room_id, questions, preamble, max_reasks=max_reasks
        )
        return json.dumps(result.model_dump(mode="json"))

    return Tool(ask_user)


# -- asking in a text room ---------------------------------------------------------------------


@dataclass(eq=False)
class _Waiting:
    future: asyncio.Future[str | None]
    question_id: str = ""


@dataclass
class _RoomWaits:
    queue: deque[_Waiting] = field(default_factory=deque)
    hooks: list[Hook] = field(default_factory=list)


class TextAsker:
    """Asks in a text room: posts the question as `agent_id`'s message, waits (up to `timeout`
    seconds on the hub clock; None waits for ever) for the next user message and returns it.

    The answer is taken by a BEFORE_BROADCAST SYNC hook, installed only while a question is
    open. It stamps the message `_routed_to=ANSWER_ROUTE` (so no agent answers it) and
    `_answer_to=<question event id>`; the message is still recorded in the room. Several open
    questions in one room are answered in the order they were asked. Subclasses may override
    `present` to deliver the question another way.
    """

    def __init__(
        self,
        hub: OrchestrationRuntime,
        *,
        agent_id: str = "assistant",
        timeout: float | None = 300.0,
    ):
        self.hub = hub
        self.agent_id = agent_id
        self.timeout = timeout
        self._rooms: dict[str, _RoomWaits] = {}

    def waiting(self, room_id: str) -> bool:
        """Whether a question is open in `room_id`."""
        return room_id in self._rooms

    async def ask(self, room_id: str, text: str, *, again: str = "") -> str | None:
        """Post `text` and wait for the next user message (None on timeout or room close).
        `again` is for askers that remind (a text room does not)."""
        room = self.hub.rooms.get(room_id)
        if room is None or not room.is_open:
            return None  # the conversation ended: nobody is there to answer
        waiting = _Waiting(asyncio.get_running_loop().create_future())
        self._open(room_id, waiting)
        try:
            question = await self.present(room, text)
            if question is None:
                return None  # a hook blocked the question: nobody saw it
            waiting.question_id = question.id
            return await self._wait(waiting.future)
        finally:
            self._close(room_id, waiting)

    async def present(self, room: Room, text: str) -> Event | None:
        """Show the question: post it as the agent's message (returns the stored event)."""
        return await room.post(
            Event(
                kind=EventKind.MESSAGE,
                text=text,
                source=self.agent_id,
                role="assistant",
                source_type=ChannelType.AGENT,
                metadata={"ask_user": True},
            )
        )

    async def _wait(self, answer: asyncio.Future[str | None]) -> str | None:
        if self.timeout is None:
            return await answer
        timer: asyncio.Future[None] = asyncio.ensure_future(self.hub.clock.sleep(self.timeout))
        waits: set[asyncio.Future[Any]] = {answer, timer}
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            timer.cancel()
        return answer.result() if answer.done() else None

    def _open(self, room_id: str, waiting: _Waiting) -> None:
        waits = self._rooms.setdefault(room_id, _RoomWaits())
        waits.queue.append(waiting)
        if not waits.hooks:
            hooks = self.hub.hooks
            waits.hooks = [
                hooks.add(
                    HookTrigger.BEFORE_BROADCAST,
                    self._take_answer,
                    execution=HookExecution.SYNC,
                    priority=ANSWER_HOOK_PRIORITY,
                    room_id=room_id,
                    name="ask_user_answer",
                ),
                hooks.add(
                    HookTrigger.ON_ROOM_CLOSED,
                    self._room_closed,
                    execution=HookExecution.SYNC,
                    room_id=room_id,
                    name="ask_user_room_closed",
                ),
            ]

    def _close(self, room_id: str, waiting: _Waiting) -> None:
        waits = self._rooms.get(room_id)
        if waits is None:
            return
        if waiting in waits.queue:
            waits.queue.remove(waiting)
        if not waits.queue:
            for hook in waits.hooks:
                self.hub.hooks.remove(hook)
            del self._rooms[room_id]

    async def _room_closed(self, event: Event, context: HookContext) -> None:
        # Open questions end unanswered (as on a timeout) instead of waiting for ever.
        waits = self._rooms.get(context.room_id)
        for waiting in waits.queue if waits else ():
            if not waiting.future.done():
                waiting.future.set_result(None)

    async def _take_answer(self, event: Event, context: HookContext) -> Event | None:
        if not _is_user_reply(event):
            return None
        waits = self._rooms.get(context.room_id)
        waiting = next((w for w in waits.queue if not w.future.done()), None) if waits else None
        if waiting is None:
            return None
        waiting.future.set_result(event.text)
        stamp: dict[str, Any] = {
            "_routed_to": ANSWER_ROUTE,
            "_always_process": [],
            "_answer_to": waiting.question_id,
        }
        return event.with_metadata(**stamp)


def _is_user_reply(event: Event) -> bool:
    return (
        event.kind in (EventKind.MESSAGE, EventKind.TRANSCRIPT)
        and event.role == "user"
        and not event.from_agent
        and not event.metadata.get("partial")
    )
