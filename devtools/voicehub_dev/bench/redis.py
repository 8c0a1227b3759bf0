"""The Redis store for `voicehub bench --store redis`: the server at $VOICEHUB_STORE (default
redis://127.0.0.1:6379/0), each figure under a key prefix of its own."""

from __future__ import annotations

import os
import uuid

from voicehub.core.store.redis import RedisStore


def bench_redis_url() -> str:
    return os.environ.get("VOICEHUB_STORE") or "redis://127.0.0.1:6379/0"


def bench_redis_store(name: str) -> RedisStore:
    return RedisStore(bench_redis_url(), prefix=f"bench-{name}-{uuid.uuid4().hex[:8]}")
