"""voicehub: a real-time voice agent server.

The public API. Voice, server and provider modules import vendor SDKs and are reached through
their own modules (`voicehub.voice...`, `voicehub.server...`), so `import voicehub` stays light.
"""

from voicehub.agents.agent import Agent
from voicehub.agents.llm import LLM, ChatMessage, ToolCall, ToolSpec
from voicehub.agents.openai import OpenAIChatLLM
from voicehub.agents.runner import RunResult, run_agent
from voicehub.agents.scripted import ScriptedLLM, ScriptedRule
from voicehub.agents.tools import Tool, ToolContext, ToolResult, tool
from voicehub.core.channels import Channel, TextChannel
from voicehub.core.clock import Clock, SystemClock, VirtualClock
from voicehub.core.events import ChannelType, Event, EventKind
from voicehub.core.hooks import HookContext, HookExecution, HookResult, HookTrigger
from voicehub.core.room import Room
from voicehub.core.store.memory import MemoryStore
from voicehub.core.store.sqlite import SQLiteStore
from voicehub.delivery.policy import Immediate, Queued, WaitForIdle
from voicehub.errors import (
    ConfigError,
    RoomClosedError,
    RoomNotFoundError,
    ToolError,
    UnknownAgentError,
    VoicehubError,
)
from voicehub.hub import Hub
from voicehub.orchestration.base import Orchestration
from voicehub.orchestration.delegation import TaskHandle, TaskResult
from voicehub.orchestration.handoff import HandoffHandler, HandoffMemoryProvider, setup_handoff
from voicehub.orchestration.loop import Loop, LoopResult, Verdict
from voicehub.orchestration.pipeline import ConversationPipeline, Pipeline, PipelineStage
from voicehub.orchestration.router import ConversationRouter, RoutingConditions, RoutingRule
from voicehub.orchestration.state import (
    ConversationPhase,
    ConversationState,
    PhaseTransition,
    get_conversation_state,
    set_conversation_state,
)
from voicehub.orchestration.supervisor import Supervisor
from voicehub.orchestration.swarm import Swarm

__all__ = [
    "LLM",
    "Agent",
    "Channel",
    "ChannelType",
    "ChatMessage",
    "Clock",
    "ConfigError",
    "ConversationPhase",
    "ConversationPipeline",
    "ConversationRouter",
    "ConversationState",
    "Event",
    "EventKind",
    "HandoffHandler",
    "HandoffMemoryProvider",
    "HookContext",
    "HookExecution",
    "HookResult",
    "HookTrigger",
    "Hub",
    "Immediate",
    "Loop",
    "LoopResult",
    "MemoryStore",
    "OpenAIChatLLM",
    "Orchestration",
    "PhaseTransition",
    "Pipeline",
    "PipelineStage",
    "Queued",
    "Room",
    "RoomClosedError",
    "RoomNotFoundError",
    "RoutingConditions",
    "RoutingRule",
    "RunResult",
    "SQLiteStore",
    "ScriptedLLM",
    "ScriptedRule",
    "Supervisor",
    "Swarm",
    "SystemClock",
    "TaskHandle",
    "TaskResult",
    "TextChannel",
    "Tool",
    "ToolCall",
    "ToolContext",
    "ToolError",
    "ToolResult",
    "ToolSpec",
    "UnknownAgentError",
    "Verdict",
    "VirtualClock",
    "VoicehubError",
    "WaitForIdle",
    "get_conversation_state",
    "run_agent",
    "set_conversation_state",
    "setup_handoff",
    "tool",
]
