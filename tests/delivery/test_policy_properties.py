"""Property tests: the policy driven through random call timelines on a manual clock.

A small discrete-event simulation plays a call: caller turns (with barge-ins over agent
speech), agent thinking and replies, playout confirmations arriving late, queued replies,
dropped and resumed sessions, and results arriving at random times with random
strategies. It feeds a real `VoiceActivity` and acts like the delivery driver: after
every event and at every `WakeAt` time it calls `decide` (unless an injection is in
flight) and performs what it says. A delivery makes the agent speak for a while, then the
transport confirms playout; a barge-in or a dropped session interrupts it and the items
go back to the queue.

Times sit on a 0.25 s grid so every sum is exact in binary floating point.
"""

from __future__ import annotations

import heapq
import itertools
from dataclasses import dataclass, field

from hypothesis import given, settings
from hypothesis import strategies as st

from voicehub.delivery.policy import (
    Deliver,
    DeliveryStrategy,
    Immediate,
    PendingItem,
    Queued,
    WaitForChange,
    WaitForIdle,
    WakeAt,
    decide,
)
from voicehub.voice.activity import ActivitySnapshot, VoiceActivity

TICK = 0.25
MAX_EVENTS = 20_000  # a policy that spins (WakeAt now, or re-delivering) trips this


class ManualClock:
    """The simulation sets the time; nothing sleeps."""

    def __init__(self) -> None:
        self.time = 0.0

    def now(self) -> float:
        return self.time

    async def sleep(self, seconds: float) -> None:  # pragma: no cover - unused
        raise AssertionError("the simulation never sleeps")


@dataclass(frozen=True)
class Arrival:
    item: PendingItem
    speak: float  # how long the agent speaks this delivery
    lag: float  # how late the transport confirms its playout


@dataclass(frozen=True)
class Scenario:
    turns: list[tuple[float, float, float, float, float]]  # start, speak, think, reply, lag
    queued_replies: list[tuple[float, float]]  # start, duration
    session_gaps: list[tuple[float, float]]  # start, duration
    arrivals: list[Arrival]


def grid(low: int, high: int) -> st.SearchStrategy[float]:
    return st.integers(low, high).map(lambda n: n * TICK)


STRATEGIES: st.SearchStrategy[DeliveryStrategy] = st.one_of(
    st.just(Immediate()),
    st.builds(WaitForIdle, buffer=grid(0, 12), max_wait=st.none() | grid(0, 24)),
    st.builds(Queued, buffer=grid(0, 12)),
)


# Built once: strategies built inside a composite are re-validated on every draw.
TURNS = st.lists(
    st.tuples(grid(0, 160), grid(1, 16), grid(0, 6), grid(0, 16), grid(0, 8)), max_size=10
)
QUEUED_REPLIES = st.lists(st.tuples(grid(0, 160), grid(1, 8)), max_size=3)
SESSION_GAPS = st.lists(st.tuples(grid(0, 160), grid(1, 24)), max_size=2)
RESULTS = st.lists(
    st.tuples(
        st.one_of(grid(0, 4), grid(0, 4), grid(0, 60)),  # gap since the previous result
        st.booleans(),  # use the desk's strategy (bursts of alike results make batches)
        STRATEGIES,
        grid(1, 8),  # speech length
        grid(0, 6),  # playout confirmation lag
    ),
    max_size=10,
)


@st.composite
def scenarios(draw: st.DrawFn) -> Scenario:
    turns, queued_replies, session_gaps = draw(TURNS), draw(QUEUED_REPLIES), draw(SESSION_GAPS)
    desk_strategy = draw(STRATEGIES)
    arrivals = []
    at = 0.0
    for n, (gap, use_desk, strategy, speak, lag) in enumerate(draw(RESULTS)):
        at += gap
        chosen = desk_strategy if use_desk else strategy
        arrivals.append(Arrival(PendingItem(f"r{n}", at, chosen), speak, lag))
    return Scenario(turns, queued_replies, session_gaps, arrivals)


@dataclass
class InFlight:
    speech_id: str
    items: tuple[PendingItem, ...]


@dataclass
class Simulation:
    scenario: Scenario
    clock: ManualClock = field(default_factory=ManualClock)
    queue: list[tuple[float, int, str, object]] = field(default_factory=list)
    seq: itertools.count[int] = field(default_factory=itertools.count)
    pending: list[PendingItem] = field(default_factory=list)
    in_flight: InFlight | None = None
    completed: dict[str, float] = field(default_factory=dict)
    conversation_speeches: set[str] = field(default_factory=set)
    idle_start: float | None = 0.0  # independent record of when idle-and-live began
    deliveries: int = 0

    def __post_init__(self) -> None:
        self.activity = VoiceActivity(self.clock, session_live=True)
        for n, (start, speak, think, reply, lag) in enumerate(self.scenario.turns):
            stop = start + speak
            self.at(start, "user_start")
            self.at(stop, "user_stop")
            self.at(stop, "awaiting", True)
            self.at(stop, "think_start")
            answer = stop + think
            self.at(answer, "think_stop")
            self.at(answer, "awaiting", False)
            if reply:
                speech_id = f"turn{n}"
                self.at(answer, "speech_start", speech_id)
                self.at(answer + reply, "speech_finish", speech_id)
                self.at(answer + reply + lag, "confirm", speech_id)
        for start, duration in self.scenario.queued_replies:
            self.at(start, "reply_queued")
            self.at(start + duration, "reply_dequeued")
        for start, duration in self.scenario.session_gaps:
            self.at(start, "detach")
            self.at(start + duration, "attach")
        for arrival in self.scenario.arrivals:
            self.at(arrival.item.arrived_at, "arrive", arrival)
        self.speak = {a.item.delivery_id: a for a in self.scenario.arrivals}

    def at(self, time: float, kind: str, payload: object = None) -> None:
        heapq.heappush(self.queue, (time, next(self.seq), kind, payload))

    # -- running ----------------------------------------------------------------------

    def run(self) -> None:
        for _ in range(MAX_EVENTS):
            if not self.queue:
                return
            time, _, kind, payload = heapq.heappop(self.queue)
            assert time >= self.clock.time
            self.clock.time = time
            self.handle(kind, payload)
            self.observe()
            if self.in_flight is None and self.pending:
                self.drive()
        raise AssertionError("the simulation did not settle: the policy spins")

    def handle(self, kind: str, payload: object) -> None:
        activity = self.activity
        if kind == "user_start":
            activity.user_speech_started()
            self.barge_in()
        elif kind == "user_stop":
            activity.user_speech_stopped()
        elif kind == "awaiting":
            activity.user_turn_awaiting_answer(bool(payload))
        elif kind == "think_start":
            activity.agent_thinking_started()
        elif kind == "think_stop":
            activity.agent_thinking_finished()
        elif kind == "speech_start":
            self.conversation_speeches.add(str(payload))
            activity.agent_speech_started(str(payload))
        elif kind == "speech_finish":
            self.conversation_speeches.discard(str(payload))
            activity.agent_speech_finished(str(payload), interrupted=False)
        elif kind == "confirm":
            activity.playout_confirmed(str(payload))
        elif kind == "reply_queued":
            activity.reply_queued()
        elif kind == "reply_dequeued":
            activity.reply_dequeued()
        elif kind == "detach":
            activity.session_detached()
            self.conversation_speeches.clear()
            self.requeue()
        elif kind == "attach":
            activity.session_attached()
        elif kind == "arrive":
            assert isinstance(payload, Arrival)
            self.pending.append(payload.item)
        elif kind == "delivery_finish":
            flight = self.in_flight
            if flight is not None and flight.speech_id == payload:
                for item in flight.items:
                    assert item.delivery_id not in self.completed, "delivered twice"
                    self.completed[item.delivery_id] = self.clock.time
                self.in_flight = None
            activity.agent_speech_finished(str(payload), interrupted=False)
        # "wake" needs no handling: the driver just decides again

    def barge_in(self) -> None:
        """The caller talks over the agent: every speech in progress is cut."""
        for speech_id in sorted(self.conversation_speeches):
            self.activity.agent_speech_finished(speech_id, interrupted=True)
        self.conversation_speeches.clear()
        if self.in_flight is not None:
            self.activity.agent_speech_finished(self.in_flight.speech_id, interrupted=True)
            self.requeue()

    def requeue(self) -> None:
        if self.in_flight is not None:
            self.pending.extend(self.in_flight.items)
            self.in_flight = None

    def observe(self) -> None:
        snapshot = self.activity.snapshot()
        idle_live = snapshot.is_idle and snapshot.session_live
        if not idle_live:
            self.idle_start = None
        elif self.idle_start is None:
            self.idle_start = self.clock.time

    # -- the driver, with the properties checked at every decision ---------------------

    def drive(self) -> None:
        now = self.clock.time
        snapshot = self.activity.snapshot()
        action = decide(snapshot, self.pending, now)
        assert decide(snapshot, list(reversed(self.pending)), now) == action, "order matters"
        self.check_progress(snapshot, action)
        if isinstance(action, WakeAt):
            assert action.time > now, f"WakeAt({action.time}) at {now} would spin"
            self.at(action.time, "wake")
        elif isinstance(action, Deliver):
            self.check_delivery(snapshot, action.items)
            self.start(action.items)

    def check_progress(self, snapshot: ActivitySnapshot, action: object) -> None:
        live_and_quiet = snapshot.session_live and not snapshot.user_speaking
        idle_live = self.idle_start is not None
        if live_and_quiet and any(isinstance(i.strategy, Immediate) for i in self.pending):
            assert isinstance(action, Deliver), "an Immediate item was kept waiting"
        if idle_live:
            assert not isinstance(action, WaitForChange), "idle room with work stalls"
            now = self.clock.time
            for item in self.pending:
                strategy = item.strategy
                if (
                    isinstance(strategy, WaitForIdle)
                    and strategy.max_wait is not None
                    and now - item.arrived_at >= strategy.max_wait
                ):
                    assert isinstance(action, Deliver), "max_wait passed in a gap"

    def check_delivery(self, snapshot: ActivitySnapshot, items: tuple[PendingItem, ...]) -> None:
        now = self.clock.time
        assert items, "empty delivery"
        assert not snapshot.user_speaking, "started over the caller"
        assert snapshot.session_live, "started with no live session"
        ids = [i.delivery_id for i in items]
        assert len(set(ids)) == len(ids)
        assert all(i in self.pending for i in items), "delivered something not pending"
        assert not set(ids) & set(self.completed), "delivered twice"
        first = min(items, key=lambda i: (i.arrived_at, i.delivery_id))
        for other in self.pending:
            if isinstance(other.strategy, Immediate) and other not in items:
                assert (other.arrived_at, other.delivery_id) > (
                    first.arrived_at,
                    first.delivery_id,
                ), "an older Immediate item was overtaken"
        strategy = items[0].strategy
        if isinstance(strategy, Immediate):
            assert len(items) == 1
        elif isinstance(strategy, WaitForIdle):
            assert len(items) == 1
            assert self.idle_start is not None, "WaitForIdle spoke in a busy room"
            waited = now - self.idle_start
            expired = strategy.max_wait is not None and now - first.arrived_at >= strategy.max_wait
            assert waited >= strategy.buffer or expired, (
                f"spoke after {waited}s of idle, buffer {strategy.buffer}"
            )
        else:
            self.check_batch(items)

    def check_batch(self, items: tuple[PendingItem, ...]) -> None:
        now = self.clock.time
        assert self.idle_start is not None, "a Queued batch spoke in a busy room"
        assert all(isinstance(i.strategy, Queued) for i in items), "batch mixes strategies"
        members = sorted(items, key=lambda i: (i.arrived_at, i.delivery_id))
        assert list(items) == members, "batch not in arrival order"

        def window(item: PendingItem) -> float:
            assert isinstance(item.strategy, Queued)
            return item.arrived_at + item.strategy.buffer

        closes = window(members[0])
        for member in members[1:]:
            assert member.arrived_at < closes, "batch joins results a full buffer apart"
            closes = max(closes, window(member))
        assert now >= closes, "batch spoken before it closed"
        # Maximal: pending Queued items outside the batch belong to other batches.
        first_key = (members[0].arrived_at, members[0].delivery_id)
        for other in self.pending:
            if other in items or not isinstance(other.strategy, Queued):
                continue
            if (other.arrived_at, other.delivery_id) < first_key:
                assert window(other) <= members[0].arrived_at, "batch split (before)"
            else:
                assert other.arrived_at >= closes, "batch split (after)"

    def start(self, items: tuple[PendingItem, ...]) -> None:
        """Inject: cut the agent's own speech (only Immediate can find one), then speak."""
        for speech_id in sorted(self.conversation_speeches):
            self.activity.agent_speech_finished(speech_id, interrupted=True)
        self.conversation_speeches.clear()
        for item in items:
            self.pending.remove(item)
        self.deliveries += 1
        speech_id = f"delivery{self.deliveries}"
        self.in_flight = InFlight(speech_id, items)
        self.activity.agent_speech_started(speech_id)
        speak = max(self.speak[i.delivery_id].speak for i in items)
        lag = max(self.speak[i.delivery_id].lag for i in items)
        self.at(self.clock.time + speak, "delivery_finish", speech_id)
        self.at(self.clock.time + speak + lag, "confirm", speech_id)
        self.observe()


PROPERTY_SETTINGS = settings(derandomize=True, database=None, max_examples=400, deadline=None)


@PROPERTY_SETTINGS
@given(scenarios())
def test_random_calls_keep_every_delivery_promise(scenario: Scenario) -> None:
    simulation = Simulation(scenario)
    simulation.run()
    # Once the call goes quiet for good, everything is spoken, exactly once.
    assert simulation.in_flight is None
    assert simulation.pending == []
    assert sorted(simulation.completed) == sorted(a.item.delivery_id for a in scenario.arrivals)
    assert simulation.activity.is_idle and simulation.activity.session_live


@PROPERTY_SETTINGS
@given(grid(0, 40), STRATEGIES, grid(1, 8), grid(0, 6))
def test_a_result_in_a_silent_room_goes_exactly_when_its_rule_allows(
    arrived_at: float, strategy: DeliveryStrategy, speak: float, lag: float
) -> None:
    """Silent live room, idle since 0: the start time follows from the strategy alone."""
    arrival = Arrival(PendingItem("only", arrived_at, strategy), speak, lag)
    simulation = Simulation(Scenario([], [], [], [arrival]))
    simulation.run()
    if isinstance(strategy, Immediate):
        expected_start = arrived_at
    elif isinstance(strategy, WaitForIdle):
        ready = strategy.buffer
        if strategy.max_wait is not None:
            ready = min(ready, arrived_at + strategy.max_wait)
        expected_start = max(arrived_at, ready)
    else:
        expected_start = arrived_at + strategy.buffer
    assert simulation.completed == {"only": expected_start + speak}
