"""The synthetic caller's WebRTC link: an aiortc peer that looks like the WebSocket to
`CallClient` (`send`, async iteration, `close`, `close_code`).

Caller audio (PCM16 16 kHz, sent as bytes) goes into a `PlayoutQueue` played on an Opus
track in real time; the agent's track is decoded to 16 kHz PCM16 and yielded as bytes
(frames of pure silence are skipped: the server's track sends silence between speeches,
which a WebSocket client never sees); data-channel messages are yielded as text. A speech
mark (and what follows it) is held back until the agent's track has played as far as the
mark's `track_ms`: the mark travels on the data channel and overtakes the last audio frames
in the jitter buffer and the decoder (by seconds on a starved machine), and a WebSocket
client gets marks strictly after their audio. A mark without `track_ms` waits for the track
to fall silent.
Signaling is the server's WHIP-shaped `POST /desks/{desk}/webrtc`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import AsyncIterator
from typing import Any

import numpy as np
from websockets.exceptions import ConnectionClosed

from voicehub.errors import VoicehubError
from voicehub.transports.rtc_media import (
    BROWSER_APPLICATION,
    BROWSER_COMPLEXITY,
    PcmDecoder,
    import_aiortc,
    paced_track,
)
from voicehub.voice.audio import FRAME_MS, FrameSplitter
from voicehub.voice.audio.playout import PlayoutQueue
from voicehub.voice.events import SAMPLE_RATE

__all__ = ["WebRTCLink", "open_webrtc_link"]

log = logging.getLogger("voicehub.client")

_SILENT_PEAK = 2  # Opus gives back (nearly) exact zeros for the server's digital silence
_MARK_HOLD = 2.0  # seconds without a frame after which held marks go anyway (track gone)
_END = object()


class WebRTCLink:
    """One call's peer connection (build it with `open_webrtc_link`)."""

    def __init__(self, connection: Any, channel: Any) -> None:
        self.connection = connection
        self.channel = channel
        self.mic = PlayoutQueue(SAMPLE_RATE)
        self.close_code: int | None = None
        self.close_reason: str | None = None
        self.resource: str | None = None  # the call's URL, for DELETE
        self.headers: dict[str, str] = {}
        self._incoming: asyncio.Queue[Any] = asyncio.Queue()
        self._unsent: list[str] = []
        self._reader: asyncio.Task[None] | None = None
        self._ended = False
        # a speech mark and the messages after it: (text, is a mark, where the mark's audio
        # ends on the track in s, None if not said: it waits for silence instead)
        self._held: list[tuple[str, bool, float | None]] = []
        self._played = 0.0  # how far the agent's track has arrived, in s of its clock
        self._hold_timer: asyncio.TimerHandle | None = None
        self._server_close: tuple[int, str] | None = None  # the server's code and reason
        channel.on("open", self._flush)
        channel.on("message", self._on_message)
        channel.on("close", lambda: self._end(1000, "data channel closed"))

        @connection.on("connectionstatechange")  # type: ignore[untyped-decorator]
        def _state() -> None:
            if connection.connectionState in ("failed", "closed"):
                self._end(1006, f"connection {connection.connectionState}")

        @connection.on("track")  # type: ignore[untyped-decorator]
        def _track(track: Any) -> None:
            if track.kind == "audio" and self._reader is None:
                self._reader = asyncio.create_task(self._read_agent(track))

    async def send(self, message: bytes | str) -> None:
        """Bytes: caller audio to play on the track; text: a data-channel message."""
        if self._ended:
            raise ConnectionClosed(None, None)
        if isinstance(message, bytes):
            self.mic.put_audio(message)
        elif self.channel.readyState == "open":
            self.channel.send(message)
        else:
            self._unsent.append(message)

    def __aiter__(self) -> AsyncIterator[bytes | str]:
        return self._messages()

    async def _messages(self) -> AsyncIterator[bytes | str]:
        while True:
            item = await self._incoming.get()
            if item is _END:
                return
            yield item

    async def close(self) -> None:
        """End the call (DELETE the resource, so the server need not wait for silence)."""
        if self.resource is not None and not self._ended:
            with contextlib.suppress(OSError):
                await asyncio.to_thread(_request, "DELETE", self.resource, None, self.headers)
        self._end(1000, self.close_reason or "hung up")
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._reader
        await self.connection.close()

    def _end(self, code: int, reason: str) -> None:
        if not self._ended:
            self._ended = True
            if self._server_close is not None:
                code, reason = self._server_close
            self.close_code, self.close_reason = code, reason
            self._release()
            self._incoming.put_nowait(_END)

    def _on_message(self, message: str | bytes) -> None:
        if isinstance(message, str) and '"closed_' in message:
            self._closing(message)
        mark = isinstance(message, str) and '"speech_mark"' in message
        if not mark and not self._held:
            self._incoming.put_nowait(message)
            return
        self._held.append((str(message), mark, _mark_end(str(message)) if mark else None))
        self._release(up_to=self._played)
        self._hold_on()

    def _closing(self, message: str) -> None:
        """The server closes the call with a code and reason (`error` event `closed_CODE`,
        sent before the peer closes): the close the WebSocket would have, so the call's
        ending reads the same on both (a refusal is 1011, not the channel's plain close)."""
        try:
            event = json.loads(message)
            code = int(str(event.get("code", "")).removeprefix("closed_"))
        except (ValueError, AttributeError):
            return
        self._server_close = (code, str(event.get("message") or ""))

    def _release(self, up_to: float | None = None, silent: bool = False) -> None:
        """Pass held messages on, up to the first mark whose audio has not arrived by track
        position `up_to` (None: everything; `silent`: the track has fallen silent)."""
        while self._held:
            message, mark, end = self._held[0]
            if mark and up_to is not None and (up_to < end if end is not None else not silent):
                break
            self._held.pop(0)
            self._incoming.put_nowait(message)
        if not self._held and self._hold_timer is not None:
            self._hold_timer.cancel()
            self._hold_timer = None

    def _hold_on(self) -> None:
        """(Re)start the wait after which held marks go even if their audio never came."""
        if self._hold_timer is not None:
            self._hold_timer.cancel()
            self._hold_timer = None
        if self._held:
            self._hold_timer = asyncio.get_running_loop().call_later(_MARK_HOLD, self._release)

    def _flush(self) -> None:
        unsent, self._unsent = self._unsent, []
        for text in unsent:
            self.channel.send(text)

    async def _read_agent(self, track: Any) -> None:
        decoder = PcmDecoder(SAMPLE_RATE)
        frames = FrameSplitter(SAMPLE_RATE)
        while True:
            try:
                frame = await track.recv()
            except Exception:  # the track ended
                return
            silent = False
            for pcm in frames.push(decoder.decode(frame)):
                peak = np.abs(np.frombuffer(pcm, dtype="<i2")).max()
                if peak > _SILENT_PEAK:
                    self._incoming.put_nowait(pcm)
                else:
                    silent = True
            # the receiver's pts count the sender's RTP clock from its first packet
            self._played = float(frame.pts * frame.time_base) + frame.samples / frame.sample_rate
            if self._held:
                self._release(up_to=self._played, silent=silent)
                self._hold_on()


def _mark_end(message: str) -> float | None:
    """Where a `speech_mark`'s audio ends on the track, in s, with one frame more for the
    encoder's look-ahead that carries its tail into the next packet (None: not said)."""
    try:
        track_ms = json.loads(message).get("track_ms")
    except (ValueError, AttributeError):
        return None
    return (track_ms + FRAME_MS) / 1000 if isinstance(track_ms, int) else None


def offer_url(server: str, desk: str, conversation: str, token: str | None) -> str:
    """The signaling URL for `desk` on `server` (http or ws base URL)."""
    base = urllib.parse.urlsplit(server)
    scheme = {"ws": "http", "wss": "https"}.get(base.scheme, base.scheme or "http")
    query = {"conversation": conversation} | ({"token": token} if token else {})
    path = f"{base.path.rstrip('/')}/desks/{urllib.parse.quote(desk)}/webrtc"
    return urllib.parse.urlunsplit((scheme, base.netloc, path, urllib.parse.urlencode(query), ""))


async def open_webrtc_link(
    server: str, desk: str, conversation: str, token: str | None = None
) -> WebRTCLink:
    """Offer a call to `desk`; returns once the server answered (the media may still be
    connecting). Raises VoicehubError with the server's reason if refused."""
    aiortc = import_aiortc()
    connection = aiortc.RTCPeerConnection()
    channel = connection.createDataChannel("voicehub")
    link = WebRTCLink(connection, channel)
    # the caller's microphone encodes as a browser's does (recognition hears it)
    mic = paced_track(
        link.mic,
        on_marks=lambda marks, track_ms: None,
        complexity=BROWSER_COMPLEXITY,
        application=BROWSER_APPLICATION,
    )
    connection.addTrack(mic)
    await connection.setLocalDescription(await connection.createOffer())
    url = offer_url(server, desk, conversation, token)
    link.headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        status, headers, body = await asyncio.to_thread(
            _request, "POST", url, connection.localDescription.sdp.encode(), link.headers
        )
    except BaseException:
        await connection.close()
        raise
    if status != 201:
        await connection.close()
        raise VoicehubError(f"the call was refused ({status}): {body.decode(errors='replace')}")
    link.resource = urllib.parse.urljoin(url, headers.get("Location", ""))
    answer = aiortc.RTCSessionDescription(sdp=body.decode(), type="answer")
    await connection.setRemoteDescription(answer)
    return link


def _request(
    method: str, url: str, body: bytes | None, headers: dict[str, str]
) -> tuple[int, dict[str, str], bytes]:
    """One HTTP request (blocking; run it in a thread). Error statuses are returned too."""
    all_headers = {"Content-Type": "application/sdp", **headers} if body is not None else headers
    request = urllib.request.Request(url, data=body, method=method, headers=all_headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()
