"""WebRTC on 127.0.0.1 in tests: aioice leaves the loopback address out of its host
candidates (a real deployment never wants it), so both peers here would have no candidate
pair. `loopback_ice()` makes it offer 127.0.0.1 only, for the duration of a test module."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest


@contextlib.contextmanager
def loopback_ice() -> Iterator[None]:
    ice = pytest.importorskip("aioice.ice")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ice, "get_host_addresses", lambda use_ipv4, use_ipv6: ["127.0.0.1"])
        yield
