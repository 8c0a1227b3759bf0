"""`voicehub call --carrier telnyx|plivo|vonage`: call a desk as that carrier would.

The caller signs the answer webhook as the carrier does (Telnyx: Ed25519 with the account
key's seed, `TELNYX_SIGNING_KEY`; Plivo: V3 with `PLIVO_AUTH_TOKEN`; Vonage: a JWT under
`VONAGE_SIGNATURE_SECRET`), reads the answer (TeXML, Plivo XML, an NCCO), opens the media
stream it names on the local server (`public_url` stands for a tunnel ending at `server`),
speaks each line in 20 ms frames of the carrier's format, plays the agent's audio on a
virtual speaker and confirms each mark as that carrier does. It waits for the agent after
each line and, at the end, until the conversation settles (the server's REST view shows
no running task and no result left to speak), then hangs up. The report is the phone
call's (`voicehub.client.phone_call.PhoneCallReport`).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from voicehub.client.call import voiced_seconds
from voicehub.client.carrier_line import CarrierLine
from voicehub.client.phone_call import (
    PhoneCallReport,
    conversation_settled,
    first_turn,
    greeting_wait,
    returning_caller,
    room_record,
    voice_to_voice,
)
from voicehub.client.plivo import PlivoSide
from voicehub.client.telnyx import TelnyxSide
from voicehub.client.vonage import VonageSide
from voicehub.errors import VoicehubError

__all__ = ["CARRIER_SECRETS", "CarrierCallOptions", "place_carrier_call"]

# The variable holding what each carrier signs its webhooks with.
CARRIER_SECRETS = {
    "telnyx": "TELNYX_SIGNING_KEY",
    "plivo": "PLIVO_AUTH_TOKEN",
    "vonage": "VONAGE_SIGNATURE_SECRET",
}


@dataclass(frozen=True)
class CarrierCallOptions:
    carrier: str  # "telnyx", "plivo" or "vonage"
    desk: str
    server: str  # where the tunnel ends: the local server's http URL
    public_url: str  # the https URL the server was given
    secret: str  # what the carrier signs with (see CARRIER_SECRETS)
    caller: str = "+15550100000"
    api_token: str | None = None
    playout_speed: float = 1.0
    quiet: float = 1.5
    answer_wait: float = 20.0


def carrier_for(options: CarrierCallOptions) -> Any:
    """The carrier's side of the account, signing as it does."""
    if options.carrier == "telnyx":
        try:
            seed = base64.b64decode(options.secret, validate=True)
        except ValueError:
            seed = b""
        if len(seed) != 32:
            raise VoicehubError(
                "TELNYX_SIGNING_KEY must be the base64 of a 32-byte Ed25519 seed "
                "(the server's TELNYX_PUBLIC_KEY is its public key; see docs/carriers.md)"
            )
        return TelnyxSide(options.server, options.public_url, seed)
    if options.carrier == "plivo":
        return PlivoSide(options.server, options.public_url, options.secret)
    if options.carrier == "vonage":
        return VonageSide(options.server, options.public_url, options.secret)
    raise VoicehubError(f"unknown carrier {options.carrier!r}: telnyx, plivo or vonage")


async def place_carrier_call(
    options: CarrierCallOptions,
    lines: Sequence[tuple[str, bytes]],
    *,
    settle_timeout: float = 90.0,
) -> PhoneCallReport:
    """Ring the desk through the carrier, say `lines` ((label, PCM16 at 16 kHz)) one after
    another, wait for the conversation to settle, hang up."""
    carrier = carrier_for(options)
    dialled_at = time.time()
    answer = await carrier.incoming_call(options.desk, options.caller)
    conversation = answer.parameters.get("conversation", "")
    report = PhoneCallReport(room_id=f"{options.desk}:{conversation or '?'}")
    returning = bool(conversation) and await returning_caller(options, report.room_id, dialled_at)
    ends: list[float] = []  # when the caller stopped speaking, on the line's clock
    async with carrier.stream(answer, playout_speed=options.playout_speed) as line:
        wait = greeting_wait(options.answer_wait, returning)  # a returning caller is not greeted
        await first_turn(line, options.quiet, wait)  # or PhoneCallRefused
        for label, audio in lines:
            report.lines.append((time.monotonic() - report.started, label))
            frames = line.media_received
            await line.say(audio)
            ends.append(line.clock.now() - (len(audio) / 32000 - voiced_seconds(audio)))
            await _agent_turn(line, options, frames)
        if conversation:
            try:
                async with asyncio.timeout(settle_timeout):
                    await conversation_settled(
                        options.server, options.api_token, report.room_id, line, options.quiet
                    )
                report.settled = True
            except TimeoutError:
                report.settled = False
    report.marks = [(at - report.started, name) for name, at in line.played.marks]
    report.clears, report.problems = line.clears, list(line.problems)
    report.agent_audio = bytes(line.played.pcm16)
    report.sample_rate = line.dialect.rate
    report.calls = []
    report.latencies = voice_to_voice(ends, line.played.first_audio_after)
    if conversation:  # the same timeline as the WebSocket's: heard, tools, tasks, deliveries
        record = await room_record(
            options.server, options.api_token, report.room_id, report.wall_started
        )
        record.fill(report)
    return report


async def _agent_turn(line: CarrierLine, options: CarrierCallOptions, after: int) -> None:
    with contextlib.suppress(TimeoutError):  # no answer to that line: go on
        await line.wait_quiet(options.quiet, after=after, timeout=options.answer_wait)
