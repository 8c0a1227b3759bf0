"""What desk authors need in their own tests, and nothing else of voicehub's test tooling.

    from voicehub.testing import call_desk

    async def test_the_desk_starts_research() -> None:
        async with call_desk("channels/research.toml") as call:
            await call.caller_types("could you research heat pumps")
            await call.agent_said("analysts")

- `call_desk` / `DeskCall`: a desk on one call, as the server runs it, on an in-memory
  line; the caller types or speaks turns, the test waits for what the agents said.
- `MemoryTransport`: that line (a `CallTransport` that records what the session sends
  and confirms playout at once, on a clock, or when told), for tests of your own voice
  stack or session.

A desk's conversations as a whole (several calls, results held between them) are easier
to write as scenario files for `voicehub test` (docs/scenarios.md).
"""

from voicehub.testing.desk_call import DeskCall, call_desk
from voicehub.testing.transport import AckMode, MemoryTransport

__all__ = ["AckMode", "DeskCall", "MemoryTransport", "call_desk"]
