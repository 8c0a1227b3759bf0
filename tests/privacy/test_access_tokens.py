"""Scoped access tokens through the real server: each reaches what its scopes say and
nothing else; once one exists the server is no longer open; rotation and revocation."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from websockets.asyncio.client import connect

from tests.e2e_helpers import RunningServer, running_server
from tests.server.test_app import closed, next_event
from voicehub.cli import main
from voicehub.desks.desk import load_desks
from voicehub.server.settings import ServerSettings
from voicehub_dev.fakes.server_session import ScriptedStack

CHANNELS = Path(__file__).resolve().parents[2] / "channels"


def bearer(secret: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}"}


async def call_opens(server: RunningServer, desk: str, secret: str) -> dict[str, object]:
    """The first event a call to `desk` with `secret` gets: session, or an error."""
    url = f"{server.ws_url}/desks/{desk}/call?token={secret}"
    async with connect(url) as ws:
        first = json.loads(await ws.recv())
        while first["type"] not in ("session", "error"):
            first = json.loads(await ws.recv())
        if first["type"] == "session":
            await ws.send(json.dumps({"type": "hangup"}))
        await closed(ws)
    return dict(first)


async def test_tokens_reach_what_their_scopes_say(tmp_path: Path) -> None:
    examples = load_desks(CHANNELS)
    desks = {name: examples[name] for name in ("research", "drafting")}
    settings = ServerSettings(channels_dir=CHANNELS, db_path=tmp_path / "voicehub.db")
    async with running_server(settings, voice=ScriptedStack(), desks=desks) as server:
        assert (await server.get("/api/rooms")).status_code == 200  # open: no tokens yet
        tokens = server.parts.access
        kiosk, _ = await tokens.create(["desk:research"], name="kiosk")
        viewer, _ = await tokens.create(["read"])
        admin, _ = await tokens.create(["admin"])

        refused = await server.get("/api/rooms")
        assert refused.status_code == 401 and "needs an access token" in refused.json()["message"]
        assert (await server.get("/api/rooms", headers=bearer(viewer))).status_code == 200
        forbidden = await server.get("/api/rooms", headers=bearer(kiosk))
        assert forbidden.status_code == 403 and "needs read" in forbidden.json()["message"]
        assert (await server.get("/api/rooms", headers=bearer(admin))).status_code == 200
        health = (await server.get("/health", headers=bearer(viewer))).json()
        assert "desks" in health
        assert "desks" not in (await server.get("/health")).json()
        assert "desks" not in (await server.get("/health", headers=bearer(kiosk))).json()

        assert (await call_opens(server, "research", kiosk))["type"] == "session"
        wrong_desk = await call_opens(server, "drafting", kiosk)
        assert wrong_desk["code"] == "forbidden" and "desk:drafting" in str(wrong_desk["message"])
        assert (await call_opens(server, "research", viewer))["code"] == "forbidden"
        assert (await call_opens(server, "drafting", admin))["type"] == "session"
        async with connect(f"{server.ws_url}/desks/research/call") as ws:
            assert (await next_event(ws, "error"))["code"] == "unauthorized"

        async with httpx.AsyncClient(base_url=server.url) as client:
            room = "/api/rooms/research:nobody"
            assert (await client.delete(room, headers=bearer(viewer))).status_code == 403
            assert (await client.delete(room, headers=bearer(admin))).status_code == 404

        kiosk_id = kiosk.split("_")[1]
        rotated, _ = await tokens.rotate(kiosk_id, grace=3600)
        assert (await call_opens(server, "research", kiosk))["type"] == "session"  # in grace
        assert (await call_opens(server, "research", rotated))["type"] == "session"
        again, _ = await tokens.rotate(kiosk_id, grace=0)
        assert (await call_opens(server, "research", rotated))["code"] == "unauthorized"
        assert await tokens.revoke(kiosk_id)
        assert (await call_opens(server, "research", again))["code"] == "unauthorized"
        bogus = "vh_0123456789ab_" + "x" * 32
        assert (await server.get("/api/rooms", headers=bearer(bogus))).status_code == 401


async def test_a_shared_token_stays_an_admin_token(tmp_path: Path) -> None:
    shared = "a-long-enough-test-token"
    settings = ServerSettings(channels_dir=CHANNELS, db_path=tmp_path / "voicehub.db", token=shared)
    desks = {"research": load_desks(CHANNELS)["research"]}
    async with running_server(settings, voice=ScriptedStack(), desks=desks) as server:
        viewer, _ = await server.parts.access.create(["read"])
        assert (await server.get("/api/rooms", headers=bearer(shared))).status_code == 200
        assert (await server.get("/api/rooms", headers=bearer(viewer))).status_code == 200
        assert (await server.get("/api/rooms")).status_code == 401
        assert (await call_opens(server, "research", shared))["type"] == "session"


def test_the_access_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("VOICEHUB_STORE", raising=False)
    db = ["--db", str(tmp_path / "voicehub.db")]
    assert main(["access", "create", "--scope", "desk:research", "--name", "kiosk", *db]) == 0
    out = capsys.readouterr().out
    assert "(desk:research); its secret, shown once:" in out
    token_id = out.split()[1]
    assert out.splitlines()[1].startswith(f"vh_{token_id}_")
    assert main(["access", "list", *db]) == 0
    listed = capsys.readouterr().out
    assert token_id in listed and "kiosk" in listed and "vh_" not in listed
    assert main(["access", "rotate", token_id, *db]) == 0
    assert "the old secret works 24 h more" in capsys.readouterr().out
    assert main(["access", "revoke", token_id, *db]) == 0
    assert main(["access", "revoke", token_id, *db]) == 1
    assert main(["access", "create", "--scope", "everything", *db]) == 2
    assert "'everything' is not a scope" in capsys.readouterr().err
