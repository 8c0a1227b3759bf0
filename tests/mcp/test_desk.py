"""A desk with an `[[mcp]]` server: a room that runs it discovers the tools, its agent calls
them through the same path as the builtins (a tracing span each), and a server that is down
answers with what the desk's `on_error` says while the conversation goes on."""

from __future__ import annotations

from pathlib import Path

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from voicehub.core.channels import TextChannel
from voicehub.core.clock import VirtualClock
from voicehub.desks.desk import Desk, build_desk
from voicehub.desks.loading import load_desk_file
from voicehub.telemetry.setup import TracingSettings, start_tracing

DESK = """\
name = "helpdesk"

[[mcp]]
name = "fake"
command = {command}
on_error = "The ticket system is down, sorry."

[[agents]]
id = "desk"
tools = ["fake.lookup_ticket"]

[agents.scripted]
fallback = "Which ticket?"

[[agents.scripted.rules]]
regex = 'ticket (?P<number>T-\\d+)'
tool = "lookup_ticket"
arguments = {{ ticket_id = "{{number}}" }}
reply = "Ticket {{result.ticket_id}} is {{result.status}}."

[[agents.scripted.rules]]
match = "hello"
say = "Hello there."
"""
FAKE = '["python", "-m", "voicehub_dev.fakes.mcp_server"]'
BROKEN = '["python", "-c", "raise SystemExit(3)"]'


def desk_file(tmp_path: Path, command: str) -> Desk:
    path = tmp_path / "helpdesk.toml"
    path.write_text(DESK.format(command=command))
    return build_desk(load_desk_file(path))


async def conversation(desk: Desk, *lines: str) -> tuple[list[str], InMemorySpanExporter]:
    """What the desk answered each line in a text room, and the spans of the room."""
    exporter = InMemorySpanExporter()
    tracing = start_tracing(TracingSettings(schedule_delay_millis=60_000), exporter=exporter)
    hub = desk.make_hub(clock=VirtualClock())
    hub.tracer = tracing.tracer
    answers: list[str] = []
    try:
        await hub.start()
        room = await hub.create_room("helpdesk:caller")
        text = TextChannel("web")
        await room.attach(text)
        for line in lines:
            await text.send(room, line)
            answers += [event.text for event in text.pending(room.id)]
    finally:
        await hub.aclose()
        await desk.aclose()
        tracing.flush()
    return answers, exporter


@pytest.mark.slow
async def test_the_agent_calls_the_server_tool_and_its_span_is_in_the_room_trace(
    tmp_path: Path,
) -> None:
    answers, exporter = await conversation(desk_file(tmp_path, FAKE), "ticket T-1001")
    assert answers == ["Ticket T-1001 is open."]
    (span,) = [s for s in exporter.get_finished_spans() if s.name == "tool lookup_ticket"]
    assert span.attributes is not None
    assert span.attributes["voicehub.tool.arguments"] == '{"ticket_id": "T-1001"}'
    assert span.status.is_ok


async def test_a_server_down_is_spoken_as_the_desk_says_and_the_conversation_goes_on(
    tmp_path: Path,
) -> None:
    answers, exporter = await conversation(desk_file(tmp_path, BROKEN), "ticket T-1001", "hello")
    # the reply would need fields of a ticket: the desk's on_error is spoken instead
    assert answers == ["The ticket system is down, sorry.", "Hello there."]
    (span,) = [s for s in exporter.get_finished_spans() if s.name == "tool lookup_ticket"]
    assert not span.status.is_ok
    assert span.status.description == "The ticket system is down, sorry."
