"""A hand-over cuts a result the caller was still playing: the client's ack for it must not
go out on the line it comes back on (a server whose speech ids start again on each line
would count as heard a result the caller never heard; voicehub's name each session's marks
with a token of their own, tests/voice/engine/test_handover_result.py). A fake server hands
the call over with a mark still owed, then speaks a mark of its own, due later; once its ack
arrives, any owed old ack would have been sent before it."""

from __future__ import annotations

import asyncio
import json

from websockets.asyncio.server import ServerConnection, serve

from voicehub.client.call import CallClient, CallOptions
from voicehub.client.reconnect import Backoff
from voicehub.voice.events import SAMPLE_RATE

ROOM = "research:handover-acks"
OLD_MARK = f"{ROOM}/speech-3"  # the result being played when the hand-over came
NEW_MARK = f"{ROOM}/speech-1"  # the next line's first speech, of the same id as an old one's


def audio(seconds: float) -> bytes:
    return bytes(int(SAMPLE_RATE * seconds) * 2)


def session(continued: str) -> str:
    return json.dumps(
        {
            "type": "session",
            "room_id": ROOM,
            "conversation": "handover-acks",
            "desk": "research",
            "title": "Research",
            "resumed": continued != "new",
            "greeting": False,
            "continued": continued,
        }
    )


async def test_an_ack_owed_on_the_handed_over_line_never_reaches_the_next_one() -> None:
    lines = 0
    after: list[str] = []  # what the caller sent on the line it came back on
    acked = asyncio.Event()

    async def handler(line: ServerConnection) -> None:
        nonlocal lines
        lines += 1
        if lines == 1:  # the draining instance: half a second of result, then gone
            await line.send(session("new"))
            await line.send(audio(0.5))
            await line.send(json.dumps({"type": "speech_mark", "id": OLD_MARK}))
            await line.close(1012, "handed over")
            return
        await line.send(session("handover"))
        await line.send(audio(1.0))  # due after the old mark would have been
        await line.send(json.dumps({"type": "speech_mark", "id": NEW_MARK}))
        async for message in line:
            if isinstance(message, str):
                after.append(message)
                sent = json.loads(message)
                if sent == {"type": "playout", "id": NEW_MARK}:
                    acked.set()
                if sent["type"] == "hangup":
                    await line.close(1000, "hung up")

    async with serve(handler, "127.0.0.1", 0) as server:
        port = server.sockets[0].getsockname()[1]
        options = CallOptions(
            desk="research",
            server=f"http://127.0.0.1:{port}",
            conversation="handover-acks",
            playout_speed=1.0,
            reconnect=Backoff(first=0.05, give_up_after=10),
        )
        async with CallClient(options) as call:
            async with asyncio.timeout(30):  # a guard: the ack comes in about a second
                await acked.wait()
            segments = {s.mark_id: s for s in call.report.segments}
            await call.hangup()

    playouts = [json.loads(m)["id"] for m in after if json.loads(m)["type"] == "playout"]
    assert playouts == [NEW_MARK]
    assert segments[OLD_MARK].cut and segments[OLD_MARK].acked_at is None
    assert segments[NEW_MARK].acked_at is not None and not segments[NEW_MARK].cut
