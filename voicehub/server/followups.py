"""Follow-ups on the server: results nobody collected go out by SMS or a signed webhook.

`ServerFollowUps` composes `voicehub.delivery.followup_service.FollowUps` for the desks
with `[delivery] hold_for`, with the channels:

- "sms": a short summary to the caller's number through Twilio's messaging API, from the
  number they called. The numbers are those of the call (memory) until one of the
  conversation's results is held; then they are sealed onto that delivery record
  (`NumberVault`: encrypted under the server's number secret) and kept only so. A withheld
  number is refused (the result stays held for a call-in). Numbers are never logged: error
  texts from Twilio are scrubbed of them. Each SMS ends with "Ref" and a code from the
  delivery id, by which a recovering instance finds one a killed instance sent.
- "webhook": a JSON POST, signed `X-Voicehub-Signature: sha256=<hex HMAC-SHA256 of
  "<timestamp>.<body>">` under the desk's secret (`webhook_secret_env`), with
  `X-Voicehub-Timestamp` and `Idempotency-Key: <delivery id>` (the same on every retry:
  receivers deduplicate on it), retried with backoff on 5xx and network errors.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import re
import time
from collections import OrderedDict
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import httpx

from voicehub.core.events import Event
from voicehub.core.hooks import HookContext, HookTrigger
from voicehub.core.store.base import DeliveryRecord
from voicehub.core.trusted import replace
from voicehub.delivery.followup import FollowUpChannel, FollowUpPlan, followup_state
from voicehub.delivery.followup_service import FollowUpError, FollowUps, FollowUpSender
from voicehub.desks.held_results import topics_of, topics_phrase
from voicehub.desks.number_vault import NumberVault
from voicehub.errors import ConfigError
from voicehub.telephony.twilio.rest import TwilioApiError, TwilioRest

if TYPE_CHECKING:
    from voicehub.desks.desk import Desk
    from voicehub.hub import Hub

__all__ = [
    "REACH_KEY",
    "ServerFollowUps",
    "SmsSender",
    "WebhookSender",
    "scrub_numbers",
    "sign_webhook",
    "sms_reference",
]

log = logging.getLogger("voicehub.delivery")

REACH_KEY = "reach"  # delivery metadata: the caller's numbers, sealed
_MAX_NUMBERS = 10_000
_EXCERPT = 280
_NUMBERISH = re.compile(r"\+?\d[\d ().-]{5,}\d")


def scrub_numbers(text: str) -> str:
    """`text` with anything that looks like a phone number replaced (for logs and records)."""
    return _NUMBERISH.sub("<number>", text)


def sms_reference(record: DeliveryRecord) -> str:
    return "Ref " + hashlib.sha256(record.id.encode()).hexdigest()[:8].upper()


def sign_webhook(secret: bytes, timestamp: str, body: bytes) -> str:
    """The `X-Voicehub-Signature` value of a webhook body sent at `timestamp`."""
    digest = hmac.new(secret, timestamp.encode() + b"." + body, hashlib.sha256).hexdigest()
    return f"sha256={digest}"


def _excerpt(content: str) -> str:
    text = " ".join(content.split())
    if len(text) <= _EXCERPT:
        return text
    cut = text[:_EXCERPT]
    end = max(cut.rfind(". "), cut.rfind("! "), cut.rfind("? "))
    return cut[: end + 1] if end > _EXCERPT // 2 else cut.rsplit(" ", 1)[0] + "..."


class SmsSender:
    """Channel "sms": Twilio's messaging API, to the sealed number of the record."""

    def __init__(self, rest: TwilioRest, vault: NumberVault, desks: Mapping[str, Desk]) -> None:
        self.rest, self.vault, self.desks = rest, vault, desks

    async def send(self, record: DeliveryRecord, *, recover: bool) -> str:
        numbers = self.vault.open(record.id, record.metadata.get(REACH_KEY))
        if numbers is None:
            raise FollowUpError(
                "the caller's number is not known (withheld, or not from a phone call): "
                "the result stays held for their next call",
                permanent=True,
            )
        caller, line = numbers
        reference = sms_reference(record)
        try:
            if recover:  # a killed sender may have sent it: Twilio's log says
                since = float(followup_state(record).get("since", record.created_at))
                found = await self.rest.sms_sent(to=caller, since=since - 60, containing=reference)
                if found is not None:
                    return found
            body = self._body(record, line, reference)
            return await self.rest.send_sms(to=caller, from_=line, body=body)
        except TwilioApiError as exc:
            message = scrub_numbers(f"Twilio refused the SMS: {exc.message} (code {exc.code})")
            raise FollowUpError(message, permanent=exc.permanent) from None

    def _body(self, record: DeliveryRecord, line: str, reference: str) -> str:
        desk = self.desks.get(record.room_id.split(":", 1)[0])
        title = desk.title if desk is not None else "voicehub"
        topics = topics_phrase(topics_of([record]))
        return (
            f"{title}: your results on {topics} are ready. {_excerpt(record.content)} "
            f"Call {line} to hear them in full. {reference}"
        )


class WebhookSender:
    """Channel "webhook": a signed JSON POST to the desk's URL."""

    def __init__(
        self,
        targets: Mapping[str, tuple[str, bytes]],
        *,
        client: httpx.AsyncClient | None = None,
        wall: Any = time.time,
    ) -> None:
        self.targets = targets  # desk -> (url, secret)
        self.client = client or httpx.AsyncClient(timeout=10.0)
        self.wall = wall

    async def send(self, record: DeliveryRecord, *, recover: bool) -> str:
        desk = record.room_id.split(":", 1)[0]
        url, secret = self.targets[desk]
        payload = {
            "type": "voicehub.result",
            "id": record.id,
            "desk": desk,
            "room_id": record.room_id,
            "conversation": record.room_id.split(":", 1)[1],
            "content": record.content,
            "topics": topics_of([record]),
            "created_at": record.created_at,
        }
        body = json.dumps(payload, separators=(",", ":"), sort_keys=True).encode()
        timestamp = str(int(self.wall()))
        headers = {
            "Content-Type": "application/json",
            "Idempotency-Key": record.id,
            "X-Voicehub-Timestamp": timestamp,
            "X-Voicehub-Signature": sign_webhook(secret, timestamp, body),
        }
        try:
            response = await self.client.post(url, content=body, headers=headers)
        except httpx.HTTPError as exc:
            raise FollowUpError(f"webhook {url} unreachable: {type(exc).__name__}") from None
        status = response.status_code
        if 200 <= status < 300:
            return f"HTTP {status}"
        permanent = 400 <= status < 500 and status not in (408, 425, 429)
        raise FollowUpError(f"webhook {url} answered {status}", permanent=permanent)

    async def aclose(self) -> None:
        await self.client.aclose()


class ServerFollowUps:
    """The follow-ups of a server's desks, and the numbers they need (see the module)."""

    def __init__(
        self,
        hub: Hub,
        desks: Mapping[str, Desk],
        *,
        number_key: bytes,
        rest: TwilioRest | None,
        environ: Mapping[str, str] = os.environ,
    ) -> None:
        self.hub, self.desks = hub, desks
        self.vault = NumberVault(number_key)
        plans: dict[str, FollowUpPlan] = {}
        for desk in desks.values():
            delivery = desk.config.delivery
            if delivery.hold_for is not None:
                plans[desk.name] = FollowUpPlan(delivery.hold_for, delivery.fallback)
        senders: dict[FollowUpChannel, FollowUpSender] = {}
        self.webhooks = _webhooks(desks, environ)
        if self.webhooks:
            senders["webhook"] = self.webhook_sender = WebhookSender(self.webhooks)
        if rest is not None:
            senders["sms"] = SmsSender(rest, self.vault, desks)
        elif any(plan.channel == "sms" for plan in plans.values()):
            log.warning(
                "desks %s send held results by SMS, which needs TWILIO_ACCOUNT_SID, "
                "TWILIO_AUTH_TOKEN and VOICEHUB_PUBLIC_URL: those stay held",
                ", ".join(sorted(d for d, p in plans.items() if p.channel == "sms")),
            )
        self.followups = FollowUps(
            hub.store,
            plans=plans,
            senders=senders,
            clock=hub.clock,
            wall=hub.wall,
            owner=hub.instance_id,
        )
        self._numbers: OrderedDict[str, tuple[str, str]] = OrderedDict()
        if any(plan.channel == "sms" for plan in plans.values()):
            hub.hooks.add(HookTrigger.AFTER_DELIVER, self._on_delivery, name="followups")

    def start(self) -> None:
        self.followups.start()

    async def aclose(self) -> None:
        await self.followups.aclose()
        if self.webhooks:
            await self.webhook_sender.aclose()

    def remember(self, room_id: str, caller: str, line: str) -> None:
        """The numbers of an incoming call (memory only, until a result is held)."""
        plan = self.followups.plans.get(room_id.split(":", 1)[0])
        if plan is None or plan.channel != "sms":
            return
        self._numbers.pop(room_id, None)
        self._numbers[room_id] = (caller, line)
        while len(self._numbers) > _MAX_NUMBERS:
            self._numbers.popitem(last=False)

    async def _on_delivery(self, event: Event, context: HookContext) -> None:
        """A result held for a caller whose numbers are known: seal them onto it."""
        numbers = self._numbers.get(event.room_id)
        delivery_id = event.metadata.get("delivery_id")
        if event.metadata.get("outcome") != "held" or numbers is None or not delivery_id:
            return
        for _ in range(5):  # a write racing ours: read again
            record = await self.hub.store.get_delivery(str(delivery_id))
            if record is None or REACH_KEY in record.metadata:
                break
            sealed = self.vault.seal(record.id, *numbers)
            updated = replace(
                record,
                metadata={**record.metadata, REACH_KEY: sealed},
                fence=record.fence + 1,
            )
            if await self.hub.store.swap_delivery(updated, expected_fence=record.fence):
                break
        self.followups.kick()


def _webhooks(
    desks: Mapping[str, Desk], environ: Mapping[str, str]
) -> dict[str, tuple[str, bytes]]:
    """Each webhook desk's (url, secret); ConfigError names a secret that is not set."""
    found: dict[str, tuple[str, bytes]] = {}
    for desk in desks.values():
        delivery = desk.config.delivery
        if delivery.fallback != "webhook" or delivery.webhook is None:
            continue
        secret = environ.get(delivery.webhook_secret_env, "")
        if len(secret) < 16:
            where = desk.config.source or f"desk {desk.name!r}"
            raise ConfigError(
                f"{where}: delivery.webhook: results are signed with the secret in "
                f"${delivery.webhook_secret_env}, which is "
                f"{'too short (16 characters or more)' if secret else 'not set'}"
            )
        found[desk.name] = (delivery.webhook, secret.encode())
    return found
