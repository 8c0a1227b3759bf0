"""The JSON Schema of a desk file, from the pydantic models that validate it.

`voicehub channels --schema channels/desk.schema.json` writes it; each example desk starts
with `#:schema ./desk.schema.json`, the directive TOML editors (Taplo, VS Code's Even Better
TOML) follow to complete and check keys as you type. The desk-file reference in `docs/` is
rendered from the same schema at build time, so neither can drift from the code.

The meaning of each key is the docstring under its field in `voicehub.desks.sections` (and
the other section modules); a scripted rule's keys belong to `voicehub.agents.scripted`, so
their meanings are kept here. Two shorthands the models accept before validation are
spelled out for editors: `llm = "scripted"` and a single `match = "phrase"`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from voicehub.desks.config import DeskConfig

__all__ = [
    "RULE_MEANINGS",
    "desk_file_schema",
    "schema_directive",
    "schema_text",
    "undescribed_keys",
]

SCHEMA_FILE = "desk.schema.json"
DRAFT = "https://json-schema.org/draft/2020-12/schema"

RULE_MEANINGS = {
    "match": "Phrases that trigger the rule when the words contain one (case and punctuation "
    'ignored, one misheard word tolerated); `"*"` matches anything. A string is one phrase.',
    "regex": "A regular expression searched in the words; its named groups "
    "(`(?P<topic>...)`) fill `{topic}` in `say` and `arguments`.",
    "on": "What the rule answers: the caller's words (`user`) or an instruction "
    "(`instruction`: a delivery in `generate` mode, a handoff).",
    "say": "The line spoken (with a tool: spoken as the tool is called). Placeholders: regex "
    "groups, `{message}`, `{last_user}`.",
    "tool": "The tool to call; it must be one the agent has.",
    "arguments": "The tool's arguments; every string in them is a template like `say`.",
    "reply": "Spoken after the tool answered: `{result}` (the tool's answer), "
    "`{result.FIELD}` (a field of a JSON answer), `{message}`, `{last_user}`. An answer "
    "that is not JSON (an error, an MCP server's `on_error`) is spoken as it is instead "
    "of a reply with `{result.FIELD}`s.",
    "ask": 'Asked when the caller names the request but not its subject ("could you '
    "research\"); the caller's next turn is read after those words. Needs a `regex` with a "
    "named group. Placeholders: `{message}`, `{last_user}`.",
}


def desk_file_schema() -> dict[str, Any]:
    """The schema (draft 2020-12) of one desk file."""
    schema = DeskConfig.model_json_schema(mode="validation")
    definitions: dict[str, Any] = schema["$defs"]
    rule = definitions["RuleConfig"]
    for key, meaning in RULE_MEANINGS.items():
        if key in rule["properties"]:
            rule["properties"][key]["description"] = meaning
    match = rule["properties"]["match"]
    match_list = {k: v for k, v in match.items() if k in ("items", "type")}
    match.pop("items", None)
    match.pop("type", None)
    match["anyOf"] = [{"type": "string"}, match_list]
    llm = definitions["LLMConfig"]
    table = {k: llm.pop(k) for k in list(llm) if k not in ("title", "description")}
    llm["anyOf"] = [{"type": "string", "enum": ["scripted"]}, table]
    for part in _subschemas(schema):
        if isinstance(part.get("description"), str):
            part["description"] = " ".join(part["description"].split())
    return {"$schema": DRAFT, **schema, "title": "voicehub desk file"}


def schema_text() -> str:
    """The schema as the checked-in file holds it."""
    return json.dumps(desk_file_schema(), indent=2, ensure_ascii=False) + "\n"


def undescribed_keys(schema: dict[str, Any] | None = None) -> list[str]:
    """Keys of the schema's tables without a meaning, as `Model.key` (none, in a good build)."""
    schema = schema if schema is not None else desk_file_schema()
    tables = {"DeskConfig": schema, **schema["$defs"]}
    missing = []
    for name, table in tables.items():
        properties = table.get("properties") or _object_branch(table).get("properties", {})
        missing += [
            f"{name}.{key}" for key, value in properties.items() if not value.get("description")
        ]
    return missing


def _object_branch(table: dict[str, Any]) -> dict[str, Any]:
    for branch in table.get("anyOf", ()):
        if branch.get("type") == "object":
            return dict(branch)
    return {}


def _subschemas(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from _subschemas(value)
    elif isinstance(node, list):
        for value in node:
            yield from _subschemas(value)


def schema_directive(text: str) -> str | None:
    """The `#:schema` directive at the top of a TOML file's text, if any."""
    found = re.match(r"\s*#:schema\s+(\S+)", text)
    return found.group(1) if found else None
