"""MkDocs hooks for the documentation site (`mkdocs.yml`, built in `make test`).

References are rendered from the code at every build, so they cannot go stale:
`docs/desk-file.md` and `docs/protocols.md` hold markers that become the tables of
`voicehub.desks.reference` and of the call protocol's event models.

The desk-file reference is also committed in `docs/desk-file.md`, between its marker and
`DESK_FILE_END`, so the page reads whole in the repository too (tests/test_docs.py checks
it is current); `.venv/bin/python mkdocs_hooks.py` writes it again after a model changed.
"""

from __future__ import annotations

import typing
from pathlib import Path
from typing import Any

from voicehub.desks.reference import MARKER, render_reference

EVENTS_MARKER = "<!-- call-events-reference -->"
DESK_FILE_END = "<!-- end of desk-file-reference -->"
DESK_FILE = Path(__file__).resolve().parent / "docs" / "desk-file.md"


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    fills = {"desk-file.md": (MARKER, render_reference), "protocols.md": (EVENTS_MARKER, _events)}
    if page.file.src_uri not in fills:
        return markdown
    marker, render = fills[page.file.src_uri]
    if marker not in markdown:
        raise ValueError(f"docs/{page.file.src_uri} lost its marker {marker}")
    if marker == MARKER:  # the committed copy, however old, gives way to the code's
        return with_desk_file_reference(markdown)
    return markdown.replace(marker, render())


def with_desk_file_reference(markdown: str) -> str:
    """`markdown` (docs/desk-file.md) with the reference rendered after its marker."""
    before = markdown.split(MARKER, 1)[0]
    after = markdown.split(DESK_FILE_END, 1)[1] if DESK_FILE_END in markdown else "\n"
    return f"{before}{MARKER}\n\n{render_reference().strip()}\n\n{DESK_FILE_END}{after}"


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


if __name__ == "__main__":  # write the committed copy of the desk-file reference again
    DESK_FILE.write_text(with_desk_file_reference(DESK_FILE.read_text()))
