"""Tools from typed Python functions.

The JSON schema comes from a pydantic model built from the signature; arguments are validated
before the function runs, and a bad argument becomes an error result the model sees (so it can
correct itself) rather than an exception.
"""

from __future__ import annotations

import inspect
import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any, get_args, get_origin, get_type_hints

from pydantic import BaseModel, Field, ValidationError, create_model

from voicehub.agents.llm import ToolSpec
from voicehub.core.validation import describe_errors
from voicehub.errors import ConfigError, StoreError, ToolError

if TYPE_CHECKING:
    from voicehub.core.runtime import Runtime

log = logging.getLogger("voicehub.tools")
_TRACED_TEXT = 1000  # characters of a tool's arguments and result kept on its span


# What a model hears when a tool met a store failure (a caller may hear it next).
STORE_FAILED = "the conversation store could not be reached; try again in a moment"


@dataclass
class ToolContext:
    """Where a tool runs. Tools declare a parameter of this type to receive it."""

    hub: Runtime | None = None
    room_id: str = ""
    agent_id: str = ""
    call_id: str = ""
    state: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ToolResult:
    """What a tool call produced: text for the model, and whether it is an error."""

    call_id: str
    name: str
    content: str
    is_error: bool = False
    data: Any = None


class Tool:
    """A callable the model may use, with a validated argument model."""

    def __init__(
        self,
        function: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
    ) -> None:
        self.function = function
        self.name = name or function.__name__
        self.description = description or _first_paragraph(inspect.getdoc(function) or "")
        self.context_parameter: str | None = None
        self.arguments_model = self._build_model()
        self.spec = ToolSpec(
            name=self.name, description=self.description, parameters=self._schema()
        )

    def _build_model(self) -> type[BaseModel]:
        try:
            # include_extras keeps Annotated metadata (the parameter descriptions).
            hints = get_type_hints(self.function, include_extras=True)
        except NameError as exc:
            raise ConfigError(
                f"tool {self.name!r}: cannot resolve a type annotation ({exc}); define the "
                "types a tool uses at module level"
            ) from None
        fields: dict[str, Any] = {}
        for parameter in inspect.signature(self.function).parameters.values():
            annotation = hints.get(parameter.name, Any)
            if annotation is ToolContext:
                self.context_parameter = parameter.name
                continue
            default = ... if parameter.default is inspect.Parameter.empty else parameter.default
            fields[parameter.name] = (_with_description(annotation), default)
        model: type[BaseModel] = create_model(f"{self.name}_arguments", **fields)
        return model

    def _schema(self) -> dict[str, Any]:
        schema = self.arguments_model.model_json_schema()
        schema.pop("title", None)
        for prop in schema.get("properties", {}).values():
            prop.pop("title", None)
        schema.setdefault("properties", {})
        return schema

    async def invoke(
        self, arguments: str | Mapping[str, Any], context: ToolContext | None = None
    ) -> ToolResult:
        """Validate `arguments` (JSON text or a mapping) and run the tool. Never raises for
        bad arguments or tool failures: those become error results. With tracing on (the
        hub's `tracer`), the call is a span in its room's trace."""
        hub = context.hub if context is not None else None
        if hub is None or not hub.tracer.enabled:
            return await self._invoke(arguments, context)
        assert context is not None
        text = arguments if isinstance(arguments, str) else json.dumps(dict(arguments))
        span = hub.tracer.start(
            f"tool {self.name}",
            room_id=context.room_id,
            attributes={
                "voicehub.tool.name": self.name,
                "voicehub.tool.arguments": text[:_TRACED_TEXT],
                "voicehub.tool.call_id": context.call_id,
                "voicehub.agent.id": context.agent_id,
                "voicehub.room.id": context.room_id,
            },
        )
        error: str | None = "cancelled"
        try:
            with span.activate():
                result = await self._invoke(arguments, context)
            span.set_attribute("voicehub.tool.result", result.content[:_TRACED_TEXT])
            error = result.content if result.is_error else None
            return result
        finally:
            span.end(error)

    async def _invoke(
        self, arguments: str | Mapping[str, Any], context: ToolContext | None
    ) -> ToolResult:
        call_id = context.call_id if context else ""
        raw = self._json_object(arguments, call_id)
        if isinstance(raw, ToolResult):
            return raw
        try:
            parsed = self.arguments_model.model_validate(raw)
        except ValidationError as exc:
            problems = describe_errors(exc, root="arguments")
            return self._error(call_id, "bad arguments: " + "; ".join(problems))
        kwargs = {name: getattr(parsed, name) for name in type(parsed).model_fields}
        if self.context_parameter is not None:
            kwargs[self.context_parameter] = context or ToolContext()
        try:
            value = self.function(**kwargs)
            if inspect.isawaitable(value):
                value = await value
        except ToolError as exc:
            return self._error(call_id, str(exc))
        except StoreError:  # a model may say it aloud: the address and error stay in the log
            log.exception("tool %s: the store failed", self.name)
            return self._error(call_id, STORE_FAILED)
        except Exception as exc:  # a tool's bug is reported to the model, not raised
            log.exception("tool %s failed", self.name)
            return self._error(call_id, f"{type(exc).__name__}: {exc}")
        return ToolResult(call_id, self.name, _to_text(value), data=value)

    def _json_object(
        self, arguments: str | Mapping[str, Any], call_id: str
    ) -> dict[str, Any] | ToolResult:
        """The call's arguments as a JSON object, or the error that says why they are not one."""
        try:
            raw = json.loads(arguments or "{}") if isinstance(arguments, str) else dict(arguments)
        except json.JSONDecodeError as exc:
            return self._error(
                call_id,
                f"arguments are not valid JSON ({exc.msg}); send a JSON object matching the schema",
            )
        if not isinstance(raw, dict):
            return self._error(call_id, "arguments must be a JSON object")
        return raw

    def _error(self, call_id: str, message: str) -> ToolResult:
        return ToolResult(
            call_id, self.name, f"error in tool {self.name}: {message}", is_error=True
        )

    def __repr__(self) -> str:
        return f"Tool({self.name!r})"


def tool(
    function: Callable[..., Any] | None = None,
    *,
    name: str | None = None,
    description: str | None = None,
) -> Any:
    """Decorator turning a typed function into a `Tool` (usable bare or with arguments)."""

    def wrap(fn: Callable[..., Any]) -> Tool:
        return Tool(fn, name=name, description=description)

    return wrap(function) if function is not None else wrap


def _with_description(annotation: Any) -> Any:
    """`Annotated[T, "text"]` is shorthand for `Annotated[T, Field(description="text")]`."""
    if get_origin(annotation) is not Annotated:
        return annotation
    base, *extras = get_args(annotation)
    converted = [Field(description=x) if isinstance(x, str) else x for x in extras]
    return Annotated[(base, *converted)]


def _first_paragraph(doc: str) -> str:
    return doc.strip().split("\n\n", 1)[0].replace("\n", " ")


def _to_text(value: Any) -> str:
    if value is None:
        return "done"
    if isinstance(value, str):
        return value
    if isinstance(value, BaseModel):
        return value.model_dump_json()
    return json.dumps(value, default=str)
