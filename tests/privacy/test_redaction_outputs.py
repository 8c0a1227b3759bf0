"""Redaction where text leaves the process: exported spans (their attributes, events and
status) and every log record, on by default in a served process and taken out after it."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.e2e_helpers import running_server
from voicehub.core.redaction import Redactor, redact_logs
from voicehub.desks.desk import load_desks
from voicehub.desks.privacy import PrivacyConfig, process_redactor
from voicehub.server.settings import ServerSettings
from voicehub.telemetry.setup import TracingSettings, start_tracing
from voicehub_dev.fakes.server_session import ScriptedStack

CHANNELS = Path(__file__).resolve().parents[2] / "channels"


def test_exported_spans_carry_no_number_or_keypad_digits() -> None:
    exporter = InMemorySpanExporter()
    settings = TracingSettings(schedule_delay_millis=60_000)
    tracing = start_tracing(settings, exporter=exporter, redactor=Redactor([r"ACC-\d+"]))
    arguments = '{"to": "+1 555 010 0100", "digits": "4321#", "account": "ACC-99"}'
    span = tracing.tracer.start(
        "tool transfer_call", room_id="d:c", attributes={"voicehub.tool.arguments": arguments}
    )
    span.set_attribute("voicehub.keypad.digits", "4321")
    span.set_attribute("voicehub.turn", 3)
    span.end(error="Twilio refused +15550100123")
    tracing.flush()
    [exported] = exporter.get_finished_spans()
    attributes = dict(exported.attributes or {})
    assert attributes["voicehub.tool.arguments"] == (
        '{"to": "[number]", "digits": "[digits]", "account": "[redacted]"}'
    )
    assert attributes["voicehub.keypad.digits"] == "[digits]"
    assert attributes["voicehub.turn"] == 3
    assert exported.status.description == "Twilio refused [number]"
    tracing.shutdown()


def test_log_records_are_scrubbed_until_undone(caplog: pytest.LogCaptureFixture) -> None:
    log = logging.getLogger("voicehub.test")
    undo = redact_logs(Redactor())
    try:
        with caplog.at_level(logging.INFO):
            log.info("sms to %s failed: pressed=%s", "+447700900123", "12#")
            log.info("room %s: %d tasks", "research:cli-67b3f2e8e4", 3)
    finally:
        undo()
    assert [r.getMessage() for r in caplog.records] == [
        "sms to [number] failed: pressed=[digits]",
        "room research:cli-67b3f2e8e4: 3 tasks",
    ]
    caplog.clear()
    with caplog.at_level(logging.INFO):
        log.info("to %s", "+447700900123")
    assert caplog.records[0].getMessage() == "to +447700900123"


def test_the_process_redacts_unless_every_desk_turns_it_off() -> None:
    assert process_redactor([]) is not None
    off, on = PrivacyConfig(redact=False), PrivacyConfig(sensitive=("ACC-\\d+",))
    assert process_redactor([off]) is None
    both = process_redactor([off, on])
    assert both is not None and both.sensitive == ("ACC-\\d+",)
    with pytest.raises(ValueError, match="is not a regular expression"):
        PrivacyConfig(sensitive=("(unclosed",))


async def test_a_served_process_scrubs_its_logs(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    desks = {"research": load_desks(CHANNELS)["research"]}
    settings = ServerSettings(channels_dir=CHANNELS, db_path=tmp_path / "voicehub.db")
    before = logging.getLogRecordFactory()
    log = logging.getLogger("voicehub.test")
    async with running_server(settings, voice=ScriptedStack(), desks=desks):
        with caplog.at_level(logging.INFO):
            log.warning("caller %s", "+15550100123")
    assert caplog.records[-1].getMessage() == "caller [number]"
    assert logging.getLogRecordFactory() is before


def test_uvicorns_access_log_still_formats_and_is_scrubbed() -> None:
    # its formatter unpacks the record's five arguments: a record frozen into its message
    # (arguments None) printed "--- Logging error ---" and a traceback for every GET
    from uvicorn.logging import AccessFormatter

    formatter = AccessFormatter('%(client_addr)s - "%(request_line)s" %(status_code)s')
    access = logging.getLogger("uvicorn.access.test")
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    access.addHandler(handler)
    undo = redact_logs(Redactor())
    try:
        form = '%s - "%s %s HTTP/%s" %d'
        access.warning(form, "127.0.0.1:5000", "GET", "/", "1.1", 200)
        access.warning(form, "127.0.0.1:5000", "GET", "/calls?to=+447700900123", "1.1", 200)
    finally:
        undo()
        access.removeHandler(handler)
    assert [formatter.format(r) for r in records] == [
        '127.0.0.1:5000 - "GET / HTTP/1.1" 200 OK',
        '127.0.0.1:5000 - "GET /calls?to=[number] HTTP/1.1" 200 OK',
    ]


def test_a_number_the_arguments_do_not_hold_whole_is_scrubbed_from_the_message() -> None:
    log = logging.getLogger("voicehub.test.split")
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    log.addHandler(handler)
    undo = redact_logs(Redactor())
    try:
        log.warning("to %s%s", "+44770", "0900123")  # split over two arguments
        log.warning("to %d", 447700900123)  # an int
        log.warning("to %s", {"to": "+447700900123"})  # an object
    finally:
        undo()
        log.removeHandler(handler)
    messages = [r.getMessage() for r in records]
    assert messages == ["to [number]", "to [number]", "to {'to': '[number]'}"]
