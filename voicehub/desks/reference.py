"""The desk-file reference (Markdown), rendered from the desk file's JSON Schema.

Every table of a desk file gets a section named by its TOML path (`[voice.deepgram]`,
`[[agents.scripted.rules]]`) with each key's type, default and meaning. The docs build
(`mkdocs_hooks.py`) puts it into `docs/desk-file.md`, so the reference is the code's.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from voicehub.desks.schema import desk_file_schema

__all__ = ["MARKER", "render_reference"]

MARKER = "<!-- desk-file-reference -->"


@dataclass(frozen=True)
class _Table:
    path: str  # TOML header: "[voice]", "[[agents]]", "top level"
    schema: dict[str, Any]  # the table's object schema


def render_reference(schema: dict[str, Any] | None = None) -> str:
    """One section per table of a desk file, in file order."""
    schema = schema if schema is not None else desk_file_schema()
    definitions: dict[str, Any] = schema["$defs"]
    sections = []
    for table in _tables(_Table("top level", schema), "", definitions, set()):
        sections.append(_section(table, definitions))
    return "\n\n".join(sections) + "\n"


def _tables(
    table: _Table, prefix: str, definitions: dict[str, Any], seen: set[str]
) -> list[_Table]:
    """`table` and the tables below it, depth first."""
    found = [table]
    for key, value in _properties(table.schema).items():
        path = f"{prefix}{key}"
        target, many = _nested(value, definitions)
        if target is None or target in seen:
            continue
        child = _object(definitions[target])
        header = f"[[{path}]]" if many == "array" else f"[{path}]"
        if many == "map":
            header = f"[{path}] (each key's value)"
        found += _tables(_Table(header, child), f"{path}.", definitions, seen | {target})
    return found


def _nested(value: dict[str, Any], definitions: dict[str, Any]) -> tuple[str | None, str]:
    """The definition a key holds a table of, and how: "one", "array" or "map"."""
    for option in [value, *value.get("anyOf", ())]:
        if "$ref" in option:
            return _ref_name(option["$ref"]), "one"
        items = option.get("items")
        if isinstance(items, dict) and "$ref" in items:
            return _ref_name(items["$ref"]), "array"
        extra = option.get("additionalProperties")
        if isinstance(extra, dict) and "$ref" in extra:
            return _ref_name(extra["$ref"]), "map"
    return None, "one"


def _section(table: _Table, definitions: dict[str, Any]) -> str:
    title = table.path if table.path != "top level" else "Top level"
    lines = [f"### `{title}`" if title != "Top level" else "### Top level", ""]
    description = table.schema.get("description")
    if description and table.path != "top level":
        lines += [description, ""]
    required = set(table.schema.get("required", ()))
    lines += ["| key | type | default | meaning |", "|---|---|---|---|"]
    for key, value in _properties(table.schema).items():
        kind = _type(value, definitions)
        default = "required" if key in required else _default(value)
        meaning = value.get("description", "")
        lines.append(f"| `{key}` | {_cell(kind)} | {_cell(default)} | {_cell(meaning)} |")
    return "\n".join(lines)


def _properties(schema: dict[str, Any]) -> dict[str, Any]:
    return dict(_object(schema).get("properties", {}))


def _object(schema: dict[str, Any]) -> dict[str, Any]:
    """The object branch of a table's schema (`llm` is a string or a table)."""
    if "properties" in schema:
        return schema
    for branch in schema.get("anyOf", ()):
        if branch.get("type") == "object" and "properties" in branch:
            return {**branch, "description": schema.get("description")}
    return schema


def _ref_name(ref: str) -> str:
    return ref.rsplit("/", 1)[-1]


def _type(value: dict[str, Any], definitions: dict[str, Any]) -> str:
    options = value.get("anyOf")
    if options:
        kinds = [_type(option, definitions) for option in options if option.get("type") != "null"]
        return " or ".join(dict.fromkeys(kinds))
    if "$ref" in value:
        target = definitions[_ref_name(value["$ref"])]
        if "anyOf" in target:  # a shorthand string or a table
            return _type(target, definitions)
        return "table"
    if "enum" in value:
        return ", ".join(f"`{json.dumps(item)}`" for item in value["enum"])
    if "const" in value:
        return f"`{json.dumps(value['const'])}`"
    kind = value.get("type")
    if kind == "array":
        items = value.get("items", {})
        inner = "tables" if "$ref" in items else _type(items, definitions)
        return f"list of {inner}" if inner != "tables" else "list of tables"
    if kind == "object":
        extra = value.get("additionalProperties")
        if isinstance(extra, dict):
            keys = value.get("propertyNames", {}).get("enum")
            named = f" keyed {', '.join(f'`{k}`' for k in keys)}" if keys else ""
            return f"table{named}"
        if "properties" in value:
            return "table"
        return "table (any keys)"
    words = {"string": "string", "integer": "integer", "number": "number", "boolean": "boolean"}
    text = words.get(str(kind), str(kind))
    bounds = [
        f"≥ {value['minimum']}" if "minimum" in value else "",
        f"> {value['exclusiveMinimum']}" if "exclusiveMinimum" in value else "",
        f"≤ {value['maximum']}" if "maximum" in value else "",
        f"{value['minLength']}+ characters" if value.get("minLength", 0) > 0 else "",
    ]
    shown = ", ".join(bound for bound in bounds if bound)
    return f"{text} ({shown})" if shown else text


def _default(value: dict[str, Any]) -> str:
    if "default" not in value:
        return "see its table" if "$ref" in value else "unset"
    default = value["default"]
    if default is None:
        return "unset"
    if default in ([], {}):
        return "empty"
    return f"`{json.dumps(default)}`"


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")
