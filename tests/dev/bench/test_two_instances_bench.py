"""The two-instance delivery bench on a short run: both processes deliver every result."""

from __future__ import annotations

import pytest

from voicehub_dev.bench.two_instances import CROSS_EVERY, _deliverer, _owner, per_second
from voicehub_dev.fakes.redis_server import RedisServer, redis_server

# real-time end to end: `make test` runs it, `make check` does not
pytestmark = pytest.mark.realtime

__all__ = ["redis_server"]


def test_every_fourth_result_comes_from_the_other_instance() -> None:
    pairs = [(room, round_) for round_ in range(2) for room in range(10)]
    cross = [p for p in pairs if _deliverer(p[0], p[1], 10) != _owner(p[0])]
    assert len(cross) == len(pairs) // CROSS_EVERY


def test_two_instance_processes_deliver_everything(redis_server: RedisServer) -> None:
    # per_second returns only once both processes saw every injection they expected
    assert per_second(redis_server.url, rooms=20, per_room=2) > 0
