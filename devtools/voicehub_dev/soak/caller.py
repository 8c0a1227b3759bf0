"""One soak caller: call after call on its own conversation until the run's deadline.

The cadence of a call, with seeded coins per caller:

1. The caller connects (callers start spread over the run's ramp) and lets the agent greet
   (or, on a call-back, speak the results held for it).
2. `turn_pause` seconds (0.5-2 s) after the agent falls quiet, it asks for research on a
   topic (about 2.5 s of speech).
3. Then either it hangs up 0.2-3 s later, before the results are in (`hang_up`: they are
   held, and the next call is a call-back that should hear them); or it talks over the
   first result being spoken (`barge_in`: the result must be re-offered, not lost); or it
   takes `follow_ups` more turns (0-2: "is there any update", "any news", "thank you very
   much", 0.8-1.4 s each), each `turn_pause` after the agent's answer.
4. It waits until the results were spoken and the conversation settled, hangs up, and
   calls again `pause` seconds (0.5-3 s) later.

A caller so talks roughly a fifth of the time it is on a call (the soak reports the
measured share). A last call after the deadline collects whatever is still held, so the
accounting can demand that nothing is left (it calls back, up to `collect_attempts` times,
until the server has delivered every result of its conversation). Every line is
synthesized once per run (`CallerLines`): the callers' process only streams bytes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Callable
from dataclasses import dataclass

import httpx

from voicehub.client.call import CallClient, CallOptions, caller_audio
from voicehub.client.report import CallReport
from voicehub.errors import VoicehubError
from voicehub.voice.events import SAMPLE_RATE, CallError, DeliveryAttempt, DeliveryOutcome
from voicehub_dev.soak.accounting import CallLog
from voicehub_dev.soak.deliveries import undelivered
from voicehub_dev.soak.options import SoakOptions
from voicehub_dev.soak.talkover import overlap_of

__all__ = ["CallerLines", "SoakCaller", "say_within_call"]

log = logging.getLogger("voicehub.soak")

TOPICS = ("heat pumps", "solar panels", "wind turbines", "electric cars")
FOLLOW_UPS = ("is there any update", "any news", "thank you very much")
CHATTER = "thank you, and while they work, let me tell you about my old house"


@dataclass(frozen=True)
class CallerLines:
    """The callers' words, synthesized once for the whole run (Piper, 16 kHz PCM16)."""

    requests: tuple[tuple[str, bytes], ...]
    follow_ups: tuple[tuple[str, bytes], ...]
    chatter: bytes

    @classmethod
    def synthesize(cls, speak: Callable[[str], bytes] | None = None) -> CallerLines:
        """Every line said by `speak` (default: Piper, `caller_audio`; tests pass their
        committed speech)."""
        say = speak or (lambda text: caller_audio(text=text))
        requests = tuple(
            (text, say(text))
            for text in (f"could you research {topic} for me please" for topic in TOPICS)
        )
        follow_ups = tuple((text, say(text)) for text in FOLLOW_UPS)
        return cls(requests, follow_ups, chatter=say(CHATTER))

    def all(self) -> list[tuple[str, bytes]]:
        """Every line with its words (what a fake recognizer is told to expect)."""
        return [*self.requests, *self.follow_ups, (CHATTER, self.chatter)]


class SoakCaller:
    """Caller number `index` of a run; `calls` holds a log per call placed."""

    def __init__(self, index: int, options: SoakOptions, server: str, lines: CallerLines) -> None:
        self.options = options
        self.server = server
        self.lines = lines
        self.conversation = f"soak-{options.seed}-{index}"
        self.random = random.Random(f"{options.seed}:{index}")
        self.calls: list[CallLog] = []

    async def run(self, until: float) -> None:
        """Place calls until the loop clock passes `until`, then one collecting call."""
        loop = asyncio.get_running_loop()
        await asyncio.sleep(self.random.uniform(0.0, self.options.ramp_seconds))
        while loop.time() < until:
            await self._call(collect=False)
            await asyncio.sleep(self.random.uniform(*self.options.pause))
        # Call back until every result of the conversation was heard (a loaded server may
        # not get to speak them in one call): results still held after that count as lost.
        for _ in range(self.options.collect_attempts):
            await self._call(collect=True)
            with contextlib.suppress(httpx.HTTPError, ValueError, KeyError):
                options = self.options
                left = await undelivered(
                    self.server, options.desk, self.conversation, options.token
                )
                if left == 0:
                    break

    async def _call(self, *, collect: bool) -> None:
        options = self.options
        entry = CallLog(self.conversation)
        client = CallClient(
            CallOptions(
                desk=options.desk,
                server=self.server,
                conversation=self.conversation,
                token=options.token,
                playout_speed=options.playout_speed,
                turn_pause=self.random.uniform(*options.turn_pause),
                turn_timeout=options.turn_timeout,
            )
        )
        stage = "connect"
        try:
            try:
                await client.connect()
            except VoicehubError:
                if not _refused_busy(client.report):
                    raise
                entry.refused_busy = True  # at its limit: an answer, not a failure
            if not entry.refused_busy:
                stage = "greeting"
                await client.wait_for_turn()
                stage = "conversation"
                if collect:
                    await client.settle(options.settle_timeout)
                else:
                    await self._converse(client, entry)
                stage = "hang-up (the server did not close the call)"
                await client.hangup()
        except Exception as exc:  # a failed call is counted, the caller carries on
            entry.error = f"{stage}: {type(exc).__name__}: {exc}"
            log.warning("%s: call failed: %s", self.conversation, entry.error)
        finally:
            with contextlib.suppress(Exception):
                await client.close()
        report = client.report
        entry.seconds = client.now()
        entry.talk_seconds = sum(u.seconds for u in report.utterances if u.started_at is not None)
        entry.agent_seconds = sum(segment.seconds for segment in report.segments)
        entry.unanswered = (
            not collect
            and not entry.hung_up_early
            and not entry.refused_busy
            and _unanswered(report)
        )
        entry.turns = len(report.utterances)
        entry.attempts = len(report.events_of(DeliveryAttempt))
        entry.delivered = [
            str(event.delivery_id)
            for event in report.events_of(DeliveryOutcome)
            if event.outcome == "delivered"
        ]
        overlap = overlap_of(report)
        entry.talkover_ms, entry.yield_ms = overlap.talkover_ms, overlap.yield_ms
        self.calls.append(entry)

    async def _converse(self, client: CallClient, entry: CallLog) -> None:
        options, coin = self.options, self.random
        label, request = coin.choice(self.lines.requests)
        hang_up = coin.random() < options.hang_up
        barge_in = not hang_up and coin.random() < options.barge_in
        await say_within_call(client, request, label)
        if hang_up:
            entry.hung_up_early = True
            await asyncio.sleep(coin.uniform(0.2, 3.0))
            return
        if barge_in:
            with contextlib.suppress(TimeoutError):
                await client.wait_for_event(DeliveryAttempt, timeout=options.settle_timeout)
                await asyncio.sleep(coin.uniform(0.1, 1.0))  # somewhere into the result
                entry.barge_ins = 1
                await say_within_call(client, self.lines.chatter, "barge-in")
        else:
            for _ in range(coin.randint(*options.follow_ups)):
                await client.wait_for_turn()
                label, line = coin.choice(self.lines.follow_ups)
                await say_within_call(client, line, label)
        await client.settle(options.settle_timeout)


async def say_within_call(client: CallClient, pcm16: bytes, label: str) -> None:
    """`client.say`, but not forever: when the server ends the call mid-utterance the
    frames are never all sent (seen in an overloaded soak: one caller held up the run)."""
    seconds = len(pcm16) / 2 / SAMPLE_RATE
    saying = asyncio.ensure_future(client.say(pcm16, label))
    closed = asyncio.ensure_future(client.wait_for(lambda: client.closed, seconds + 30.0))
    try:
        await asyncio.wait({saying, closed}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (saying, closed):
            task.cancel()
        await asyncio.gather(saying, closed, return_exceptions=True)
    if saying.cancelled():
        raise ConnectionError(f"could not finish saying {label!r}: the call ended or stalled")
    saying.result()  # its own error, if any


def _refused_busy(report: CallReport) -> bool:
    """Whether the server refused the call because it is at its limit (1013, `busy`)."""
    errors = report.events_of(CallError)
    return report.close_code == 1013 and any(e.code == "busy" for e in errors)


def _unanswered(report: CallReport) -> bool:
    """The caller spoke and no agent audio came after its first utterance."""
    first = next((u for u in report.utterances if u.ended_at is not None), None)
    if first is None or first.ended_at is None:
        return False
    return not any(segment.first_audio_at > first.ended_at for segment in report.segments)
