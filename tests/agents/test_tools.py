"""Tools from typed functions: schemas, validation into error results, context, async."""

from __future__ import annotations

import asyncio
import json
from typing import Annotated, Literal

import pytest
from pydantic import BaseModel, Field

from voicehub.agents.tools import STORE_FAILED, Tool, ToolContext, ToolResult, tool
from voicehub.errors import ConfigError, StoreUnavailableError, ToolError
from voicehub.hub import Hub


def forecast(
    city: Annotated[str, "The city to forecast"],
    days: Annotated[int, Field(description="How many days ahead", ge=1, le=7)] = 3,
    units: Literal["metric", "imperial"] = "metric",
    detailed: bool = False,
) -> dict[str, object]:
    """Weather forecast for a city.

    Longer explanation that the model does not need.
    """
    return {"city": city, "days": days, "units": units, "detailed": detailed}


def test_schema_from_a_typed_function() -> None:
    spec = Tool(forecast).spec
    assert spec.name == "forecast"
    assert spec.description == "Weather forecast for a city."
    assert spec.parameters == {
        "type": "object",
        "properties": {
            "city": {"type": "string", "description": "The city to forecast"},
            "days": {
                "type": "integer",
                "description": "How many days ahead",
                "default": 3,
                "minimum": 1,
                "maximum": 7,
            },
            "units": {"enum": ["metric", "imperial"], "type": "string", "default": "metric"},
            "detailed": {"type": "boolean", "default": False},
        },
        "required": ["city"],
    }


def test_name_and_description_can_be_overridden() -> None:
    custom = Tool(forecast, name="weather", description="Ask about the weather.")
    assert (custom.name, custom.spec.name) == ("weather", "weather")
    assert custom.spec.description == "Ask about the weather."


def test_decorator_bare_and_with_arguments() -> None:
    @tool
    def ping() -> str:
        """Say pong."""
        return "pong"

    @tool(name="pong")
    def other() -> str:
        return "ping"

    assert isinstance(ping, Tool)
    assert ping.spec.parameters == {"type": "object", "properties": {}}
    assert isinstance(other, Tool)
    assert other.name == "pong"


def test_context_parameter_is_not_in_the_schema() -> None:
    def where(context: ToolContext, label: str) -> str:
        return label

    assert Tool(where).spec.parameters["properties"] == {"label": {"type": "string"}}
    assert Tool(where).spec.parameters["required"] == ["label"]


async def test_valid_call_returns_text_and_data() -> None:
    result = await Tool(forecast).invoke('{"city": "Oslo", "days": 2}')
    assert not result.is_error
    assert result.name == "forecast"
    assert result.data == {"city": "Oslo", "days": 2, "units": "metric", "detailed": False}
    assert json.loads(result.content) == result.data


async def test_arguments_may_be_a_mapping() -> None:
    result = await Tool(forecast).invoke({"city": "Oslo"})
    assert not result.is_error
    assert result.data["days"] == 3


async def _error_of(arguments: str | dict[str, object]) -> ToolResult:
    result = await Tool(forecast).invoke(arguments, ToolContext(call_id="call-9"))
    assert result.is_error, result
    assert result.call_id == "call-9"
    assert result.content.startswith("error in tool forecast: ")
    return result


async def test_bad_argument_type_becomes_an_error_result() -> None:
    result = await _error_of('{"city": "Oslo", "days": "many"}')
    assert "days" in result.content
    assert "integer" in result.content


async def test_constraint_violation_becomes_an_error_result() -> None:
    result = await _error_of('{"city": "Oslo", "days": 30}')
    assert "days" in result.content
    assert "7" in result.content


async def test_missing_argument_becomes_an_error_result() -> None:
    result = await _error_of("{}")
    assert "city" in result.content
    assert "required" in result.content.lower()


async def test_invalid_json_becomes_an_error_result() -> None:
    result = await _error_of('{"city": "Oslo"')
    assert "not valid JSON" in result.content


async def test_non_object_json_becomes_an_error_result() -> None:
    for arguments in ('["Oslo"]', '"Oslo"', "42", "null"):
        result = await _error_of(arguments)
        assert "JSON object" in result.content


async def test_empty_arguments_mean_no_arguments() -> None:
    def now() -> str:
        return "noon"

    assert (await Tool(now).invoke("")).content == "noon"


async def test_a_tool_that_raises_becomes_an_error_result() -> None:
    def explode(reason: str) -> str:
        raise RuntimeError(f"kaboom: {reason}")

    result = await Tool(explode).invoke({"reason": "test"})
    assert result.is_error
    assert result.content == "error in tool explode: RuntimeError: kaboom: test"


async def test_a_tool_error_is_reported_as_written() -> None:
    def picky(name: str) -> str:
        raise ToolError(f"no customer named {name!r}; ask for the account number")

    result = await Tool(picky).invoke({"name": "Bob"})
    assert result.is_error
    assert result.content == (
        "error in tool picky: no customer named 'Bob'; ask for the account number"
    )


async def test_context_is_injected() -> None:
    hub = Hub()
    seen: list[ToolContext] = []

    def where(context: ToolContext, label: str) -> str:
        seen.append(context)
        return f"{label} in {context.room_id} by {context.agent_id}"

    context = ToolContext(hub=hub, room_id="room-1", agent_id="desk", call_id="c1")
    result = await Tool(where).invoke({"label": "x"}, context)
    assert result.content == "x in room-1 by desk"
    assert seen == [context]


async def test_context_defaults_when_none_is_given() -> None:
    def where(ctx: ToolContext) -> str:
        return repr((ctx.hub, ctx.room_id))

    assert (await Tool(where).invoke({})).content == "(None, '')"


async def test_async_tools_are_awaited() -> None:
    gate = asyncio.Event()

    async def slow(value: int) -> int:
        await gate.wait()
        return value * 2

    call = asyncio.ensure_future(Tool(slow).invoke({"value": 21}))
    await asyncio.sleep(0)
    assert not call.done()
    gate.set()
    result = await call
    assert (result.content, result.data) == ("42", 42)


class Answer(BaseModel):
    ok: bool


class Address(BaseModel):
    street: str
    number: int


async def test_results_become_text() -> None:
    def nothing() -> None:
        return None

    def model() -> Answer:
        return Answer(ok=True)

    def text() -> str:
        return "plain"

    assert (await Tool(nothing).invoke({})).content == "done"
    assert json.loads((await Tool(model).invoke({})).content) == {"ok": True}
    assert (await Tool(text).invoke({})).content == "plain"


async def test_pydantic_model_arguments_are_validated() -> None:
    def ship(to: Address) -> str:
        return f"{to.number} {to.street}"

    good = await Tool(ship).invoke({"to": {"street": "Main", "number": 5}})
    assert good.content == "5 Main"
    bad = await Tool(ship).invoke({"to": {"street": "Main"}})
    assert bad.is_error
    assert "to.number" in bad.content


def test_an_unresolvable_annotation_is_a_clear_config_error() -> None:
    class Local(BaseModel):  # invisible to the tool: annotations are strings here
        x: int

    def uses_local(value: Local) -> str:
        return "never"

    with pytest.raises(ConfigError, match=r"tool 'uses_local'.*module level"):
        Tool(uses_local)


async def test_a_store_failure_reaches_the_model_without_the_stores_address() -> None:
    @tool
    def save(note: str) -> str:
        raise StoreUnavailableError("Redis store redis://10.0.0.7:6379/0 unreachable: refused")

    result = await save.invoke('{"note": "x"}')
    assert result.is_error and STORE_FAILED in result.content
    assert "redis" not in result.content.lower() and "6379" not in result.content
