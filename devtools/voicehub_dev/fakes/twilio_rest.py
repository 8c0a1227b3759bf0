"""The fake Twilio REST API of the tests: `voicehub.client.twilio_api.TwilioAccount` (the
stand-in `voicehub call --twilio --twilio-api` serves), which the real `twilio` client
talks to. Calls, conferences, participants, messages and answering-machine detection (sync
and async) behave as its docstring says; `problems` lists what the server got wrong.

    async with FakeTwilioRest(twilio) as rest:       # twilio: the FakeTwilio of the account
        rest.callees.extend(["no-answer", "machine", "human"])   # what each call meets
        phone = await rest.answered.get()            # a PhoneLineClient once a person answers
"""

from __future__ import annotations

from voicehub.client.twilio_api import TwilioAccount as FakeTwilioRest
from voicehub.client.twilio_calls import Call
from voicehub.client.twilio_rooms import Conference

__all__ = ["Call", "Conference", "FakeTwilioRest"]
