"""A desk on a call through voicehub's pipeline engine: `start_pipeline_call`.

The one place a `PipelineVoiceSession` is built for a desk. The stacks that run the engine
(`offline`, `deepgram`) give it the call's plugins (`CallSpeech`); the rest comes
from the desk: the agent that has the conversation and its tools (`DeskOnCall`), the
engine's options (`desk_engine_options`: its delivery mode, turn-taking and idle timers),
the end-of-turn model and what the desk's words leave open (`voicehub.desks.turns`), the
caller audio's noise suppression (`[voice] denoise`, `voicehub.voice.denoise`) and the sounds
while the agent works (`[voice.sounds]`, `voicehub.voice.sounds`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING

from voicehub.desks.call import DeskOnCall
from voicehub.desks.turns import desk_turn_setup, desk_words_complete, desk_words_open
from voicehub.errors import ConfigError
from voicehub.voice.denoise import caller_filter
from voicehub.voice.engine.session import (
    CallAgent,
    CallSpeech,
    EngineOptions,
    PipelineVoiceSession,
    TurnJudges,
)
from voicehub.voice.engine.turn_engine import TurnEngineSettings
from voicehub.voice.sounds import SoundSettings
from voicehub.voice.sounds.session_sounds import attach_sounds

if TYPE_CHECKING:
    from voicehub.desks.desk import Desk
    from voicehub.desks.voice_stack import CallSpec
    from voicehub.voice.engine.results import PrerenderBudget

__all__ = ["desk_engine_options", "desk_sound_settings", "start_pipeline_call"]


def desk_engine_options(desk: Desk) -> EngineOptions:
    """The engine's options for `desk`'s calls: its delivery mode, turn policy and the
    idle timers of its `[voice]` table."""
    voice = desk.config.voice
    return EngineOptions(
        delivery_mode=desk.delivery_mode,
        turn=TurnEngineSettings(policy=desk_turn_setup(desk).settings),
        idle_prompt_after=voice.idle_prompt_after,
        idle_hang_up_after=voice.idle_hang_up_after,
    )


def desk_sound_settings(desk: Desk) -> SoundSettings:
    """The sounds of `desk`'s calls (`[voice.sounds]`)."""
    sounds = desk.config.voice.sounds
    return SoundSettings(
        thinking=None if sounds.thinking == "off" else sounds.thinking,
        thinking_after=sounds.thinking_after,
        hold=None if sounds.hold == "off" else sounds.hold,
        hold_after=sounds.hold_after,
        fillers=sounds.filler,
        filler_after=sounds.filler_after,
        volume_db=sounds.volume_db,
    )


async def start_pipeline_call(
    call: CallSpec,
    providers: CallSpeech,
    *,
    options: EngineOptions | None = None,
    prerender_budget: PrerenderBudget | None = None,
) -> PipelineVoiceSession:
    """Run `call.desk` on the call and return the started session (closed again if it
    fails to start). `options` replaces the desk's engine options (tests and benchmarks
    tune turn-taking); `prerender_budget` bounds the pre-rendered results of every call
    the process runs. ConfigError when an agent's voice is missing from the providers."""
    desk = call.desk
    _check_voices(desk, providers.voices)
    glue = await DeskOnCall.open(call)
    turns = desk_turn_setup(desk)
    agent = CallAgent(
        glue.agent,
        extra_tools=glue.tools_for(glue.agent.id),
        greeting=call.greeting,
        reply_gate=glue.asker.reply_gate(call.room_id) if glue.asker is not None else None,
    )
    if providers.caller_filter is None:
        intake = caller_filter(desk.config.voice.denoise, call.transport.sample_rate)
        providers = dataclasses.replace(providers, caller_filter=intake)
    session = PipelineVoiceSession(
        call.hub,
        call.room_id,
        agent,
        call.transport,
        providers,
        options=options if options is not None else desk_engine_options(desk),
        judges=TurnJudges(
            end_of_turn=turns.model,
            words_open=desk_words_open(desk),
            words_complete=desk_words_complete(desk),
        ),
        turn_observer=call.turn_observer,
        prerender_budget=prerender_budget,
    )
    attach_sounds(session, desk_sound_settings(desk))
    glue.attach(session)
    session.on_close(glue.detach)
    try:
        await session.start()
    except BaseException:
        glue.detach()
        await session.aclose()
        raise
    return session


def _check_voices(desk: Desk, voices: Mapping[str, object]) -> None:
    for agent_id in {desk.front_agent.id, *desk.config.conversation_agent_ids}:
        voice = desk.agents[agent_id].voice
        if voice is not None and voice not in voices:
            where = desk.config.source or f"desk {desk.name!r}"
            known = ", ".join(sorted(voices)) or "none"
            raise ConfigError(
                f"{where}: agent {agent_id!r} speaks with voice {voice!r}, which this call "
                f"does not have (voices: {known}); give a TTS for it in the providers' voices"
            )
