"""No module of voicehub reads or patches a dependency's private names.

Walked on every module's AST:

- an import of a private name or module of a dependency (`from livekit.x import _y`,
  `import livekit.agents._exceptions`);
- an attribute `_x` read on anything rooted at a name imported from a dependency
  (`silero.VAD._opts`, `agent_activity.AgentActivity._on_vad_event`);
- an attribute `_x` read on any other object when voicehub itself defines no `_x` anywhere
  (`shared._onnx_session`, `session._activity`): a private name voicehub reads must be its
  own;
- `getattr`/`setattr`/`hasattr`/`delattr` with a private name voicehub does not define;
- an assignment into a dependency's module or class (`AgentSession.x = ...`, `setattr(module,
  ...)`), private name or not: patching is never the way.

The one exception is what livekit-agents requires of a subclass of its plugin bases
(`stt.STT`, `stt.RecognizeStream`, `tts.ChunkedStream`, `vad.VADStream`, `llm.LLMStream`): the
abstract hooks every plugin implements and the channels they read and write. Those are the
plugin interface, the same in every livekit plugin.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "voicehub"
# The development tools (benchmarks, fakes) follow the same rule.
DEVELOPMENT = Path(__file__).resolve().parents[1] / "devtools" / "voicehub_dev"

PLUGIN_AUTHOR_MEMBERS = frozenset(
    {"_run", "_main_task", "_recognize_impl", "_input_ch", "_event_ch", "_FlushSentinel"}
)
_NAME_CALLS = frozenset({"getattr", "setattr", "hasattr", "delattr"})


@dataclass(frozen=True)
class Violation:
    path: str
    line: int
    what: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.what}"


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _own_module(module: str) -> bool:
    return module.split(".")[0] in ("voicehub", "voicehub_dev")


def defined_names(trees: list[ast.Module]) -> set[str]:
    """Every private name voicehub defines: functions, classes, attributes it assigns,
    class-level and annotated names, `__slots__` entries, parameters and keywords."""
    names: set[str] = set()
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.add(node.name)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                names.add(node.attr)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif isinstance(node, ast.arg):
                names.add(node.arg)
            elif isinstance(node, ast.alias):
                names.add(node.asname or node.name.split(".")[0])
            elif (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and _private(node.value)
                and node.value.isidentifier()
            ):  # `__slots__ = ("_x", ...)`, `setattr(self, "_x", ...)` on our own objects
                names.add(node.value)
    return {name for name in names if _private(name)}


def _dependency_roots(tree: ast.Module) -> set[str]:
    """Local names bound to a dependency's module or object by an import."""
    roots: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if not _own_module(alias.name):
                    roots.add(alias.asname or alias.name.split(".")[0])
        elif (
            isinstance(node, ast.ImportFrom)
            and node.module
            and node.level == 0
            and not _own_module(node.module)
            and node.module != "__future__"
        ):
            roots.update(alias.asname or alias.name for alias in node.names)
    return roots


def _root(node: ast.expr) -> str | None:
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def violations(source: str, path: str, own: set[str]) -> Iterator[Violation]:
    """What in `source` reads or patches a dependency's private names (see the module)."""
    tree = ast.parse(source, path)
    roots = _dependency_roots(tree)
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Import):
            for alias in node.names:
                if not _own_module(alias.name) and any(map(_private, alias.name.split("."))):
                    yield Violation(path, line, f"imports private module {alias.name}")
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if _own_module(node.module) or node.module == "__future__":
                continue
            if any(map(_private, node.module.split("."))):
                yield Violation(path, line, f"imports from private module {node.module}")
            for alias in node.names:
                if _private(alias.name) and alias.name not in PLUGIN_AUTHOR_MEMBERS:
                    yield Violation(path, line, f"imports {node.module}.{alias.name}")
        elif isinstance(node, ast.Attribute):
            root = _root(node.value)
            if isinstance(node.ctx, ast.Store | ast.Del) and root in roots:
                yield Violation(path, line, f"assigns into {root} (a dependency): .{node.attr}")
            elif not _private(node.attr) or node.attr in PLUGIN_AUTHOR_MEMBERS:
                continue
            elif root in roots:
                yield Violation(path, line, f"reads {root}...{node.attr} of a dependency")
            elif node.attr not in own:
                yield Violation(path, line, f"reads .{node.attr}, which voicehub never defines")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id not in _NAME_CALLS or len(node.args) < 2:
                continue
            target, name = node.args[0], node.args[1]
            if node.func.id in ("setattr", "delattr") and _root(target) in roots:
                yield Violation(path, line, f"{node.func.id} on {_root(target)} (a dependency)")
            if (
                isinstance(name, ast.Constant)
                and isinstance(name.value, str)
                and _private(name.value)
                and name.value not in own | PLUGIN_AUTHOR_MEMBERS
            ):
                yield Violation(path, line, f"{node.func.id}(..., {name.value!r})")


def _modules() -> list[tuple[str, str]]:
    return [
        (str(path.relative_to(PACKAGE.parent)), path.read_text())
        for root in (PACKAGE, DEVELOPMENT)
        for path in sorted(root.rglob("*.py"))
    ]


def test_no_module_reads_or_patches_a_dependencys_private_names() -> None:
    modules = _modules()
    own = defined_names([ast.parse(source) for _, source in modules])
    found = [str(v) for path, source in modules for v in violations(source, path, own)]
    assert not found, "private names of dependencies:\n" + "\n".join(found)


def test_the_check_catches_planted_private_access() -> None:
    planted = """
from livekit.agents.voice import agent_activity
from livekit.agents.voice.agent_session import _text_only
import livekit.agents._exceptions
from livekit.plugins import silero

def patch(shared, session):
    agent_activity.AgentActivity._interrupt_by_audio_activity = lambda *a: None
    agent_activity.AgentActivity.interrupt = None
    setattr(silero.VAD, "load", None)
    model = silero.VAD(session=shared._onnx_session)
    activity = session._activity
    return getattr(session, "_recorded_events"), model, activity
"""
    own = {"_mine"}
    found = {v.what for v in violations(planted, "planted.py", own)}
    assert found >= {
        "imports livekit.agents.voice.agent_session._text_only",
        "imports private module livekit.agents._exceptions",
        "assigns into agent_activity (a dependency): ._interrupt_by_audio_activity",
        "assigns into agent_activity (a dependency): .interrupt",
        "setattr on silero (a dependency)",
        "reads ._onnx_session, which voicehub never defines",
        "reads ._activity, which voicehub never defines",
        "getattr(..., '_recorded_events')",
    }, found
    clean = "class S:\n    def f(self):\n        self._mine = 1\n        return self._mine\n"
    assert not list(violations(clean, "clean.py", own))
