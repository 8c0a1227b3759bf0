"""Voice stacks: the named ways to run a desk's calls, and the one value a call starts from.

A voice stack turns a `CallSpec` (the hub, the desk, the room, the transport, how the call
continues an earlier one) into a started `VoiceSession`. voicehub registers three:

- `offline`: the pipeline engine on the embedded models (Silero or WebRTC VAD, Whisper or
  PocketSphinx, Piper or eSpeak NG), no key, no network;
- `deepgram`: the pipeline engine with Deepgram recognizing and/or speaking, the embedded
  models for the rest;
- `openai-realtime`: the OpenAI Realtime speech-to-speech model.

A desk runs on the stack its `[voice]` table names (`stack`, else the built-in one `engine`,
`stt` and `tts` choose). A Python package adds a stack under an entry point of the group
`voicehub.voice_stacks` (the name a desk gives; the object a callable that returns the
stack), or a program passes its own `VoiceStacks` to `create_app`:

    stacks = default_voice_stacks()
    stacks.register("acme", AcmeStack())
    stacks.check(desk)                      # what keeps its calls from starting (no I/O)
    await stacks.prepare(desks.values())    # once at start-up: models, key checks
    session = await stacks.start(await CallSpec.for_room(hub, desk, room_id, transport))
    await stacks.aclose()

`VoiceStacks` is a `VoiceStack` itself, so whatever runs calls (`CallLifecycle`) takes one
stack: the registry, or a single stack that serves every desk (the tests' scripted one).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Protocol

from voicehub.desks.sections import BUILTIN_STACKS
from voicehub.errors import ConfigError

if TYPE_CHECKING:
    from voicehub.desks.call_resume import CallResume
    from voicehub.desks.desk import Desk
    from voicehub.hub import Hub
    from voicehub.voice.engine.latency import TurnObserver
    from voicehub.voice.session import VoiceSession
    from voicehub.voice.transport import CallTransport

__all__ = [
    "ENTRY_POINT_GROUP",
    "CallSpec",
    "TurnObserverSource",
    "VoiceStack",
    "VoiceStacks",
    "default_voice_stacks",
    "room_exists",
]

log = logging.getLogger("voicehub.desks")

ENTRY_POINT_GROUP = "voicehub.voice_stacks"
"""Where installed packages register voice stacks: name = `module:callable`."""


@dataclass(frozen=True, slots=True)
class CallSpec:
    """One call to start: everything a voice stack is given.

    `reopened`: the conversation's room existed before this call (a caller calling again):
    no greeting. `resume`: the call goes on from one another instance (or this one) lost
    or handed over; the call lifecycle speaks its words itself. `turn_observer` receives
    each answered turn's latency (metrics, traces)."""

    hub: Hub
    desk: Desk
    room_id: str
    transport: CallTransport
    reopened: bool = False
    resume: CallResume | None = None
    turn_observer: TurnObserver | None = None

    @classmethod
    async def for_room(
        cls,
        hub: Hub,
        desk: Desk,
        room_id: str,
        transport: CallTransport,
        *,
        resume: CallResume | None = None,
        turn_observer: TurnObserver | None = None,
    ) -> CallSpec:
        """The spec of a call in `room_id`, `reopened` when the room exists already."""
        return cls(
            hub,
            desk,
            room_id,
            transport,
            reopened=await room_exists(hub, room_id),
            resume=resume,
            turn_observer=turn_observer,
        )

    @property
    def greeting(self) -> str | None:
        """What the agent says first: the desk's greeting on a new conversation only."""
        return None if self.reopened else self.desk.greeting

    @property
    def where(self) -> str:
        """The desk file (or the desk's name), for messages."""
        return str(self.desk.config.source or f"desk {self.desk.name!r}")


async def room_exists(hub: Hub, room_id: str) -> bool:
    """Whether the conversation of `room_id` has been had before (its room is loaded, or
    kept in the store): a call to it is a caller calling again."""
    return room_id in hub.rooms or await hub.store.get_room(room_id) is not None


class VoiceStack(Protocol):
    """One way to run desks' calls (see the module)."""

    def check(self, desk: Desk) -> list[str]:
        """Why `desk`'s calls cannot start on this stack, one message per problem naming
        the desk file (none: they can). No I/O: what `prepare` found out counts too."""
        ...

    async def prepare(self, desks: Sequence[Desk]) -> None:
        """Once at start-up (and for desks reloaded later): load what their calls need and
        check their keys, so the first caller does not wait."""
        ...

    async def start(self, call: CallSpec) -> VoiceSession:
        """Open (or reopen) the call's room with the desk's call orchestration and return
        its started session; ConfigError when `check` has a problem with the desk."""
        ...

    async def aclose(self) -> None:
        """Release what `prepare` loaded (the process is ending)."""
        ...


class TurnObserverSource(Protocol):
    """Gives each call's session the observer of its turns' latency (metrics, traces)."""

    def turn_observer(self, desk: str, transport: str, room_id: str) -> TurnObserver | None: ...


class VoiceStacks:
    """The registered voice stacks by name; runs each desk's calls on the one it names."""

    def __init__(self, stacks: Mapping[str, VoiceStack] | None = None) -> None:
        self._stacks: dict[str, VoiceStack] = {}
        self._broken: dict[str, str] = {}  # name -> why its entry point did not load
        for name, stack in (stacks or {}).items():
            self.register(name, stack)

    @property
    def names(self) -> list[str]:
        return sorted(self._stacks)

    def register(self, name: str, stack: VoiceStack) -> None:
        """Add `stack` under `name` (the name desks give in `[voice] stack`)."""
        if name in self._stacks:
            raise ConfigError(f"a voice stack named {name!r} is registered already")
        self._stacks[name] = stack
        self._broken.pop(name, None)

    def load_entry_points(self) -> None:
        """Register the stacks of installed packages (`voicehub.voice_stacks`). One that
        fails to load is logged and named to the desks that ask for it; the rest serve."""
        for point in entry_points(group=ENTRY_POINT_GROUP):
            if point.name in self._stacks:
                log.warning(
                    "voice stack %r of %s ignored: the name is taken", point.name, point.value
                )
                continue
            try:
                stack = point.load()()
            except Exception as exc:
                why = f"its entry point {point.value!r} failed: {type(exc).__name__}: {exc}"
                log.error("voice stack %r not loaded: %s", point.name, why)
                self._broken[point.name] = why
                continue
            self.register(point.name, stack)

    def stack_of(self, desk: Desk) -> VoiceStack:
        """The stack `desk`'s calls run on; ConfigError naming the desk file when the name
        it gives is not registered."""
        name = desk.config.voice.stack_name
        stack = self._stacks.get(name)
        if stack is not None:
            return stack
        where = desk.config.source or f"desk {desk.name!r}"
        why = self._broken.get(name) or (
            f"not registered (stacks: {', '.join(self.names) or 'none'}; a package adds one "
            f"under the entry point group {ENTRY_POINT_GROUP!r})"
        )
        raise ConfigError(f"{where}: voice: stack {name!r} is {why}")

    def check(self, desk: Desk) -> list[str]:
        try:
            stack = self.stack_of(desk)
        except ConfigError as exc:
            return [str(exc)]
        return stack.check(desk)

    async def prepare(self, desks: Sequence[Desk]) -> None:
        """Each stack prepares its own desks (a desk on no registered stack is skipped:
        `check` names it)."""
        by_stack: dict[str, list[Desk]] = {}
        for desk in desks:
            if desk.config.voice.stack_name in self._stacks:
                by_stack.setdefault(desk.config.voice.stack_name, []).append(desk)
        for name, own in by_stack.items():
            await self._stacks[name].prepare(own)

    async def start(self, call: CallSpec) -> VoiceSession:
        return await self.stack_of(call.desk).start(call)

    async def aclose(self) -> None:
        for stack in self._stacks.values():
            await stack.aclose()


def default_voice_stacks(*, batch_vad: bool = True, installed: bool = True) -> VoiceStacks:
    """The built-in stacks (`offline`, `deepgram`, `openai-realtime`; the two pipeline ones
    share one process's models), then those installed packages register.

    `batch_vad`: every call's Silero VAD runs batched with the other calls' (one ONNX run
    per 20 ms tick); False gives each call its own inferences."""
    from voicehub.desks.deepgram_stack import DeepgramStack
    from voicehub.desks.offline_stack import OfflineStack, PipelineResources
    from voicehub.desks.realtime_call import RealtimeStack

    shared = PipelineResources(batch_vad=batch_vad)
    builtin: dict[str, VoiceStack] = {
        "offline": OfflineStack(shared),
        "deepgram": DeepgramStack(shared),
        "openai-realtime": RealtimeStack(),
    }
    assert tuple(builtin) == BUILTIN_STACKS
    stacks = VoiceStacks(builtin)
    if installed:
        stacks.load_entry_points()
    return stacks
