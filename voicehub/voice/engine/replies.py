"""The replies of one call: queued, run one at a time, in order, and measured.

`CallReplies` holds the call's reply queue and runs each `Reply` (`ReplyRun`: voicehub's
agent runner, speech by sentence) to its end: its speeches played, cut or dropped. It tells
the turn engine which turn is being answered (so a caller who goes on before the reply is
heard continues that turn), keeps `VoiceActivity` thinking while a reply runs, and reports
each answered turn's latency, stage by stage, to the `TurnObserver`. It implements the
`ReplyHost` a run needs.
"""

from __future__ import annotations

import asyncio
import collections
import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from voicehub.agents.tools import Tool, ToolContext
from voicehub.voice.engine.latency import TurnLatency, TurnObserver
from voicehub.voice.engine.reply_run import Reply, ReplyRun
from voicehub.voice.engine.speech import Speech, SpeechEnd

if TYPE_CHECKING:
    from voicehub.agents.agent import Agent
    from voicehub.agents.llm import ToolCall
    from voicehub.agents.tools import ToolResult
    from voicehub.core.clock import Clock
    from voicehub.voice.engine.call_parts import CallParts
    from voicehub.voice.engine.decisions import CallerTurnCommitted
    from voicehub.voice.engine.speech_player import SpeechPlayer
    from voicehub.voice.engine.turn_engine import TurnEngine

__all__ = ["CallReplies"]

log = logging.getLogger("voicehub.voice")

AgentOnCall = Callable[[], "tuple[Agent, Sequence[Tool], Any]"]


class CallReplies:
    """One call's replies (see the module docstring). `on_call()` gives the agent on the
    call, its extra tools and its TTS; `speech_id()` a new speech id."""

    def __init__(
        self,
        parts: CallParts,
        *,
        engine: TurnEngine,
        player: SpeechPlayer,
        on_call: AgentOnCall,
        speech_id: Callable[[], str],
        sample_rate: int,
        observer: TurnObserver | None = None,
    ) -> None:
        self.hub, self.room_id = parts.hub, parts.room_id
        self.engine, self.player, self.records = engine, player, parts.records
        self.history, self.activity = parts.history, parts.activity
        self._on_call, self._speech_id = on_call, speech_id
        self._rate = sample_rate
        self._observer = observer
        self._queue: collections.deque[Reply] = collections.deque()
        self._added = asyncio.Event()
        self.current: Reply | None = None
        self.committed: dict[int, CallerTurnCommitted] = {}  # turns whose reply is due
        self._prepared: Reply | None = None  # started before its turn committed
        self._prepared_mark = 0  # the history before it

    @property
    def clock(self) -> Clock:
        return self.hub.clock

    # -- the queue --------------------------------------------------------------------------

    def queue(self, reply: Reply) -> Reply:
        """Answer after the replies before it; a turn's reply makes the agent busy now."""
        if reply.turn is not None:
            self.activity.agent_thinking_started()  # busy first: never idle between
            self.activity.user_turn_awaiting_answer(False)
        self._queue.append(reply)
        self._added.set()
        return reply

    def prepare(self, turn: int, text: str) -> None:
        """Start the reply to `text` before its turn commits (model and first sentence; it
        is heard, and its tools run, only once `commit_prepared` says the turn is over)."""
        if self.current is not None or self._queue or self._prepared is not None:
            return  # the agent is busy: the turn is answered when it commits
        reply = Reply(turn=turn, text=text, committed=asyncio.Event())
        self._prepared, self._prepared_mark = reply, self.history.mark()
        self._queue.append(reply)
        self._added.set()

    def commit_prepared(self, turn: CallerTurnCommitted) -> bool:
        """The turn committed as prepared: its reply goes on; False if there was none."""
        reply = self._prepared
        if reply is None or reply.turn != turn.turn or reply.text != turn.text:
            return False
        self._prepared = None
        assert reply.committed is not None
        self.history.add_user(turn.text, at=self._prepared_mark)
        self.committed[turn.turn] = turn
        self.activity.agent_thinking_started()
        self.activity.user_turn_awaiting_answer(False)
        if not any(speech.audio_started for speech in reply.speeches):
            self.records.agent_state("thinking")
        if reply is self.current:
            self.engine.reply_started(turn.turn, turn.text)
        reply.committed.set()
        return True

    def drop_prepared(self) -> None:
        """The turn went on, or committed other words: the prepared reply is not used."""
        reply, self._prepared = self._prepared, None
        if reply is None:
            return
        self.stop(reply)
        for speech in reply.speeches:
            self.player.cancel(speech)
        self.history.rollback(self._prepared_mark)
        if reply in self._queue:
            self._queue.remove(reply)
            reply.done.set()

    def pending(self) -> list[Reply]:
        """The running reply, then the queued ones."""
        running = [self.current] if self.current is not None else []
        return running + list(self._queue)

    def stop(self, reply: Reply) -> None:
        """End `reply` (after its running tools) and drop its speeches not yet heard."""
        reply.stop()
        for speech in reply.speeches:
            if not speech.audio_started:
                self.player.cancel(speech)

    def aclose(self) -> None:
        """The call ended: stop the running reply, release whoever waits on the others."""
        if self.current is not None and self.current.task is not None:
            self.current.task.cancel()
        while self._queue:
            self._queue.popleft().done.set()

    async def run(self) -> None:
        """The call's reply worker (a task of the session)."""
        while True:
            while not self._queue:
                self._added.clear()
                await self._added.wait()
            reply = self._queue.popleft()
            if reply.stopped:
                reply.done.set()
                continue
            await self._answer(reply)

    async def _answer(self, reply: Reply) -> None:
        self.current = reply
        prepared = reply.committed is not None and not reply.committed.is_set()
        if not prepared:  # a prepared reply: the caller's turn is not over yet
            self.activity.agent_thinking_started()
            self.records.agent_state("thinking")
            if reply.turn is not None:
                self.engine.reply_started(reply.turn, reply.text)
        reply.task = asyncio.create_task(
            ReplyRun(self, reply).run(), name=f"voicehub-reply-{reply.turn}"
        )
        try:
            await asyncio.wait({reply.task})
            if not reply.task.cancelled() and (error := reply.task.exception()) is not None:
                log.error("room %s: the reply failed: %s", self.room_id, error)
                self.records.provider_error("llm_error", str(error), recoverable=True)
            for speech in reply.speeches:
                if reply.stopped:
                    self.player.cancel(speech)
                await speech.wait()
        finally:
            if reply.turn is not None:
                self.engine.reply_ended(reply.turn)
                self._report(reply)
            self.current = None
            self.activity.agent_thinking_finished()
            playing = self.player.current
            if (playing is None or playing.done) and not self.player.queued:
                self.records.agent_state("listening")
            reply.done.set()

    def _report(self, reply: Reply) -> None:
        turn = self.committed.pop(reply.turn or -1, None)
        if self._observer is None or turn is None:
            return
        first_audio = next((s.audio_started_at for s in reply.speeches if s.audio_started), None)
        ended = turn.speech_ended_at
        latency = TurnLatency(
            room_id=self.room_id,
            turn=turn.turn,
            speech_ended_at=ended,
            end_of_turn_delay=_since(ended, turn.committed_at),
            stt_final_delay=_since(ended, turn.final_at),
            llm_ttft=_since(reply.started_at, reply.first_token_at),
            tts_ttfb=_since(reply.first_sentence_at, reply.first_audio_at),
            voice_to_voice=_since(ended, first_audio),
            interrupted=reply.outcome is SpeechEnd.INTERRUPTED,
        )
        try:
            self._observer.turn_measured(latency)
        except Exception:
            log.exception("room %s: the turn observer failed", self.room_id)

    # -- ReplyHost ----------------------------------------------------------------------------

    @property
    def sample_rate(self) -> int:
        return self._rate

    def reply_agent(self) -> tuple[Agent, Sequence[Tool], ToolContext, Any]:
        agent, tools, voice = self._on_call()
        context = ToolContext(hub=self.hub, room_id=self.room_id, agent_id=agent.id)
        return agent, tools, context, voice

    def new_speech_id(self) -> str:
        return self._speech_id()

    def play(self, speech: Speech) -> None:
        self.player.play(speech)

    def tools_running(self, reply: Reply, running: bool) -> None:
        if running and reply is self.current:
            self.engine.reply_used_tools()

    def tool_ran(self, reply: Reply, call: ToolCall, result: ToolResult) -> None:
        self.records.tool_ran(reply.agent_id, call, result)

    def now(self) -> float:
        return self.hub.clock.now()


def _since(start: float | None, end: float | None) -> float | None:
    return None if start is None or end is None else max(0.0, end - start)
