"""Scrubbing callers' numbers, keypad digits and what a desk marks sensitive from text that
leaves the call: log lines and trace spans.

    redactor = Redactor(sensitive=[r"\\bACC-\\d{6}\\b"])
    redactor.text("call me on +1 (555) 010-0100, pin 4321#")
    # 'call me on [number], pin 4321#'
    redactor.attribute("tool.arguments", '{"digits": "4321#"}')
    # '{"digits": "[digits]"}'

Rules, in order:

- a phone number: 7 to 15 digits, optionally led by `+`, with single spaces, hyphens or
  parentheses between them, not inside a word (ids such as `cli-67b3f2e8e4` and stamps such
  as `20261126T151203` are words) -> `[number]`. Dots do not join digits: an address such as
  127.0.0.1 is left alone;
- keypad digits: the value after a key named `digits`, `dtmf`, `keys` or `pressed` (in
  JSON, `key=value` or `key: value`) -> `[digits]`; a span attribute whose own name says
  `digits` or `dtmf` is replaced whole;
- each of the desk's `sensitive` patterns -> `[redacted]`.

`redact_logs(redactor)` wraps the process's log-record factory, so each record any logger
makes (voicehub's, uvicorn's, a library's) carries its message already scrubbed, whatever
handler writes it; it returns the function that takes the wrapper out again. Records are
only made for enabled levels, so a debug line that is filtered out costs nothing more.
Tracebacks are not scrubbed.

`without_credentials(url)` is a store or service URL fit for a message: its password (in
`user:password@` or a `password=` query) replaced by `[redacted]`.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

from voicehub.core.tracing import AttributeValue

__all__ = ["DIGITS", "NUMBER", "REDACTED", "Redactor", "redact_logs", "without_credentials"]

NUMBER = "[number]"
DIGITS = "[digits]"
REDACTED = "[redacted]"

_NUMBER = re.compile(r"(?<![\w+])\+?\d(?:[ ()-]{0,2}\d){6,14}(?!\w)")
_KEYPAD = re.compile(
    r"""(?P<key>["']?\b(?:digits|dtmf|keys|pressed)\b["']?\s*[:=]\s*["']?)[0-9*#wW ,]+""",
    re.IGNORECASE,
)
_KEYPAD_KEYS = ("digits", "dtmf", "keys", "pressed")
_KEYPAD_ATTRIBUTE = re.compile(r"digits|dtmf", re.IGNORECASE)
_SECRET_QUERY_KEYS = frozenset({"password", "pass", "secret", "token"})


class Redactor:
    """Scrubs text by the rules of the module; `sensitive` adds patterns of its own."""

    def __init__(self, sensitive: Iterable[str] = ()) -> None:
        patterns = sorted(set(sensitive))
        self.sensitive = tuple(patterns)
        self._sensitive = [re.compile(pattern) for pattern in patterns]

    def text(self, value: str) -> str:
        """`value` with every number, keypad entry and sensitive match replaced."""
        if not value:
            return value
        scrubbed = _NUMBER.sub(NUMBER, value)
        lowered = scrubbed.lower()
        if any(key in lowered for key in _KEYPAD_KEYS):  # the cheap test first
            scrubbed = _KEYPAD.sub(lambda match: match["key"] + DIGITS, scrubbed)
        for pattern in self._sensitive:
            scrubbed = pattern.sub(REDACTED, scrubbed)
        return scrubbed

    def attribute(self, key: str, value: AttributeValue) -> AttributeValue:
        """A span attribute's value, scrubbed (numbers other than strings stay: counts,
        durations)."""
        if _KEYPAD_ATTRIBUTE.search(key) and not isinstance(value, bool):
            return DIGITS
        return self.text(value) if isinstance(value, str) else value


def redact_logs(redactor: Redactor) -> Callable[[], None]:
    """Scrub every log record made from now on; returns the undo."""
    previous = logging.getLogRecordFactory()

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = previous(*args, **kwargs)
        try:
            message = record.getMessage()
        except (TypeError, ValueError):  # a malformed call: logging reports it as it would
            return record
        scrubbed = redactor.text(message)
        arguments = record.args
        if isinstance(arguments, tuple) and all(isinstance(a, _PLAIN) for a in arguments):
            if scrubbed != message:  # kept as arguments: formatters may read them
                _scrub_arguments(record, arguments, redactor, scrubbed)
        elif arguments or scrubbed != message:  # frozen: an object could say more later
            record.msg, record.args = scrubbed, None
        return record

    logging.setLogRecordFactory(factory)

    def undo() -> None:
        if logging.getLogRecordFactory() is factory:
            logging.setLogRecordFactory(previous)

    return undo


_PLAIN = (str, int, float, type(None))


def _scrub_arguments(
    record: logging.LogRecord, arguments: tuple[Any, ...], redactor: Redactor, scrubbed: str
) -> None:
    """Scrub a record's plain `arguments` one by one, so that formatters which read them
    (uvicorn's access log unpacks its five) still can; frozen into `scrubbed` when that
    does not give the same message (a number split over two arguments, or an int)."""
    record.args = tuple(redactor.text(a) if isinstance(a, str) else a for a in arguments)
    try:
        if record.getMessage() == scrubbed:
            return
    except (TypeError, ValueError):
        pass
    record.msg, record.args = scrubbed, None


def without_credentials(url: str) -> str:
    """`url` with its password replaced by `[redacted]`, wherever the URL carries it
    (`redis://user:secret@host`, `redis://:secret@host`, `?password=secret`); the user name,
    host and path stay, so a message still says where. Text that is not a URL is returned as
    it is."""
    try:
        parts = urlsplit(url)
    except ValueError:  # not a URL at all (a bad IPv6 literal): nothing to find in it
        return url
    shown = url
    user, at, host = parts.netloc.rpartition("@")
    if at and ":" in user:
        netloc = f"{user.partition(':')[0]}:{REDACTED}@{host}"
        shown = shown.replace(parts.netloc, netloc, 1)
    pairs = parse_qsl(parts.query, keep_blank_values=True)
    if any(key.lower() in _SECRET_QUERY_KEYS for key, _ in pairs):
        query = urlencode(
            [(k, REDACTED if k.lower() in _SECRET_QUERY_KEYS else v) for k, v in pairs],
            safe="[]",
        )
        # String surgery, not urlunsplit: that would turn "unix:///path" into "unix:/path".
        before = shown.partition("?")[0]
        fragment = f"#{parts.fragment}" if parts.fragment else ""
        shown = f"{before}?{query}{fragment}"
    return shown
