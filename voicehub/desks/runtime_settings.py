"""The settings every process that runs desks shares (`voicehub serve`, each `voicehub
worker` job): the store, and this process's place among the instances sharing it.

`ServerSettings` and `WorkerSettings` extend `RuntimeSettings`, so both read and check these
alike; `voicehub.desks.runtime.ProcessRuntime` is built from them.
"""

from __future__ import annotations

from typing import Self

from pydantic import ConfigDict, Field, model_validator

from voicehub.core.store.choice import StoreChoice

__all__ = ["RUNTIME_VARIABLES", "RuntimeSettings"]

RUNTIME_VARIABLES = {
    "instance_id": "VOICEHUB_INSTANCE_ID",
    "heartbeat_interval": "VOICEHUB_HEARTBEAT_INTERVAL",
    "instance_timeout": "VOICEHUB_INSTANCE_TIMEOUT",
    "delivery_lease": "VOICEHUB_DELIVERY_LEASE",
    "max_load": "VOICEHUB_MAX_LOAD",
}
"""The variable each field is read from, for both commands."""


class RuntimeSettings(StoreChoice):
    """Several instances on one store (see `voicehub.desks.instance_rooms`): this one's name
    (default: made up at start), how often it writes its heartbeat, after how long without
    one an instance counts as lost (its tasks and calls are taken over), and how long a claim
    to speak a result lasts without renewal (a killed speaker's result is free again after,
    sooner when its calls moved or its heartbeat says it is gone).

    `max_load`: above this load (see `voicehub.desks.call_admission`; 1.0 is a process that
    cannot keep up) new calls are refused with a busy answer; calls already admitted always
    go on. None: no limit."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    instance_id: str | None = Field(default=None, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
    heartbeat_interval: float = Field(default=2.0, gt=0, allow_inf_nan=False)
    instance_timeout: float = Field(default=10.0, gt=0, allow_inf_nan=False)
    delivery_lease: float = Field(default=15.0, gt=0, allow_inf_nan=False)
    max_load: float | None = Field(default=None, gt=0, allow_inf_nan=False)

    @model_validator(mode="after")
    def _timeout_after_beats(self) -> Self:
        if self.instance_timeout <= self.heartbeat_interval:
            raise ValueError(
                f"instance_timeout ({self.instance_timeout:g} s) must be longer than "
                f"heartbeat_interval ({self.heartbeat_interval:g} s), or live instances "
                "would count as lost between two beats"
            )
        return self
