"""WebRTC signaling over real sockets and real aiortc peers on 127.0.0.1, with a scripted
voice session: refusals with clear reasons, the peer limit, DELETE, and one call whose
speech mark is acked on the data channel."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest

from tests.e2e_helpers import RunningServer, running_server
from tests.support.waiting import until
from tests.webrtc_helpers import loopback_ice
from voicehub import cli
from voicehub.client.call import CallClient, CallOptions
from voicehub.client.webrtc import open_webrtc_link
from voicehub.desks.desk import Desk, load_desks
from voicehub.errors import VoicehubError
from voicehub.server.settings import ServerSettings
from voicehub.voice.events import CallSession, SpeechMark
from voicehub_dev.fakes.server_session import ScriptedStack

pytest.importorskip("aiortc")

CHANNELS = Path(__file__).resolve().parents[2] / "channels"
TOKEN = "a-long-enough-test-token"
SDP = {"Content-Type": "application/sdp"}
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture(autouse=True)
def loopback() -> Iterator[None]:
    with loopback_ice():
        yield


@pytest.fixture(scope="module")
def desks() -> dict[str, Desk]:
    return {"research": load_desks(CHANNELS)["research"]}


@pytest.fixture
def factory() -> ScriptedStack:
    return ScriptedStack()


@pytest.fixture
async def server(
    tmp_path: Path, factory: ScriptedStack, desks: dict[str, Desk]
) -> AsyncIterator[RunningServer]:
    settings = ServerSettings(
        channels_dir=CHANNELS,
        db_path=tmp_path / "voicehub.db",
        token=TOKEN,
        max_peer_connections=1,
    )
    async with running_server(settings, voice=factory, desks=desks) as running:
        yield running


async def offer(
    server: RunningServer, path: str, body: str, headers: dict[str, str]
) -> httpx.Response:
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as client:
        return await client.post(path, content=body, headers=headers)


async def real_offer_sdp() -> str:
    """An offer as a voicehub client makes it (audio track and data channel)."""
    import aiortc

    from voicehub.transports.rtc_media import paced_track
    from voicehub.voice.audio.playout import PlayoutQueue

    connection = aiortc.RTCPeerConnection()
    connection.createDataChannel("voicehub")
    connection.addTrack(paced_track(PlayoutQueue(16000), on_marks=lambda marks, track_ms: None))
    await connection.setLocalDescription(await connection.createOffer())
    sdp = str(connection.localDescription.sdp)
    await connection.close()
    return sdp


async def test_refused_offers_say_why(server: RunningServer) -> None:
    good = await real_offer_sdp()
    path = "/desks/research/webrtc?conversation=refused"
    cases = [
        (path, good, SDP, 401, "needs an access token"),
        (path + "&token=wrong-token-of-length", good, SDP, 401, "not valid"),
        (
            "/desks/nowhere/webrtc",
            good,
            SDP | AUTH,
            404,
            "unknown desk 'nowhere'; desks here: research",
        ),
        (
            "/desks/research/webrtc?conversation=no%20spaces",
            good,
            SDP | AUTH,
            400,
            "conversation id",
        ),
        (path, good, {"Content-Type": "text/plain"} | AUTH, 415, "application/sdp"),
        (path, "hello", SDP | AUTH, 400, "malformed SDP: an SDP offer starts with the line v=0"),
        (path, "v=0\r\nm=video 9 UDP/TLS/RTP/SAVPF 96\r\n", SDP | AUTH, 400, "no audio section"),
        (path, good.replace("m=application", "m=nothing"), SDP | AUTH, 400, "no data channel"),
        (path, "x" * 70_000, SDP | AUTH, 413, "at most 65536"),
    ]
    for url, body, headers, status, reason in cases:
        response = await offer(server, url, body, headers)
        assert (response.status_code, url) == (status, url)
        assert reason in response.text, response.text
    assert not server.app.state.parts.webrtc.peers


async def test_an_offer_aiortc_cannot_parse_gets_400_with_its_reason(server: RunningServer) -> None:
    good = await real_offer_sdp()
    for dropped, reason in [
        ("a=fingerprint", "no DTLS fingerprint"),
        ("a=ice-ufrag", "ICE username fragment or password is missing"),
    ]:
        lines = [line for line in good.split("\r\n") if not line.startswith(dropped)]
        response = await offer(server, "/desks/research/webrtc", "\r\n".join(lines), SDP | AUTH)
        assert response.status_code == 400
        assert response.text.startswith("malformed SDP: ") and reason in response.text
    assert not server.app.state.parts.webrtc.peers
    assert (await server.get("/health")).status_code == 200  # the server goes on


@pytest.mark.slow
async def test_a_call_acks_playout_on_the_data_channel_and_the_limit_holds(
    server: RunningServer, factory: ScriptedStack
) -> None:
    options = CallOptions(
        desk="research",
        server=server.url,
        conversation="rtc-1",
        token=TOKEN,
        webrtc=True,
        quiet=0.2,
    )
    async with CallClient(options) as call:
        await call.wait_for_event(SpeechMark, timeout=20)
        await call.wait_for_turn()
        [session] = factory.sessions
        [mark] = call.report.events_of(SpeechMark)
        await call.wait_for(lambda: session.confirmed == [mark.id], 10)
        assert call.report.events_of(CallSession)[0].room_id == "research:rtc-1"
        status = await call.status()
        assert status is not None and status.room_id == "research:rtc-1"

        # one peer is the limit here: the next offer is refused, plainly
        response = await offer(server, "/desks/research/webrtc", await real_offer_sdp(), SDP | AUTH)
        assert response.status_code == 503 and response.headers["Retry-After"] == "5"
        assert "limit of 1 WebRTC calls" in response.text
        with pytest.raises(VoicehubError, match=r"refused \(503\)"):
            await open_webrtc_link(server.url, "research", "rtc-2", TOKEN)
        await until(lambda: len(session.caller_audio) >= 16000, timeout=10, poll=0.05)
        await call.hangup()
    await until(lambda: not server.app.state.parts.webrtc.peers, timeout=10, poll=0.05)
    assert session.closed
    [ended] = server.app.state.parts.webrtc.ended
    async with httpx.AsyncClient(base_url=server.url) as client:
        gone = await client.delete("/desks/research/webrtc/nope", headers=AUTH)
        # hanging up a call that already ended (its data channel said hangup) is no error
        again = await client.delete(f"/desks/research/webrtc/{ended}", headers=AUTH)
    assert gone.status_code == 404 and "no such WebRTC call" in gone.text
    assert again.status_code == 200


@pytest.mark.slow
async def test_voicehub_call_webrtc_places_the_call_over_aiortc(
    server: RunningServer, factory: ScriptedStack, tmp_path: Path
) -> None:
    out = tmp_path / "agent.wav"
    argv = ["call", "research", "--server", server.url, "--token", TOKEN, "--webrtc"]
    argv += ["--say", "hello there", "--conversation", "rtc-cli", "--out", str(out)]
    argv += ["--timeout", "20"]
    code = await asyncio.to_thread(cli.main, argv)  # its own loop, in a thread
    assert code == 0
    [session] = factory.sessions
    assert session.room_id == "research:rtc-cli"
    assert session.confirmed  # the greeting's mark was acked over the data channel
    assert len(session.caller_audio) > 32000  # the words arrived on the Opus track
    assert out.exists()


@pytest.mark.slow
async def test_voicehub_call_webrtc_fast_times_the_speech_as_the_track_plays_it(
    server: RunningServer,
    factory: ScriptedStack,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`--fast` cannot send speech faster over WebRTC: the caller's track plays it in real
    time. The caller stops speaking when the track has played the line, and voice-to-voice
    counts from there (before, the line was queued at once: 'stopped speaking' came at the
    same moment as 'speaking', and voice-to-voice held the line's own duration)."""
    argv = ["call", "research", "--server", server.url, "--token", TOKEN, "--webrtc", "--fast"]
    argv += ["--say", "hello there", "--conversation", "rtc-fast"]
    argv += ["--out", str(tmp_path / "agent.wav"), "--timeout", "20"]
    code = await asyncio.to_thread(cli.main, argv)
    printed = capsys.readouterr().out
    assert code == 0, printed
    [(started, seconds)] = re.findall(r"([\d.]+)  caller +speaking .* \(([\d.]+) s\)", printed)
    [stopped] = re.findall(r"([\d.]+)  caller +stopped speaking", printed)
    assert float(stopped) - float(started) >= 0.5 * float(seconds) > 0, printed
