"""`voicehub serve`: serve the desks over WebSocket, with a console page and a REST view."""

from __future__ import annotations

import argparse
import logging
import shlex
from collections.abc import Collection
from typing import TYPE_CHECKING

from voicehub.cli.command_name import command_name
from voicehub.cli.hub_options import add_hub_options, hub_overrides
from voicehub.cli.subcommands import Subcommands

if TYPE_CHECKING:
    from voicehub.desks.folder_scan import DeskScan

# What the hint has the caller say: the quickstart's line to the research desk, else a hello.
_FIRST_WORDS = {"research": "could you research heat pumps for me please"}


def add_parser(commands: Subcommands) -> None:
    """Add `serve` to an `add_subparsers()` object."""
    serve = commands.add_parser(
        "serve",
        help="serve the desks over WebSocket, with a console page and a REST view",
        description="Serve the desks in --channels. Listens on 127.0.0.1 unless a token is set.",
    )
    serve.add_argument("--host", help="address to listen on (default 127.0.0.1)")
    serve.add_argument("--port", type=int, help="port (default 8080; 0 picks a free one)")
    add_hub_options(serve)
    serve.add_argument(
        "--token", help="access token callers must send (default: $VOICEHUB_TOKEN, or none)"
    )
    serve.add_argument(
        "--public-url",
        help="caller-facing https URL for Twilio webhooks (default: $VOICEHUB_PUBLIC_URL)",
    )
    serve.add_argument(
        "--drain-seconds",
        type=float,
        help="on SIGTERM, how long live calls may finish before they are ended, their "
        "results held (default 30; $VOICEHUB_DRAIN_SECONDS)",
    )
    serve.add_argument(
        "--max-load",
        type=float,
        help="refuse new calls busy above this load (1.0: the event loop 200 ms late, or all "
        "the CPUs in use; default: no limit; $VOICEHUB_MAX_LOAD)",
    )
    serve.add_argument(
        "--max-calls",
        type=int,
        help="refuse new calls busy beyond this many at once (default: no limit; "
        "$VOICEHUB_MAX_CALLS)",
    )
    serve.add_argument("--no-prewarm", action="store_true", help="load models on first call")
    serve.add_argument(
        "--reload",
        action="store_true",
        help="watch the desk folder: a changed desk file serves the next call (live calls "
        "keep theirs); a broken one is reported and its last good version keeps serving",
    )
    serve.add_argument(
        "--no-batch-vad",
        action="store_true",
        help="run each call's Silero VAD on its own instead of batched with the other calls' "
        "(default: $VOICEHUB_BATCH_VAD, or batched)",
    )
    serve.add_argument(
        "--log-level",
        help="log level of the server and, when given, of voicehub's own logs (default: "
        "info for the server, warning for voicehub)",
    )


def run(args: argparse.Namespace) -> int:
    """Serve until Ctrl-C; flags override the `VOICEHUB_*` environment."""
    from voicehub.server.app import serve
    from voicehub.server.settings import ServerSettings

    settings = ServerSettings.from_env(
        host=args.host,
        port=args.port,
        token=args.token,
        public_url=args.public_url,
        prewarm=False if args.no_prewarm else None,
        batch_vad=False if args.no_batch_vad else None,
        log_level=args.log_level or "info",
        drain_seconds=args.drain_seconds,
        max_load=args.max_load,
        max_calls=args.max_calls,
        reload_desks=True if args.reload else None,
        **hub_overrides(args),
    )

    if args.log_level:
        logging.getLogger("voicehub").setLevel(args.log_level.upper())
    elif args.reload:  # what --reload did is shown, though voicehub logs warnings only
        logging.getLogger("voicehub.reload").setLevel(logging.INFO)

    def ready(url: str, desks: DeskScan) -> None:
        print(f"voicehub: serving at {url} (Ctrl-C to stop, SIGTERM to drain)", flush=True)
        if desks.broken:
            check = (
                f"{command_name()} channels --channels {shlex.quote(str(settings.channels_dir))}"
            )
            print(
                f"voicehub: {len(desks.broken)} desk file(s) not served, broken (logged above; "
                f"`{check}` checks them): {', '.join(sorted(desks.broken))}",
                flush=True,
            )
        hint = try_command(url, desks.desks)
        print(f"voicehub: open it in a browser, or try: {hint}", flush=True)

    try:
        drained = serve(settings, ready=ready)
    except KeyboardInterrupt:  # uvicorn may re-raise Ctrl-C after its graceful shutdown
        drained = False
    stopped = "drained and stopped" if drained else "stopped"
    print(f"voicehub: {stopped}; undelivered results stay in the store", flush=True)
    return 0


def try_command(url: str, desks: Collection[str]) -> str:
    """A `voicehub call` that works against this server as started: one of its desks (the
    research desk when it is served) and its address (unless it is the call's default)."""
    from voicehub.cli.call import default_server

    desk = "research" if "research" in desks else sorted(desks)[0]
    words = _FIRST_WORDS.get(desk, "hello")
    server = "" if url.rstrip("/") == default_server().rstrip("/") else f" --server {url}"
    return f"{command_name()} call {desk}{server} --say {shlex.quote(words)}"
