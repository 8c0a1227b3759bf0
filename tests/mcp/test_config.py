"""`[[mcp]]` tables: a desk names MCP servers and which of their tools each agent gets;
mistakes name the file and the field, secrets are environment variable names only."""

from __future__ import annotations

from pathlib import Path

import pytest

from voicehub.desks.desk import build_desk
from voicehub.desks.loading import load_desk_file
from voicehub.errors import ConfigError
from voicehub.mcp.servers import HttpServer, StdioServer

DESK = """\
name = "helpdesk"

[[mcp]]
name = "tickets"
command = ["python", "tools/tickets.py", "--quiet"]
env = {{ TICKETS_TOKEN = "HELPDESK_TICKETS_TOKEN" }}
timeout = 3
on_error = "The ticket system is down."

[[mcp]]
name = "crm"
url = "https://crm.example.com/mcp"
headers = {{ Authorization = "CRM_AUTHORIZATION" }}

[[agents]]
id = "desk"
tools = {desk_tools}

[[agents.scripted.rules]]
match = "ticket"
tool = "{rule_tool}"

[[agents]]
id = "worker"
tools = ["crm.lookup_customer"]

[supervisor]
agent = "desk"
workers = ["worker"]
"""


def _write(tmp_path: Path, text: str | None = None, **values: str) -> Path:
    fields = {"desk_tools": '["tickets.ticket_status"]', "rule_tool": "ticket_status"}
    fields.update(values)
    path = tmp_path / "helpdesk.toml"
    path.write_text(text if text is not None else DESK.format(**fields))
    return path


def _error(tmp_path: Path, text: str | None = None, **values: str) -> str:
    with pytest.raises(ConfigError) as caught:
        load_desk_file(_write(tmp_path, text, **values))
    return str(caught.value)


def test_a_desk_lists_servers_and_each_agent_gets_the_tools_it_names(tmp_path: Path) -> None:
    desk = build_desk(load_desk_file(_write(tmp_path)))
    assert desk.mcp is not None
    tickets, crm = desk.mcp.servers["tickets"], desk.mcp.servers["crm"]
    assert isinstance(tickets.transport, StdioServer)
    assert tickets.transport.command == ("python", "tools/tickets.py", "--quiet")
    assert tickets.transport.cwd == tmp_path  # run from the desk file's folder
    assert dict(tickets.transport.env) == {"TICKETS_TOKEN": "HELPDESK_TICKETS_TOKEN"}
    assert (tickets.timeout, tickets.on_error) == (3, "The ticket system is down.")
    assert isinstance(crm.transport, HttpServer)
    assert dict(crm.transport.headers) == {"Authorization": "CRM_AUTHORIZATION"}
    # the model is offered each tool under its own name; the worker only gets its own
    front = {tool.name for tool in desk.front_agent.tools}
    assert "ticket_status" in front and "lookup_customer" not in front
    assert [tool.name for tool in desk.agents["worker"].tools] == ["lookup_customer"]
    assert desk.agents["worker"].tools[0] is desk.mcp.tools["crm.lookup_customer"]


def test_a_desk_without_mcp_tables_has_no_toolset(tmp_path: Path) -> None:
    path = tmp_path / "plain.toml"
    path.write_text('name = "plain"\n[[agents]]\nid = "desk"\n')
    assert build_desk(load_desk_file(path)).mcp is None


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            {"desk_tools": '["billing.refund"]'},
            "agents[0].tools[0]: no MCP server 'billing' in this desk (servers: tickets, crm)",
        ),
        (
            {"desk_tools": '["Tickets.ticket_status"]'},
            "'Tickets' is not a server name",
        ),
        (
            {"desk_tools": '["tickets.ticket.status"]'},
            "'ticket.status' cannot be offered to a model",
        ),
        (
            {"desk_tools": '["tickets.delegate_workers"]'},
            "has the name of the agent's tool 'delegate_workers'",
        ),
        (
            {"rule_tool": "open_ticket"},
            "tool 'open_ticket' is not available to agent 'desk' (it has ticket_status, "
            "delegate_workers",
        ),
    ],
)
def test_a_tool_an_agent_names_must_be_one_of_the_desk_servers(
    tmp_path: Path, change: dict[str, str], expected: str
) -> None:
    message = _error(tmp_path, **change)
    assert "helpdesk.toml" in message
    assert expected in message


def test_two_servers_offering_one_agent_a_tool_of_the_same_name_are_refused(
    tmp_path: Path,
) -> None:
    message = _error(tmp_path, desk_tools='["tickets.lookup_customer", "crm.lookup_customer"]')
    assert "'crm.lookup_customer' and 'tickets.lookup_customer' are both named" in message


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ('"HELPDESK_TICKETS_TOKEN"', '"s3cr3t token"', "never the value itself"),
        ('"CRM_AUTHORIZATION"', '"Bearer abc"', "never the value itself"),
        ("Authorization =", '"Bad Header" =', "not an HTTP header name"),
        ('url = "https://crm.example.com/mcp"', 'url = "crm.example.com"', "mcp[1].url"),
        (
            'url = "https://crm.example.com/mcp"',
            'url = "https://crm.example.com/mcp"\ncommand = ["x"]',
            "give the server a `command` (stdio) or a `url` (HTTP)",
        ),
        ('name = "crm"', 'name = "tickets"', "MCP server name 'tickets' is used twice"),
        ("timeout = 3", "timeout = 0", "mcp[0].timeout"),
    ],
)
def test_a_broken_server_table_names_the_field(
    tmp_path: Path, old: str, new: str, expected: str
) -> None:
    text = DESK.format(desk_tools='["tickets.ticket_status"]', rule_tool="ticket_status")
    assert old in text
    assert expected in _error(tmp_path, text.replace(old, new, 1))


def test_headers_belong_to_http_servers_and_env_to_stdio_ones(tmp_path: Path) -> None:
    text = DESK.format(desk_tools='["tickets.ticket_status"]', rule_tool="ticket_status")
    moved = text.replace('headers = { Authorization = "CRM_AUTHORIZATION" }', 'env = { A = "B" }')
    assert "mcp[1].env: only used with `command`" in _error(tmp_path, moved)


def test_loading_desks_with_mcp_tables_imports_no_sdk() -> None:
    # importing the SDK costs about 1.5 s of CPU: only a connection does
    import subprocess
    import sys

    channels = Path(__file__).resolve().parents[2] / "channels"
    code = (
        "import sys; from voicehub.desks.desk import load_desks; "
        f"desks = load_desks({str(channels)!r}); assert desks['tickets'].mcp is not None; "
        "print(sorted(m for m in ('mcp', 'httpx2', 'jsonschema') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
