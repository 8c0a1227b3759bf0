"""A webhook receiver as a customer would run one: HTTPS on 127.0.0.1 (a certificate made for
the test, trusted through `ssl_context()`), checking each POST's signature and
deduplicating on its `Idempotency-Key`.

    async with WebhookReceiver(secret) as receiver:   # receiver.url: https://127.0.0.1:<port>/
        receiver.answers.extend([500, 200])            # status codes to answer, in turn
        receiver.gate = asyncio.Event()                # hold responses (a sender killed mid-POST)
        ...
        receiver.requests    # every POST: headers, body, whether its signature held
        receiver.processed   # key -> payload, once per idempotency key (what the customer acts on)
"""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import hmac
import ipaddress
import json
import ssl
import tempfile
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import uvicorn
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from voicehub.server.in_loop import LoopServer as _Server


@dataclass(frozen=True)
class Received:
    headers: dict[str, str]
    body: bytes
    signed: bool  # the signature matched the secret

    @property
    def key(self) -> str:
        return self.headers.get("idempotency-key", "")

    @property
    def payload(self) -> dict[str, Any]:
        found: dict[str, Any] = json.loads(self.body)
        return found


def make_certificate(directory: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 (cert, key) in `directory`."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


class WebhookReceiver:
    """See the module docstring."""

    def __init__(self, secret: bytes) -> None:
        self.secret = secret
        self.answers: deque[int] = deque()
        self.gate: asyncio.Event | None = None
        self.requests: list[Received] = []
        self.processed: dict[str, dict[str, Any]] = {}
        self.arrived = asyncio.Event()
        self._dir = tempfile.TemporaryDirectory(prefix="voicehub-webhook-")
        self.cert, self.key = make_certificate(Path(self._dir.name))
        self.port = 0
        self._server: _Server | None = None
        self._serving: asyncio.Task[None] | None = None

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}/hooks/results"

    def ssl_context(self) -> ssl.SSLContext:
        """A client context trusting this receiver's certificate."""
        return ssl.create_default_context(cafile=str(self.cert))

    async def __aenter__(self) -> WebhookReceiver:
        app = Starlette(routes=[Route("/hooks/results", self._post, methods=["POST"])])
        config = uvicorn.Config(
            app,
            host="127.0.0.1",
            port=0,
            log_level="warning",
            loop="asyncio",
            timeout_graceful_shutdown=1,
            ssl_certfile=str(self.cert),
            ssl_keyfile=str(self.key),
        )
        self._server = server = _Server(config)
        self._serving = asyncio.create_task(server.serve())
        await server.listening.wait()
        self.port = server.servers[0].sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.gate is not None:
            self.gate.set()
        assert self._server is not None and self._serving is not None
        self._server.should_exit = True
        await asyncio.wait_for(self._serving, 30)
        self._dir.cleanup()

    async def _post(self, request: Request) -> JSONResponse:
        body = await request.body()
        headers = {k.lower(): v for k, v in request.headers.items()}
        timestamp = headers.get("x-voicehub-timestamp", "")
        expected = hmac.new(self.secret, timestamp.encode() + b"." + body, hashlib.sha256)
        signed = hmac.compare_digest(
            headers.get("x-voicehub-signature", ""), "sha256=" + expected.hexdigest()
        )
        received = Received(headers, body, signed)
        self.requests.append(received)
        self.arrived.set()
        status = self.answers.popleft() if self.answers else 200
        if status == 200 and signed and received.key not in self.processed:
            self.processed[received.key] = received.payload  # acted on once per key
        if self.gate is not None:
            await self.gate.wait()
        return JSONResponse({"ok": status == 200}, status_code=status)
