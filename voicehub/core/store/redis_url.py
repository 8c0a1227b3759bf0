"""Redis store URLs: a server's (`redis://`, `rediss://`, `unix://`, parsed by redis-py) or a
Sentinel-managed primary's, which redis-py has no URL for:

    redis+sentinel://[[user]:password@]host[:port][,host[:port]...]/service_name[/db][?option=...]

    parse_sentinel_url("redis+sentinel://:pw@10.0.0.5,10.0.0.6:26380/voicehub/1?wait_replicas=1")
    # SentinelURL(sentinels=(('10.0.0.5', 26379), ('10.0.0.6', 26380)), service_name='voicehub',
    #             db=1, username=None, password='pw', ..., wait_replicas=1)

The hosts are the Sentinels (port 26379 unless given; an IPv6 literal in brackets); the
credentials are those of the Redis servers behind them. Options: `sentinel_password` (with
`sentinel_username`), the Sentinels' own credentials when they require them, and
`wait_replicas`: each write is acknowledged only once that many replicas have it (Redis
`WAIT`), so a fail-over to one of them cannot lose it.
`shown_url(url)` is the URL fit for a message: every password in it `[redacted]`. A `?` in a
password must be written `%3F` (it starts the options); `@`, `:` and `/` need no escaping.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import parse_qsl, unquote, urlencode

from voicehub.core.redaction import REDACTED, without_credentials

__all__ = [
    "DEFAULT_SENTINEL_PORT",
    "SENTINEL_SCHEME",
    "SentinelURL",
    "is_sentinel_url",
    "parse_sentinel_url",
    "shown_url",
]

SENTINEL_SCHEME = "redis+sentinel://"
DEFAULT_SENTINEL_PORT = 26379
_OPTIONS = frozenset({"sentinel_password", "sentinel_username", "wait_replicas"})
_SHOWN_OPTIONS = frozenset({"sentinel_username", "wait_replicas"})  # every other value is redacted
_FORM = "redis+sentinel://[:password@]host[:port][,host[:port]...]/service_name[/db][?option=value]"


@dataclass(frozen=True)
class SentinelURL:
    """What a `redis+sentinel://` URL says (the module shows its form)."""

    sentinels: tuple[tuple[str, int], ...]
    service_name: str
    db: int = 0
    username: str | None = None
    password: str | None = None
    sentinel_username: str | None = None
    sentinel_password: str | None = None
    wait_replicas: int = 0


def is_sentinel_url(url: str) -> bool:
    return url.lower().startswith(SENTINEL_SCHEME)


def _split(url: str) -> tuple[str, str, str, str, str]:
    """(scheme, userinfo, hosts, path, query) of a Sentinel URL, split as the parser reads
    it: the query from the first `?`, the user info up to the last `@` before it (so an `@`
    or `/` in a password needs no escaping), the path from the hosts' first `/` on."""
    scheme, rest = url[: len(SENTINEL_SCHEME)], url[len(SENTINEL_SCHEME) :]
    rest, _, query = rest.partition("?")
    userinfo, _, location = rest.rpartition("@")
    hosts, slash, path = location.partition("/")
    return scheme, userinfo, hosts, slash + path, query


def shown_url(url: str) -> str:
    """`url` with its passwords redacted: the servers' (`without_credentials`) and, in a
    Sentinel URL, the Sentinels' `sentinel_password` (split as the parser splits it, so
    every password it would use is covered, whatever else is wrong with the URL)."""
    if not is_sentinel_url(url):
        return without_credentials(url)
    scheme, userinfo, hosts, path, query = _split(url)
    shown = scheme
    if userinfo:
        user, colon, _ = userinfo.partition(":")
        shown += f"{user}:{REDACTED}@" if colon else f"{user}@"
    shown += hosts + path
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        kept = [(k, v if k.lower() in _SHOWN_OPTIONS else REDACTED) for k, v in pairs]
        shown += f"?{urlencode(kept, safe='[]')}"
    return shown


def parse_sentinel_url(url: str) -> SentinelURL:
    """The parts of a `redis+sentinel://` URL; `ValueError` naming what is wrong (the URL
    shown without its passwords) otherwise."""
    shown = shown_url(url)

    def bad(what: str) -> ValueError:
        return ValueError(f"{shown!r} is not a Sentinel store URL: {what} (the form is {_FORM})")

    if not is_sentinel_url(url):
        raise bad(f"it does not start with {SENTINEL_SCHEME}")
    _, userinfo, hosts, path, query = _split(url)
    username = password = None
    if userinfo:
        user, colon, secret = userinfo.partition(":")
        username = unquote(user) or None
        password = unquote(secret) if colon else None
    sentinels = tuple(_host_port(part, bad) for part in hosts.split(","))
    parts = [p for p in path[1:].split("/") if p]
    if not parts:
        raise bad("it names no service (the Sentinels' name of the primary, after the hosts)")
    if len(parts) > 2:
        raise bad(f"{'/'.join(parts[2:])!r} follows the database number")
    db = 0
    if len(parts) == 2:
        if not parts[1].isdigit():
            raise bad(f"the database {parts[1]!r} is not a number")
        db = int(parts[1])
    options: dict[str, str] = {}
    for key, value in parse_qsl(query, keep_blank_values=True):
        name = key.lower()
        if name not in _OPTIONS:
            known = ", ".join(sorted(_OPTIONS))
            raise bad(
                f"unknown option {key if name.isidentifier() else '(unreadable)'!r} "
                f"(known: {known})"
            )
        if name in options:
            raise bad(f"the option {name} is given twice")
        options[name] = value
    if options.get("sentinel_username") and not options.get("sentinel_password"):
        raise bad("sentinel_username is given without sentinel_password")
    wait = options.get("wait_replicas", "0")
    if not wait.isdigit():
        raise bad(f"wait_replicas={wait!r} is not a number of replicas")
    return SentinelURL(
        sentinels=sentinels,
        service_name=unquote(parts[0]),
        db=db,
        username=username,
        password=password,
        sentinel_username=options.get("sentinel_username") or None,
        sentinel_password=options.get("sentinel_password") or None,
        wait_replicas=int(wait),
    )


def _host_port(part: str, bad: Callable[[str], ValueError]) -> tuple[str, int]:
    if part.startswith("["):  # an IPv6 literal: [::1]:26379
        host, bracket, after = part[1:].partition("]")
        if not bracket or (after and not after.startswith(":")):
            raise bad(f"the Sentinel address {part!r} is not [ipv6]:port")
        port_text = after[1:]
    else:
        host, _, port_text = part.partition(":")
    if not host:
        raise bad(
            f"a Sentinel address is empty in {part!r}" if part else "a Sentinel host is empty"
        )
    if not port_text:
        return host, DEFAULT_SENTINEL_PORT
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise bad(f"the port {port_text!r} of Sentinel {host!r} is not a port number")
    return host, int(port_text)
