"""The composition root for desks: desk files -> validated models -> agents, orchestration,
voice stack, and the per-call glue (ask_user by voice, handoff in a call).

Only this package, `voicehub.hub`, `voicehub.server`, `voicehub.client` and `voicehub.cli`
know every layer; the layers below them never import desk code.
"""

from voicehub.desks.config import DeskConfig
from voicehub.desks.desk import Desk, build_desk, load_desks
from voicehub.desks.loading import load_desk_file, load_desk_folder

__all__ = ["Desk", "DeskConfig", "build_desk", "load_desk_file", "load_desk_folder", "load_desks"]
