"""`voicehub worker`: serve the desks as a LiveKit agent worker."""

from __future__ import annotations

import argparse

from voicehub.cli.hub_options import add_hub_options, hub_overrides
from voicehub.cli.subcommands import Subcommands


def add_parser(commands: Subcommands) -> None:
    """Add `worker` to an `add_subparsers()` object."""
    worker = commands.add_parser(
        "worker",
        help="serve the desks in LiveKit rooms (a livekit-agents worker)",
        description=(
            "Register with a LiveKit server ($LIVEKIT_URL, $LIVEKIT_API_KEY, "
            "$LIVEKIT_API_SECRET) and answer the rooms it dispatches to this worker's agent "
            "name: the desk's name with --desk, else 'voicehub' (the desk then comes from "
            "the dispatch metadata or the room name)."
        ),
    )
    worker.add_argument("--desk", help="serve only this desk (default: every desk)")
    worker.add_argument("--agent-name", help="agent name to register (default: see above)")
    add_hub_options(worker)
    worker.add_argument(
        "--capacity", type=int, help="calls at once before reporting full (default 8)"
    )
    worker.add_argument("--url", help="LiveKit server URL (default $LIVEKIT_URL)")
    worker.add_argument("--http-port", type=int, help="health check port (default 8081)")


def run(args: argparse.Namespace) -> int:
    """Serve jobs until Ctrl-C; flags override the environment."""
    from voicehub.core.store.choice import describe_store
    from voicehub.workers.server import run_worker
    from voicehub.workers.settings import WorkerSettings

    settings = WorkerSettings.from_env(
        desk=args.desk,
        agent_name=args.agent_name,
        capacity=args.capacity,
        url=args.url,
        http_port=args.http_port,
        **hub_overrides(args),
    )

    def ready(worker_id: str) -> None:
        print(
            f"voicehub: worker {worker_id} registered as {settings.registered_name!r} "
            f"at {settings.url}, store {describe_store(settings)} (Ctrl-C to stop)",
            flush=True,
        )

    run_worker(settings, ready=ready)
    return 0
