"""MkDocs hooks for the documentation site (`mkdocs.yml`, built in `make test`).

References are rendered from the code at every build, so they cannot go stale:
`docs/desk-file.md` and `docs/protocols.md` hold markers that become the tables of
`voicehub.desks.reference` and of the call protocol's event models.
"""

from __future__ import annotations

import typing
from typing import Any

from voicehub.desks.reference import MARKER, render_reference

EVENTS_MARKER = "<!-- call-events-reference -->"


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    fills = {"desk-file.md": (MARKER, render_reference), "protocols.md": (EVENTS_MARKER, _events)}
    if page.file.src_uri not in fills:
        return markdown
    marker, render = fills[page.file.src_uri]
    if marker not in markdown:
        raise ValueError(f"docs/{page.file.src_uri} lost its marker {marker}")
    return markdown.replace(marker, render())


def _events() -> str:
    """One table per direction: each JSON frame's `type`, fields and meaning."""
    from voicehub.transports import call_events
    from voicehub.voice import events

    client = [call_events.Playout, call_events.Hangup, call_events.StatusRequest]
    parts = []
    for title, models in (
        ("Server to client", typing.get_args(events.ServerEvent)),
        ("Client to server", client),
    ):
        parts += [f"### {title}", "", "| `type` | fields | meaning |", "|---|---|---|"]
        for model in models:
            kind = model.model_fields["type"].default
            fields = ", ".join(
                f"`{name}`" + ("" if info.is_required() else "?")
                for name, info in model.model_fields.items()
                if name != "type"
            )
            doc = " ".join((model.__doc__ or "").split("\n\n")[0].split())
            parts.append(f"| `{kind}` | {fields or '-'} | {doc} |")
        parts.append("")
    return "\n".join(parts)
