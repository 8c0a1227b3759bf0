"""The scripted LLM: rules, templates, tool calls, fallbacks and determinism."""

from __future__ import annotations

import json
from collections.abc import Sequence

import pytest
from pydantic import ValidationError

from voicehub.agents.llm import (
    ChatMessage,
    LLMChunk,
    TextDelta,
    ToolCall,
    ToolCallChunk,
    ToolSpec,
    complete,
)
from voicehub.agents.scripted import (
    ScriptedLLM,
    ScriptedRule,
    example_requests,
    render,
    rule_vocabulary,
)

BOOK = ToolSpec(name="book_table")
LOOKUP = ToolSpec(name="lookup_order")


def user(text: str) -> ChatMessage:
    return ChatMessage(role="user", content=text)


def texts(chunks: Sequence[LLMChunk]) -> list[str]:
    return [c.text for c in chunks if isinstance(c, TextDelta)]


def calls(chunks: Sequence[LLMChunk]) -> list[ToolCall]:
    return [c.call for c in chunks if isinstance(c, ToolCallChunk)]


def after_tool(llm: ScriptedLLM, question: str, result: str, tools: Sequence[ToolSpec]) -> str:
    """Ask, run the tool call the model made (with `result`), and return its answer."""
    first = llm.respond([user(question)], tools)
    (call,) = calls(first)
    messages = [
        user(question),
        ChatMessage(role="assistant", content="".join(texts(first)), tool_calls=(call,)),
        ChatMessage(role="tool", content=result, tool_call_id=call.id, name=call.name),
    ]
    return "".join(texts(llm.respond(messages, tools)))


async def test_phrase_match_says_a_line() -> None:
    llm = ScriptedLLM([{"match": ["opening hours", "open"], "say": "We open at nine."}])
    turn = await complete(llm, [user("When are you OPEN tomorrow?")])
    assert turn.text == "We open at nine."
    assert turn.tool_calls == []


async def test_phrases_match_whole_words_only() -> None:
    llm = ScriptedLLM([{"match": ["hi"], "say": "Hello!"}], fallback="?")
    assert texts(llm.respond([user("hi there")])) == ["Hello!"]
    assert texts(llm.respond([user("this is it")])) == ["?"]


def test_first_matching_rule_wins() -> None:
    llm = ScriptedLLM(
        [
            {"match": ["refund"], "say": "Refunds take five days."},
            {"match": ["*"], "say": "Anything else?"},
        ]
    )
    assert texts(llm.respond([user("I want a refund")])) == ["Refunds take five days."]
    assert texts(llm.respond([user("Something")])) == ["Anything else?"]


def test_only_the_latest_user_message_is_matched() -> None:
    llm = ScriptedLLM([{"match": ["refund"], "say": "Refunds take five days."}], fallback="?")
    messages = [user("refund please"), ChatMessage(role="assistant", content="ok"), user("bye")]
    assert texts(llm.respond(messages)) == ["?"]


def test_regex_named_groups_fill_tool_arguments() -> None:
    llm = ScriptedLLM(
        [
            {
                "regex": r"table for (?P<people>\d+) at (?P<time>\d{1,2}(?::\d\d)?\s*[ap]m)",
                "say": "Booking for {people}.",
                "tool": "book_table",
                "arguments": {
                    "people": "{people}",
                    "time": "{time}",
                    "source": "phone",
                    "vip": False,
                },
            }
        ]
    )
    chunks = llm.respond([user("A table for 4 at 7:30 pm please")], [BOOK])
    assert texts(chunks) == ["Booking for 4."]
    (call,) = calls(chunks)
    assert call.name == "book_table"
    # Templates render to strings; non-string values pass through as given.
    assert json.loads(call.arguments) == {
        "people": "4",
        "time": "7:30 pm",
        "source": "phone",
        "vip": False,
    }


def test_reply_template_with_result() -> None:
    llm = ScriptedLLM(
        [{"match": ["order"], "tool": "lookup_order", "reply": "Here it is: {result}"}]
    )
    assert after_tool(llm, "where is my order", "shipped", [LOOKUP]) == "Here it is: shipped"


def test_reply_template_with_result_fields() -> None:
    llm = ScriptedLLM(
        [
            {
                "regex": r"order (?P<number>\d+)",
                "tool": "lookup_order",
                "arguments": {"number": "{number}"},
                "reply": (
                    "Order {result.id} is {result.status}; eta {result.eta.day}.{result.missing}"
                ),
            }
        ]
    )
    result = json.dumps({"id": 42, "status": "shipped", "eta": {"day": "Monday"}})
    answer = after_tool(llm, "where is order 42", result, [LOOKUP])
    assert answer == "Order 42 is shipped; eta Monday."


def test_without_reply_the_result_is_said_as_is() -> None:
    llm = ScriptedLLM([{"match": ["order"], "tool": "lookup_order"}])
    assert after_tool(llm, "my order?", "It ships today.", [LOOKUP]) == "It ships today."


def test_instruction_rules_match_framework_instructions() -> None:
    llm = ScriptedLLM(
        [
            {"match": ["topic"], "say": "should not be used for instructions"},
            {
                "on": "instruction",
                "regex": r"Results:\s*(?P<results>.+)",
                "say": "Here is what we found: {results}",
            },
        ]
    )
    messages = [
        user("tell me about the topic of tides"),
        ChatMessage(role="system", content="Present these results.\n\nResults:\nTides are tidal."),
    ]
    assert texts(llm.respond(messages)) == ["Here is what we found: Tides are tidal."]


def test_user_rules_do_not_answer_instructions() -> None:
    llm = ScriptedLLM(
        [{"match": ["*"], "say": "user rule"}],
        fallback="fallback",
        instruction_fallback="noted: {message}",
    )
    messages = [user("hi"), ChatMessage(role="system", content="Summarise.")]
    assert texts(llm.respond(messages)) == ["noted: Summarise."]


def test_fallback_when_nothing_matches() -> None:
    llm = ScriptedLLM([{"match": ["billing"], "say": "Billing it is."}], fallback="Pardon?")
    assert texts(llm.respond([user("the weather")])) == ["Pardon?"]
    assert texts(llm.respond([])) == ["Pardon?"]
    assert texts(ScriptedLLM().respond([user("anything")])) == [
        "Sorry, I can't help with that yet."
    ]


def test_tool_choice_none_suppresses_tool_calls() -> None:
    llm = ScriptedLLM(
        [
            {"match": ["book"], "say": "One moment.", "tool": "book_table"},
            {"match": ["cancel"], "tool": "book_table"},
        ],
        fallback="I can't do that now.",
    )
    chunks = llm.respond([user("book a table")], [BOOK], tool_choice="none")
    assert texts(chunks) == ["One moment."]
    assert calls(chunks) == []
    # A tool-only rule has nothing to say without its tool, so the fallback answers.
    assert texts(llm.respond([user("cancel")], [BOOK], tool_choice="none")) == [
        "I can't do that now."
    ]


def test_a_named_tool_choice_selects_the_rule_for_that_tool() -> None:
    llm = ScriptedLLM(
        [
            {"match": ["order"], "tool": "book_table"},
            {"match": ["order"], "tool": "lookup_order"},
        ]
    )
    (call,) = calls(llm.respond([user("my order")], [BOOK, LOOKUP], tool_choice="lookup_order"))
    assert call.name == "lookup_order"


def test_rules_for_tools_the_agent_does_not_have_are_skipped() -> None:
    llm = ScriptedLLM(
        [{"match": ["book"], "tool": "book_table"}, {"match": ["*"], "say": "No tools here."}]
    )
    assert texts(llm.respond([user("book it")], [LOOKUP])) == ["No tools here."]
    # No tools offered at all: a model cannot call one.
    chunks = llm.respond([user("book it")], [])
    assert calls(chunks) == []
    assert texts(chunks) == ["No tools here."]


def test_same_input_same_output() -> None:
    rules = [
        {
            "regex": r"order (?P<n>\d+)",
            "say": "Checking {n}.",
            "tool": "lookup_order",
            "arguments": {"n": "{n}"},
        }
    ]
    llm = ScriptedLLM(rules)
    messages = [user("order 7")]
    first = llm.respond(messages, [LOOKUP])
    assert llm.respond(messages, [LOOKUP]) == first
    assert ScriptedLLM(rules).respond(messages, [LOOKUP]) == first


def test_tool_call_ids_are_unique_within_a_conversation() -> None:
    llm = ScriptedLLM([{"match": ["order"], "tool": "lookup_order"}])
    messages = [user("order one")]
    (first,) = calls(llm.respond(messages, [LOOKUP]))
    messages += [
        ChatMessage(role="assistant", tool_calls=(first,)),
        ChatMessage(role="tool", content="x", tool_call_id=first.id),
        ChatMessage(role="assistant", content="x"),
        user("order two"),
    ]
    (second,) = calls(llm.respond(messages, [LOOKUP]))
    assert first.id != second.id


async def test_stream_yields_the_same_chunks() -> None:
    llm = ScriptedLLM([{"match": ["hi"], "say": "Hello"}])
    streamed = [chunk async for chunk in llm.stream([user("hi")])]
    assert streamed == llm.respond([user("hi")])


def test_render_placeholders() -> None:
    values = {"name": "Ada", "result_data": {"n": 3, "tags": ["a"]}, "result": "raw"}
    assert render("Hi {name}, {result} {result.n} {result.tags} {unknown}.", values) == (
        'Hi Ada, raw 3 ["a"] .'
    )


@pytest.mark.parametrize(
    ("rule", "problem"),
    [
        ({"say": "hello"}, "needs `match` phrases or a `regex`"),
        ({"regex": "(unclosed", "say": "x"}, r"regex '\(unclosed' is invalid"),
        ({"match": ["hi"]}, "needs `say` or `tool`"),
        ({"match": ["hi"], "say": "x", "typo": 1}, "typo"),
        ({"match": ["hi"], "say": "x", "on": "assistant"}, "on"),
    ],
)
def test_invalid_rules_are_rejected(rule: dict[str, object], problem: str) -> None:
    with pytest.raises(ValidationError, match=problem):
        ScriptedLLM([rule])
    with pytest.raises(ValidationError, match=problem):
        ScriptedRule.model_validate(rule)


def test_a_caller_turn_nothing_matched_is_read_tolerantly() -> None:
    llm = ScriptedLLM(
        [
            {"match": ["how is it going"], "say": "status"},
            {"match": ["any news"], "say": "news"},
            {"match": ["how was the weather"], "say": "weather"},
        ],
        fallback="fallback",
    )

    def said(text: str) -> str:
        [chunk] = llm.respond([ChatMessage(role="user", content=text)])
        assert isinstance(chunk, TextDelta)
        return chunk.text

    assert said("how was it going") == "status"  # one word of a long phrase misheard
    assert said("who is it going") == "status"  # its first word sounds alike (H)
    assert said("is it going to rain") == "fallback"  # "is" does not sound like "how" (IS, H)
    assert said("how was the weather") == "weather"  # an exact match wins over a near one
    assert said("how was it growing") == "fallback"  # two words off
    assert said("any nose") == "fallback"  # short phrases are never guessed


def test_recognizer_punctuation_and_a_misheard_trigger_word_still_match() -> None:
    llm = ScriptedLLM(
        [
            {
                "regex": r"\b(?:research|dig into|read up on)\s+(?P<topic>.+?)[\s.?!,]*$",
                "tool": "delegate_workers",
                "arguments": {"task": "{topic}"},
            },
            {"match": ["research"], "say": "what topic?"},
            {"match": ["forget it"], "say": "cancelled"},
        ],
        fallback="fallback",
    )
    tools = [ToolSpec(name="delegate_workers")]

    def task(text: str) -> str | None:
        chunks = llm.respond([ChatMessage(role="user", content=text)], tools)
        calls = [c.call for c in chunks if isinstance(c, ToolCallChunk)]
        return json.loads(calls[0].arguments)["task"] if calls else None

    def said(text: str) -> str:
        chunks = llm.respond([ChatMessage(role="user", content=text)], tools)
        return " ".join(c.text for c in chunks if isinstance(c, TextDelta))

    # Whisper's commas, not the bare "research" rule below
    assert task("Research, home batteries, please.") == "home batteries please"
    assert task("Can you did into home insulation?") == "home insulation"  # "did" ~ "dig"
    assert task("Would you read up in electric cars") == "electric cars"  # 3 words, 1 off
    assert task("would you write up on electric cars") == "electric cars"  # write ~ read: RT
    assert task("can someone rate up on the insulation") == "the insulation"  # RT again
    assert task("please red up on batteries") == "batteries"  # spelled alike
    assert task("would you wait up on electric cars") is None  # WT is not RT
    assert task("could you dog into it") == "it"  # "dog"/"dig" spelled alike
    assert task("can you go into solar panels") is None  # "go"/"dig": not alike
    assert said("Forgot it.") == "cancelled"
    assert said("did you get it") == "fallback"  # "get" is not "forget" misheard
    assert task("I'll dig in the paper") is None  # "in": too short to be "into" misheard
    assert task("What's 3.5 kW?") is None and said("What's 3.5 kW?") == "fallback"


def test_rule_vocabulary_lists_trigger_phrases_and_regex_alternatives() -> None:
    rules = ScriptedLLM(
        [
            {"regex": r"^(?:so\s+)?(?:what is|what.s)\s+(?P<topic>.+?)$", "say": "x"},
            {"match": ["*", "never mind"], "say": "y"},
            {"match": ["ignored"], "on": "instruction", "say": "z"},
            {"match": ["any news"], "tool": "check_tasks"},
        ]
    ).rules
    assert rule_vocabulary(rules) == ["what is", "what", "never mind", "any news"]
    assert rule_vocabulary(rules, tools_only=True) == ["any news"]


def test_a_dropped_inner_word_and_split_or_joined_words_still_match() -> None:
    llm = ScriptedLLM(
        [
            {
                "regex": r"\b(?:find out about|read up on|dig into)\s+(?P<topic>.+?)[\s.?!,]*$",
                "tool": "delegate_workers",
                "arguments": {"task": "{topic}"},
            },
            {
                "regex": r"^(?:what is|what are)\s+(?:an?\s+)?(?P<topic>.+?)[\s.?!]*$",
                "tool": "search_knowledge",
                "arguments": {"query": "{topic}"},
            },
            {"match": ["never mind"], "say": "cancelled"},
        ],
        fallback="fallback",
    )
    tools = [ToolSpec(name="delegate_workers"), ToolSpec(name="search_knowledge")]

    def called(text: str) -> tuple[str, str] | None:
        chunks = llm.respond([ChatMessage(role="user", content=text)], tools)
        calls = [c.call for c in chunks if isinstance(c, ToolCallChunk)]
        if not calls:
            return None
        return calls[0].name, next(iter(json.loads(calls[0].arguments).values()))

    def said(text: str) -> str:
        chunks = llm.respond([ChatMessage(role="user", content=text)], tools)
        return " ".join(c.text for c in chunks if isinstance(c, TextDelta))

    # An inner word of a three-word phrase dropped; not its first.
    assert called("What do you read on electric cars?") == ("delegate_workers", "electric cars")
    assert called("please find about wind turbines") == ("delegate_workers", "wind turbines")
    assert called("out about wind turbines") is None
    # Words split or joined.
    assert called("can you dig in to home insulation") == ("delegate_workers", "home insulation")
    assert said("nevermind") == "cancelled"
    # "if" is not "is" (though a phone line blurs s and f): "what if" asks no question.
    assert called("What if a heat pump?") is None
    assert called("what I lovely day") is None  # one letter is too little to be "is"
    assert called("what war solar panels") is None


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ('{"n": 3}', True),
        (" [1, 2]", True),
        ("42", True),
        ("-1.5", True),
        ('"quoted"', True),
        ("true", True),
        ("null", True),
        ("three facts about tides", False),
        ("no results", False),
        ("", False),
    ],
)
def test_only_text_that_may_be_json_is_parsed(text: str, parsed: bool) -> None:
    from voicehub.agents.scripted import _may_be_json

    assert _may_be_json(text) is parsed
    if not parsed:  # the shortcut never skips text the parser would have taken
        with pytest.raises(json.JSONDecodeError):
            json.loads(text)


def test_calls_tool_tells_a_request_from_words_that_only_get_a_line() -> None:
    llm = ScriptedLLM(
        [
            {"match": ["hello"], "say": "Hello!"},
            {
                "regex": r"\bdig into\s+(?P<topic>.+?)[\s.?!,]*$",
                "tool": "delegate_workers",
                "arguments": {"task": "{topic}"},
            },
            {"match": ["any update"], "say": "Checking.", "tool": "check_tasks"},
        ],
        fallback="?",
    )
    assert llm.calls_tool("could you dig into heat pumps")
    assert llm.calls_tool("could you did into heat pumps")  # tolerant matching too
    assert llm.calls_tool("any update?")
    assert not llm.calls_tool("hello there")  # a rule matched, but it only says a line
    assert not llm.calls_tool("what a lovely day")
    assert not llm.calls_tool("")


def test_tool_arguments_say_what_a_request_is_about() -> None:
    llm = ScriptedLLM(
        [
            {
                "regex": r"\bresearch\s+(?P<topic>.+?)[\s.?!,]*$",
                "tool": "delegate_workers",
                "arguments": {"task": "{topic}", "steps": ["read", "{topic} again"], "n": 2},
            },
            {"match": ["any news"], "tool": "check_tasks"},
            {"match": ["hello"], "say": "hi"},
        ]
    )
    assert llm.tool_arguments("research heat pumps") == "heat pumps read heat pumps again"
    assert llm.tool_arguments("any news") == ""  # a tool without arguments
    assert llm.tool_arguments("hello") == ""  # no tool


def test_example_requests_put_topics_after_the_phrases_of_rules_that_take_one() -> None:
    rules = ScriptedLLM(
        [
            {
                "regex": r"\b(?:research|look into)\s+(?P<topic>.+?)(?:\s+please)?$",
                "tool": "delegate_workers",
            },
            {"match": ["any news", "status"], "tool": "check_tasks"},
            {"regex": r"^(?:so\s+)?(?:what is|what.s)\s+(?:the\s+)?(?P<q>.+)$", "tool": "ask"},
            {"match": ["hello"], "say": "hi"},  # says something only: no example
            {"match": ["stop"], "on": "instruction", "tool": "stop"},
        ]
    ).rules
    assert example_requests(rules, ["solar panels", "heat pumps", "batteries"]) == [
        "Research solar panels.",
        "Look into heat pumps.",
        "Research batteries.",
        "Any news.",
        "Status.",
        # "so" and "the" are grammar, "what.s" is read as "what"
        "What is solar panels.",
        "What heat pumps.",
        "What is batteries.",
    ]
    # Without topics, a rule's phrases stand alone.
    assert example_requests(rules[:2], []) == [
        "Research.",
        "Look into.",
        "Please.",
        "Any news.",
        "Status.",
    ]
