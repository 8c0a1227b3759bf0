"""The stand-in Twilio account's conferences and messages (see `.twilio_account`):
calls joining a `<Dial><Conference>`, its status callbacks, and the `Messages`,
`Conferences` and `Participants` resources of the REST API."""

from __future__ import annotations

import asyncio
import datetime as dt
import email.utils
import re
import time
import uuid
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import JSONResponse

if TYPE_CHECKING:
    from voicehub.client.twiml_call import Call
    from voicehub_dev.fakes.twilio_account import TwilioAccount

__all__ = [
    "Conference",
    "conference",
    "conferences",
    "join_conference",
    "messages",
    "not_found",
    "participants",
    "rfc2822",
]

_MAX_BODY = 1600
_TOO_LONG = "The concatenated message body exceeds the 1600 character limit."


def rfc2822(at: float) -> str:
    return email.utils.formatdate(at, usegmt=True)


@dataclass
class Conference:
    """A conference room: the calls in it and whether it has started."""

    name: str
    sid: str = field(default_factory=lambda: "CF" + uuid.uuid4().hex)
    status: str = "init"  # init -> in-progress -> completed
    participants: dict[str, dict[str, Any]] = field(default_factory=dict)  # call sid -> flags
    joined: list[str] = field(default_factory=list)  # every call sid that ever joined
    ended_by: str = ""
    # Events go to the statusCallback of the first participant that gave one (as Twilio).
    callback: str | None = None
    events: frozenset[str] = frozenset()
    created: float = field(default_factory=time.time)
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    def resource(self, account_sid: str) -> dict[str, Any]:
        return {
            "sid": self.sid,
            "account_sid": account_sid,
            "friendly_name": self.name,
            "status": self.status,
            "date_created": rfc2822(self.created),
            "date_updated": rfc2822(time.time()),
            "region": "us1",
            "reason_conference_ended": self.ended_by or None,
            "uri": f"/2010-04-01/Accounts/{account_sid}/Conferences/{self.sid}.json",
        }

    def participant(self, account_sid: str, call_sid: str) -> dict[str, Any]:
        flags = self.participants[call_sid]
        return {
            "account_sid": account_sid,
            "call_sid": call_sid,
            "conference_sid": self.sid,
            "status": "connected",
            "hold": False,
            "muted": False,
            "coaching": False,
            "start_conference_on_enter": flags["start"],
            "end_conference_on_exit": flags["end"],
            "label": None,
            "uri": (
                f"/2010-04-01/Accounts/{account_sid}/Conferences/{self.sid}/Participants/"
                f"{call_sid}.json"
            ),
        }


async def join_conference(account: TwilioAccount, call: Call, element: ET.Element) -> None:
    """`<Dial><Conference>`: in the room until it ends or the call leaves it."""
    name = (element.text or "").strip()
    conference = account.conferences.get(name)
    if conference is None or conference.status == "completed":
        conference = account.conferences[name] = Conference(name)
    start = element.get("startConferenceOnEnter", "true") == "true"
    end = element.get("endConferenceOnExit", "false") == "true"
    if conference.callback is None and element.get("statusCallback"):
        conference.callback = element.get("statusCallback")
        conference.events = frozenset(element.get("statusCallbackEvent", "").split())

    async def tell(event: str, **extra: str) -> None:
        callback = conference.callback
        if callback and event.split("-")[-1] in conference.events:
            params = {
                "AccountSid": account.account_sid,
                "ConferenceSid": conference.sid,
                "FriendlyName": name,
                "StatusCallbackEvent": event,
                "Timestamp": rfc2822(time.time()),
                **extra,
            }
            await account.post(callback, params, "conference")

    conference.participants[call.sid] = {"start": start, "end": end}
    conference.joined.append(call.sid)
    call.conference = name
    call.history.append(f"conference: joined {name}")
    await tell("participant-join", CallSid=call.sid)
    if start and conference.status == "init":
        conference.status = "in-progress"
        await tell("conference-start")
    elif conference.status == "init":
        call.played.append(element.get("waitUrl") or "twilio hold music")
    account.change(conference)
    try:
        while call.sid in conference.participants and conference.status != "completed":
            conference.changed.clear()
            await conference.changed.wait()
    finally:
        if conference.participants.pop(call.sid, None) is not None:
            call.history.append(f"conference: left {name}")
            await tell("participant-leave", CallSid=call.sid)
            if end or not conference.participants:
                conference.ended_by = (
                    "participant-with-end-conference-on-exit-left"
                    if end
                    else "last-participant-left"
                )
                conference.status = "completed"
                conference.participants.clear()
                await tell("conference-end", ReasonConferenceEnded=conference.ended_by)
            account.change(conference)
        call.conference = None


async def messages(account: TwilioAccount, request: Request) -> JSONResponse:
    form = await account.form(request)
    if isinstance(form, JSONResponse):
        return form
    if request.method == "GET":
        return _list_messages(account, request)
    to, body = form.get("To", ""), form.get("Body", "")
    sender = form.get("From") or form.get("MessagingServiceSid")
    if not to:
        return account.refuse(400, 21604, "A 'To' phone number is required.")
    if not re.fullmatch(r"\+[1-9][0-9]{6,14}", to):
        return account.refuse(400, 21211, f"Invalid 'To' Phone Number: {to}")
    if not sender:
        return account.refuse(400, 21603, "A 'From' phone number is required.")
    if not body:
        return account.refuse(400, 21602, "Message body is required.")
    if len(body) > _MAX_BODY:
        return account.refuse(400, 21617, _TOO_LONG)
    now = time.time()
    message = {
        "sid": "SM" + uuid.uuid4().hex,
        "account_sid": account.account_sid,
        "to": to,
        "from": form.get("From"),
        "messaging_service_sid": form.get("MessagingServiceSid"),
        "body": body,
        "status": "queued",
        "direction": "outbound-api",
        "num_segments": str(1 + len(body) // 153),
        "date_created": rfc2822(now),
        "date_sent": rfc2822(now),
        "date_updated": rfc2822(now),
        "api_version": "2010-04-01",
        "error_code": None,
        "error_message": None,
        "uri": f"/2010-04-01/Accounts/{account.account_sid}/Messages/x.json",
    }
    account.messages.append(message)
    account.touch()
    if account.message_gate is not None:
        await account.message_gate.wait()
    return JSONResponse(message, status_code=201)


def _list_messages(account: TwilioAccount, request: Request) -> JSONResponse:
    query = request.query_params
    found = [
        m
        for m in account.messages
        if query.get("To") in (None, m["to"]) and query.get("From") in (None, m["from"])
    ]
    after = query.get("DateSent>")
    if after is not None:
        since = dt.datetime.fromisoformat(after.replace("Z", "+00:00")).timestamp()
        found = [
            m
            for m in found
            if _epoch(m["date_sent"]) >= since - 1.0  # Twilio's dates are whole seconds
        ]
    return account.page(request, "messages", list(reversed(found)))  # newest first


async def conferences(account: TwilioAccount, request: Request) -> JSONResponse:
    query = request.query_params
    found = [
        c.resource(account.account_sid)
        for c in account.conferences.values()
        if query.get("FriendlyName") in (None, c.name) and query.get("Status") in (None, c.status)
    ]
    return account.page(request, "conferences", found)


async def conference(account: TwilioAccount, request: Request) -> JSONResponse:
    conference = _by_sid(account, request.path_params["sid"])
    if conference is None:
        return account.refuse(
            404, 20404, f"The requested resource {request.url.path} was not found"
        )
    return JSONResponse(conference.resource(account.account_sid))


async def participants(account: TwilioAccount, request: Request) -> JSONResponse:
    conference = _by_sid(account, request.path_params["sid"])
    if conference is None:
        return account.refuse(
            404, 20404, f"The requested resource {request.url.path} was not found"
        )
    found = [conference.participant(account.account_sid, s) for s in conference.participants]
    return account.page(request, "participants", found)


def _by_sid(account: TwilioAccount, sid: str) -> Conference | None:
    return next((c for c in account.conferences.values() if sid in (c.sid, c.name)), None)


def not_found(request: Request) -> tuple[int, int, str]:
    return 404, 20404, f"The requested resource {request.url.path} was not found"


def _epoch(rfc: str) -> float:
    parsed = dt.datetime.strptime(rfc, "%a, %d %b %Y %H:%M:%S %Z")
    return parsed.replace(tzinfo=dt.UTC).timestamp()
