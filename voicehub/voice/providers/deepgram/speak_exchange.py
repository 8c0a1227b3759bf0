"""One reply over an Aura speak socket: sentences in (`Speak` + `Flush` each), audio out.

Shared by livekit's stream (`tts._SocketStream`) and voicehub's direct path
(`DeepgramTTS.speak_pcm`), so both say the same thing to the socket and hear the same audio.
The reply ends once its text is all sent and every `Flush` is answered (`Flushed`). Between
two messages that were already waiting the event loop runs other calls (a hop per message, as
livekit's stream made), so a reply's burst of audio never holds the loop for its length.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import AsyncIterator, Callable

from voicehub.voice.providers import vendor_import
from voicehub.voice.providers.deepgram.speak_socket import CLOSED, SpeakSocket

with vendor_import("livekit-agents"):
    from livekit.agents import APIConnectionError

__all__ = ["SentenceSplitter", "spoken_audio"]

log = logging.getLogger("voicehub.voice.deepgram")

_INPUT_DONE = object()  # the reply's text is all sent
# A sentence ends at . ! ? (and closing quotes) followed by whitespace.
_SENTENCE_END = re.compile(r"[.!?…]+[\"')\]]*\s+")


class SentenceSplitter:
    """Text as it comes -> whole sentences (each flushed on its own, so the first plays
    while the model still writes); `flush` gives the rest."""

    def __init__(self) -> None:
        self._buffer = ""

    def push(self, text: str) -> list[str]:
        self._buffer += text
        sentences: list[str] = []
        while match := _SENTENCE_END.search(self._buffer):
            sentences.append(self._buffer[: match.end()])
            self._buffer = self._buffer[match.end() :]
        return sentences

    def flush(self) -> str:
        rest, self._buffer = self._buffer, ""
        return rest


async def spoken_audio(
    socket: SpeakSocket,
    sentences: AsyncIterator[str],
    decode: Callable[[bytes], bytes],
    *,
    whole_samples: bool,
) -> AsyncIterator[bytes]:
    """The audio of `sentences` (sent as they come), decoded, message by message.

    `whole_samples`: PCM16 on the wire, so an odd byte waits for the next message."""
    flushes = 0

    async def send() -> None:
        nonlocal flushes
        try:
            async for sentence in sentences:
                if sentence.strip():
                    await socket.speak(sentence)
                    await socket.flush()
                    flushes += 1
        finally:
            # in the same queue as the server's messages: the reader sees it in order
            socket.messages.put_nowait(_INPUT_DONE)

    sender = asyncio.create_task(send())
    flushed, odd, input_done = 0, b"", False
    try:
        while not (input_done and flushed >= flushes):
            if socket.messages.empty():
                message = await socket.messages.get()
            else:  # a burst (Aura sends faster than real time): the loop runs between its
                await asyncio.sleep(0)  # messages, else a whole reply plays in one step
                message = socket.messages.get_nowait()
            if message is _INPUT_DONE:
                await sender  # raise its error, if any
                input_done = True
            elif message is CLOSED:
                raise APIConnectionError("Deepgram closed the speak socket", retryable=False)
            elif isinstance(message, bytes):
                data = odd + message if odd else message
                if whole_samples:
                    whole = len(data) // 2 * 2
                    data, odd = data[:whole], data[whole:]
                yield decode(data)
            elif getattr(message, "type", None) == "Flushed":
                flushed += 1
            elif getattr(message, "type", None) == "Warning":
                log.warning("Deepgram TTS warning: %s", getattr(message, "description", ""))
    finally:
        sender.cancel()
