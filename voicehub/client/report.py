"""What a `voicehub call` produced: events, caller utterances, agent audio segments, and the
printed timeline (who spoke when, tool calls, tasks, deliveries)."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import TypeVar, assert_never

from voicehub.voice.events import (
    SAMPLE_RATE,
    AgentState,
    CallError,
    CallSession,
    CallStatus,
    CallTransferred,
    ClearAudio,
    DeliveryAttempt,
    DeliveryOutcome,
    ProviderError,
    ServerEvent,
    SpeechMark,
    TaskFinished,
    TaskStarted,
    ToolCall,
    Transcript,
    UserState,
)

__all__ = [
    "AgentSegment",
    "CallReport",
    "ReceivedEvent",
    "Utterance",
    "describe_event",
    "format_summary",
    "format_timeline",
]

_WIDTH = 88  # characters of quoted text per timeline line

E = TypeVar("E", bound=ServerEvent)


@dataclass
class ReceivedEvent:
    """An event from the server and when it arrived (seconds since connect)."""

    at: float
    event: ServerEvent

    @property
    def type(self) -> str:
        """The event's wire type ("session", "transcript", ...)."""
        return self.event.type


@dataclass
class Utterance:
    """Caller speech as sent: when its first and last frames went out, and when its last
    voiced frame did (`voice_ended_at`: the end of speech, before any trailing silence)."""

    label: str
    seconds: float
    started_at: float | None = None
    ended_at: float | None = None
    voice_ended_at: float | None = None
    frames: int = 0
    frames_sent: int = 0
    voiced_frames: int = 0  # frames up to and including the last voiced one
    typed: bool = False  # a typed turn or keypad entry: no speech, no voice-to-voice
    done: asyncio.Event = field(default_factory=asyncio.Event, repr=False)

    @property
    def speech_end(self) -> float | None:
        """When the caller stopped speaking, as the server heard it."""
        return self.voice_ended_at if self.voice_ended_at is not None else self.ended_at


@dataclass
class AgentSegment:
    """Agent audio up to one speech mark (or a clear): its bytes in `CallReport.agent_audio`."""

    first_audio_at: float
    start: int
    end: int
    last_audio_at: float
    mark_id: str | None = None
    acked_at: float | None = None
    cut: bool = False

    @property
    def seconds(self) -> float:
        return (self.end - self.start) / 2 / SAMPLE_RATE


@dataclass
class CallReport:
    """Everything a call produced, in arrival order."""

    desk: str
    conversation: str
    room_id: str = ""
    resumed: bool = False
    events: list[ReceivedEvent] = field(default_factory=list)
    utterances: list[Utterance] = field(default_factory=list)
    segments: list[AgentSegment] = field(default_factory=list)
    agent_audio: bytearray = field(default_factory=bytearray)
    close_code: int | None = None
    close_reason: str = ""
    closed_by_server: bool = False  # the socket closed before the caller hung up
    settled: bool = False

    def events_of(self, kind: type[E]) -> list[E]:
        """The events of one model class, in order."""
        return [r.event for r in self.events if isinstance(r.event, kind)]

    def segment_audio(self, segment: AgentSegment) -> bytes:
        return bytes(self.agent_audio[segment.start : segment.end])

    def latencies(self) -> list[float]:
        """Voice-to-voice, for each spoken utterance: the end of the caller's speech (its
        last voiced frame) to the first agent audio after it, as the caller heard them (the
        server's `voicehub_voice_to_voice_seconds` is the same span on its side of the
        line: shorter only by the network and buffering)."""
        found = []
        for utterance in self.utterances:
            if utterance.typed:
                continue
            end = utterance.speech_end
            later = [
                s.first_audio_at
                for s in self.segments
                if end is not None and s.first_audio_at > end
            ]
            if end is not None and later:
                found.append(min(later) - end)
        return found


def format_timeline(report: CallReport) -> str:
    """The call as lines of `seconds  who  what`, in time order."""
    entries: list[tuple[float, str, str]] = []
    for received in report.events:
        entry = describe_event(received.event)
        if entry is not None:
            entries.append((received.at, *entry))
    for utterance in report.utterances:
        if utterance.started_at is not None:
            said = f"speaking {_quote(utterance.label)} ({utterance.seconds:.1f} s)"
            entries.append((utterance.started_at, "caller", said))
        if utterance.speech_end is not None:
            entries.append((utterance.speech_end, "caller", "stopped speaking"))
    ends = sorted(u.speech_end for u in report.utterances if u.speech_end is not None)
    for segment in report.segments:
        if segment.end == segment.start:
            continue
        note = f"audio {segment.seconds:.1f} s"
        before = [end for end in ends if end < segment.first_audio_at]
        earlier = [s for s in report.segments if before and before[-1] < s.first_audio_at]
        if before and earlier and earlier[0] is segment:
            note += f" ({segment.first_audio_at - before[-1]:.2f} s after the caller stopped)"
        entries.append((segment.first_audio_at, "agent", note + (" [cut]" if segment.cut else "")))
    entries.sort(key=lambda entry: entry[0])
    lines = [f"{'time':>7}  {'who':<9} what"]
    lines += [f"{at:7.2f}  {who:<9} {what}" for at, who, what in entries]
    return "\n".join(lines)


def format_summary(report: CallReport) -> str:
    """A few lines of totals: speech, audio, latency, tasks and deliveries."""
    spoken = sum(u.seconds for u in report.utterances)
    audio = sum(s.seconds for s in report.segments)
    lines = [
        f"room {report.room_id} ({'resumed' if report.resumed else 'new'} conversation)",
        f"caller: {len(report.utterances)} utterance(s), {spoken:.1f} s; "
        f"agent: {audio:.1f} s of audio in {len(report.segments)} segment(s)",
    ]
    latencies = report.latencies()
    if latencies:
        shown = ", ".join(f"{value:.2f} s" for value in latencies)
        lines.append(f"voice-to-voice (end of caller speech -> first agent audio): {shown}")
    finished = [str(e.status) for e in report.events_of(TaskFinished)]
    outcomes = [str(e.outcome) for e in report.events_of(DeliveryOutcome)]
    lines.append(
        f"tasks: {len(report.events_of(TaskStarted))} started, {len(finished)} finished"
        f"{' (' + ', '.join(finished) + ')' if finished else ''}; "
        f"deliveries: {', '.join(outcomes) or 'none'}"
    )
    lines.append("settled" if report.settled else "did not settle before the timeout")
    return "\n".join(lines)


def describe_event(event: ServerEvent) -> tuple[str, str] | None:
    """The timeline entry `(who, what)` for an event, or None for bookkeeping events."""
    match event:
        case CallSession():
            resumed = "resumed conversation" if event.resumed else "new conversation"
            return "system", f"connected to {event.room_id} ({resumed})"
        case Transcript(final=True):
            who = "heard" if event.role == "user" else "agent"
            return who, _quote(event.text)
        case ToolCall():
            return "tool", f"{event.name} {_cut(event.arguments)}"
        case TaskStarted():
            where, task = event.child_room_id, _cut(event.task)
            return "task", f"{event.agent_id} started in {where}: {task}"
        case TaskFinished():
            return "task", f"{event.agent_id} finished ({event.status})"
        case DeliveryAttempt():
            return "delivery", f"speaking result (attempt {event.attempt}): {_quote(event.text)}"
        case DeliveryOutcome():
            detail = f"{event.outcome} ({event.strategy}, attempt {event.attempt})"
            return "delivery", detail + (f": {event.error}" if event.error else "")
        case ClearAudio():
            return "agent", "cut off (the caller barged in)"
        case CallError():
            return "error", f"{event.code}: {event.message}"
        case ProviderError():
            return "provider", f"{event.source}: {event.message}"
        case CallTransferred():
            return "system", f"transferred to the {event.title} ({event.url})"
        case Transcript() | CallStatus() | UserState() | AgentState() | SpeechMark():
            return None  # interim words, polling and audio bookkeeping: not news
        case _:
            assert_never(event)


def _cut(text: str) -> str:
    text = " ".join(text.split())  # one line per entry, whatever the text holds
    return text if len(text) <= _WIDTH else text[: _WIDTH - 3] + "..."


def _quote(text: str) -> str:
    return json.dumps(_cut(text), ensure_ascii=False)
