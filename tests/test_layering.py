"""The package's layering, checked on every import statement (module level, inside functions
and under TYPE_CHECKING alike). docs/architecture.md ("Layers") documents the same table."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "voicehub"

# layer -> the voicehub layers it may import (itself and `errors` always allowed).
ALLOWED: dict[str, set[str]] = {
    "errors": set(),
    "core": set(),
    "agents": {"core"},
    "delivery": {"core"},
    "tools": {"core", "agents"},
    # MCP servers' tools as `Tool`s (the `mcp` SDK, imported lazily on connecting).
    "mcp": {"core", "agents"},
    "orchestration": {"core", "agents", "delivery"},
    "voice": {"core", "agents", "delivery"},
    "transports": {"core", "voice"},
    "hub": {"core", "agents", "delivery", "orchestration"},
    # The synthetic callers speak the wire protocols: the call protocol's events, WebRTC
    # media (`transports.call_events`, `transports.rtc_media`).
    "client": {"core", "voice", "transports"},
    # `voicehub test`: scenarios played by the synthetic caller against a served desk.
    "scenarios": {"core", "voice", "transports", "client", "desks", "server"},
    # Call recordings: the tape, the taps around a call's transport and session, the files.
    "recordings": {"core", "agents", "delivery", "voice"},
    # Traces and turn metrics: the composition side's observers of calls.
    "telemetry": {"core", "agents", "delivery", "voice", "hub"},
    # The composition side: it may know every layer below it.
    "desks": {"core", "agents", "delivery", "tools", "mcp", "orchestration", "voice", "hub"},
    # Phone lines: each carrier's webhooks, REST call control, transfers, call-backs,
    # take-over and keypad, and LiveKit SIP; composed into the server and the worker.
    "telephony": {
        "core",
        "agents",
        "delivery",
        "tools",
        "orchestration",
        "voice",
        "transports",
        "hub",
        "desks",
    },
    "server": {
        "telephony",
        "core",
        "agents",
        "delivery",
        "tools",
        "orchestration",
        "voice",
        "transports",
        "hub",
        "desks",
        "telemetry",
        "recordings",
    },
    # The LiveKit worker: desks on calls in LiveKit rooms, composed like the server.
    "workers": {
        "telephony",
        "core",
        "agents",
        "delivery",
        "tools",
        "orchestration",
        "voice",
        "transports",
        "hub",
        "desks",
        "telemetry",
        "recordings",
    },
    # What desk authors use in their own tests: a desk on a call, on an in-memory line.
    "testing": {"core", "agents", "delivery", "voice", "hub", "desks"},
    "cli": {"*"},
    "__init__": {"core", "agents", "delivery", "tools", "orchestration", "voice", "hub"},
}

# Vendor SDKs never imported by the lower layers, not even lazily.
VENDORS = (
    "livekit",
    "openai",
    "deepgram",
    "twilio",
    "aiortc",
    "redis",
    "starlette",
    "uvicorn",
    "opentelemetry",
    "prometheus_client",
    "mcp",
)
VENDOR_FREE = {"errors", "core", "delivery", "orchestration", "tools"}
# The one exception: the Redis store lives with the other stores and `redis` is its driver (as
# `sqlite3` is the SQLite store's); it imports it lazily, inside the module, and nothing else may.
VENDOR_EXCEPTIONS = {Path("voicehub/core/store/redis.py"): {"redis"}}


# The development tools (benchmarks, fakes, the soak tool) and the tests are not installed
# with the product: nothing in it may import them.
DEVELOPMENT_ONLY = {"voicehub_dev", "tests"}


def _layer(path: Path) -> str:
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    return parts[0]


def _imports(path: Path) -> Iterator[tuple[int, str]]:
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.lineno, node.module
            if node.module == "voicehub":  # `from voicehub import desks` names a layer too
                for alias in node.names:
                    yield node.lineno, f"voicehub.{alias.name}"


def _violations() -> Iterator[str]:
    for path in sorted(PACKAGE.rglob("*.py")):
        layer = _layer(path)
        allowed = ALLOWED[layer]
        where = path.relative_to(PACKAGE.parent)
        for line, module in _imports(path):
            top = module.split(".")[0]
            if top in DEVELOPMENT_ONLY:
                yield f"{where}:{line}: the product may not import {module} (development only)"
            elif top == "voicehub":
                if module == "voicehub":
                    if layer != "__init__":
                        yield f"{where}:{line} imports the package root"
                    continue
                target = module.split(".")[1]
                if target in (layer, "errors") or "*" in allowed or target in allowed:
                    continue
                yield f"{where}:{line}: {layer} may not import {module}"
            elif top in VENDOR_EXCEPTIONS.get(where, ()):
                continue
            elif layer in VENDOR_FREE and top in VENDORS:
                yield f"{where}:{line}: {layer} may not import the vendor SDK {module}"


def test_every_module_belongs_to_a_known_layer() -> None:
    unknown = {_layer(path) for path in PACKAGE.rglob("*.py")} - ALLOWED.keys()
    assert not unknown, f"add these to the layering table: {sorted(unknown)}"


def test_no_import_crosses_the_layers() -> None:
    problems = list(_violations())
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize(
    ("layer", "module", "expected"),
    [
        ("core", "voicehub.hub", "core may not import voicehub.hub"),
        ("voice", "voicehub.desks.call", "voice may not import voicehub.desks.call"),
        ("core", "livekit.agents", "core may not import the vendor SDK livekit.agents"),
        ("core", "redis.asyncio", "core may not import the vendor SDK redis.asyncio"),
        ("server", "voicehub_dev.fakes.twilio", "the product may not import voicehub_dev.fakes"),
    ],
)
def test_the_check_catches_a_forbidden_import(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, layer: str, module: str, expected: str
) -> None:
    # A throwaway package with one offending module, checked by the same walker.
    fake = tmp_path / "voicehub"
    (fake / layer).mkdir(parents=True)
    (fake / layer / "bad.py").write_text(f"def later() -> None:\n    import {module}\n")
    monkeypatch.setattr(f"{__name__}.PACKAGE", fake)
    problems = list(_violations())
    assert any(expected in problem for problem in problems), problems
