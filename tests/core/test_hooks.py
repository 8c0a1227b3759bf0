"""Hooks around room events: order, blocking, rewriting, background observers, scope."""

from __future__ import annotations

import logging

import pytest

from voicehub.core.channels import Channel
from voicehub.core.events import Event, message
from voicehub.core.hooks import HookContext, HookExecution, HookResult, HookTrigger
from voicehub.core.room import Room
from voicehub.hub import Hub


class Recorder(Channel):
    def __init__(self, channel_id: str = "rec") -> None:
        super().__init__(channel_id)
        self.events: list[Event] = []

    async def on_event(self, event: Event, room: Room) -> None:
        self.events.append(event)


async def _room(hub: Hub, room_id: str = "room") -> tuple[Room, Recorder]:
    room = await hub.create_room(room_id)
    recorder = Recorder()
    await room.attach(recorder)
    return room, recorder


async def test_sync_hooks_run_lowest_priority_first() -> None:
    hub = Hub()
    order: list[str] = []

    def recording(name: str) -> object:
        async def hook(event: Event, ctx: HookContext) -> None:
            order.append(name)

        return hook

    hub.hook(HookTrigger.BEFORE_BROADCAST, priority=10)(recording("ten"))  # type: ignore[arg-type]
    hub.hook(HookTrigger.BEFORE_BROADCAST, priority=-100)(recording("minus"))  # type: ignore[arg-type]
    hub.hook(HookTrigger.BEFORE_BROADCAST, priority=0)(recording("zero-a"))  # type: ignore[arg-type]
    hub.hook(HookTrigger.BEFORE_BROADCAST, priority=0)(recording("zero-b"))  # type: ignore[arg-type]
    room, _ = await _room(hub)
    hub.hook(HookTrigger.BEFORE_BROADCAST, priority=5, room_id=room.id)(recording("room"))  # type: ignore[arg-type]

    await room.post(message("hi"))
    # Equal priorities keep registration order; room hooks interleave by priority.
    assert order == ["minus", "zero-a", "zero-b", "room", "ten"]


async def test_sync_hook_that_blocks_keeps_the_event_out() -> None:
    hub = Hub()
    seen_after: list[Event] = []

    @hub.hook(HookTrigger.BEFORE_BROADCAST)
    async def no_secrets(event: Event, ctx: HookContext) -> HookResult:
        if "password" in event.text:
            return HookResult.block("contains a password")
        return HookResult.allow()

    @hub.hook(HookTrigger.AFTER_BROADCAST)
    async def after(event: Event, ctx: HookContext) -> None:
        seen_after.append(event)

    room, recorder = await _room(hub)
    assert await room.post(message("my password is hunter2")) is None
    kept = await room.post(message("hello"))

    assert kept is not None
    assert kept.seq == 1  # the blocked event used no number
    assert [e.text for e in await hub.history(room.id)] == ["hello"]
    assert [e.text for e in recorder.events] == ["hello"]
    assert [e.text for e in seen_after] == ["hello"]


async def test_a_block_stops_later_sync_hooks() -> None:
    hub = Hub()
    ran: list[str] = []

    @hub.hook(HookTrigger.BEFORE_BROADCAST, priority=1)
    async def blocker(event: Event, ctx: HookContext) -> HookResult:
        ran.append("blocker")
        return HookResult.block("no")

    @hub.hook(HookTrigger.BEFORE_BROADCAST, priority=2)
    async def later(event: Event, ctx: HookContext) -> None:
        ran.append("later")

    room, _ = await _room(hub)
    assert await room.post(message("x")) is None
    assert ran == ["blocker"]


async def test_sync_hook_that_modifies_stores_the_modified_event() -> None:
    hub = Hub()

    @hub.hook(HookTrigger.BEFORE_BROADCAST, priority=1)
    async def redact(event: Event, ctx: HookContext) -> HookResult:
        return HookResult.allow(
            event.model_copy(update={"text": event.text.replace("4111", "****")})
        )

    @hub.hook(HookTrigger.BEFORE_BROADCAST, priority=2)
    async def tag(event: Event, ctx: HookContext) -> Event:
        # Hooks may also return the replacement event directly; it sees the earlier rewrite.
        return event.with_metadata(redacted="****" in event.text)

    room, recorder = await _room(hub)
    stored = await room.post(message("card 4111"))

    assert stored is not None
    assert stored.text == "card ****"
    assert stored.metadata == {"redacted": True}
    history = await hub.history(room.id)
    assert history == [stored]
    assert recorder.events == [stored]


async def test_async_hook_that_raises_is_logged_and_the_room_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    hub = Hub()
    observed: list[str] = []

    @hub.hook(HookTrigger.AFTER_BROADCAST, execution=HookExecution.ASYNC)
    async def flaky(event: Event, ctx: HookContext) -> None:
        raise ValueError("observer bug")

    @hub.hook(HookTrigger.AFTER_BROADCAST, execution=HookExecution.ASYNC)
    async def fine(event: Event, ctx: HookContext) -> None:
        observed.append(event.text)

    room, recorder = await _room(hub)
    with caplog.at_level(logging.ERROR, logger="voicehub.hooks"):
        await room.post(message("one"))
        await room.post(message("two"))
        await hub.wait_idle()

    assert [e.text for e in recorder.events] == ["one", "two"]
    assert observed == ["one", "two"]
    assert "flaky" in caplog.text
    assert "observer bug" in caplog.text


async def test_async_hook_cannot_block() -> None:
    hub = Hub()

    @hub.hook(HookTrigger.BEFORE_BROADCAST, execution=HookExecution.ASYNC)
    async def tries_to_block(event: Event, ctx: HookContext) -> HookResult:
        return HookResult.block("observers only observe")

    room, _ = await _room(hub)
    assert await room.post(message("x")) is not None
    await hub.wait_idle()


async def test_room_scoped_hook_runs_only_for_its_room() -> None:
    hub = Hub()
    seen: list[tuple[str, str]] = []
    a, _ = await _room(hub, "a")
    b, _ = await _room(hub, "b")

    @hub.hook(HookTrigger.BEFORE_BROADCAST, room_id="a")
    async def only_a(event: Event, ctx: HookContext) -> None:
        seen.append(("a-only", ctx.room_id))

    @hub.hook(HookTrigger.BEFORE_BROADCAST)
    async def everywhere(event: Event, ctx: HookContext) -> None:
        seen.append(("hub", ctx.room_id))

    await a.post(message("x"))
    await b.post(message("y"))
    assert seen == [("a-only", "a"), ("hub", "a"), ("hub", "b")]


async def test_room_scoped_hooks_are_dropped_when_the_room_closes() -> None:
    hub = Hub()
    calls: list[str] = []
    await hub.create_room("a")

    @hub.hook(HookTrigger.BEFORE_BROADCAST, room_id="a")
    async def scoped(event: Event, ctx: HookContext) -> None:
        calls.append(event.text)

    await hub.post("a", message("before"))
    await hub.close_room("a")
    await hub.create_room("a")
    await hub.post("a", message("after"))
    assert calls == ["before"]


async def test_hook_context_names_hub_room_and_trigger() -> None:
    hub = Hub()
    contexts: list[HookContext] = []

    @hub.hook(HookTrigger.AFTER_BROADCAST)
    async def keep(event: Event, ctx: HookContext) -> None:
        contexts.append(ctx)

    room, _ = await _room(hub)
    await room.post(message("x"))
    assert [(c.hub, c.room_id, c.trigger) for c in contexts] == [
        (hub, room.id, HookTrigger.AFTER_BROADCAST)
    ]


async def test_room_lifecycle_hooks_fire() -> None:
    hub = Hub()
    seen: list[tuple[HookTrigger, str]] = []

    @hub.hook(HookTrigger.ON_ROOM_CREATED)
    async def created(event: Event, ctx: HookContext) -> None:
        seen.append((ctx.trigger, ctx.room_id))

    @hub.hook(HookTrigger.ON_ROOM_CLOSED)
    async def closed(event: Event, ctx: HookContext) -> None:
        seen.append((ctx.trigger, ctx.room_id))

    await hub.create_room("a")
    await hub.close_room("a")
    assert seen == [(HookTrigger.ON_ROOM_CREATED, "a"), (HookTrigger.ON_ROOM_CLOSED, "a")]


async def test_removed_hook_no_longer_runs() -> None:
    hub = Hub()
    calls: list[str] = []

    async def counting(event: Event, ctx: HookContext) -> None:
        calls.append(event.text)

    hook = hub.hooks.add(HookTrigger.BEFORE_BROADCAST, counting)
    room, _ = await _room(hub)
    await room.post(message("one"))
    hub.hooks.remove(hook)
    await room.post(message("two"))
    assert calls == ["one"]


async def test_a_raising_sync_hook_is_skipped_and_the_event_goes_on() -> None:
    from voicehub.core.events import message
    from voicehub.core.hooks import HookExecution, HookTrigger
    from voicehub.hub import Hub

    async with Hub() as hub:
        room = await hub.create_room("r", orchestration=None)

        async def broken(event: object, context: HookContext) -> None:
            raise RuntimeError("bug in a hook")

        hub.hooks.add(HookTrigger.BEFORE_BROADCAST, broken, execution=HookExecution.SYNC)
        stored = await room.post(message("hello"))
        assert stored is not None and stored.seq == 1
        assert [e.text for e in await hub.history("r")] == ["hello"]
