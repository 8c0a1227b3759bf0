"""The fake Twilio REST API of the tests: `voicehub_dev.fakes.twilio_account.TwilioAccount`
(the stand-in `voicehub call --twilio --twilio-api` serves), which the real `twilio` client
talks to. Calls, conferences, participants, messages and answering-machine detection (sync
and async) behave as its docstring says; `problems` lists what the server got wrong.

    async with FakeTwilioRest(twilio) as rest:       # twilio: the FakeTwilio of the account
        rest.callees.extend(["no-answer", "machine", "human"])   # what each call meets
        phone = await rest.answered.get()            # a PhoneLineClient once a person answers
"""

from __future__ import annotations

from voicehub.client.twiml_call import Call
from voicehub_dev.fakes.twilio_account import TwilioAccount as FakeTwilioRest
from voicehub_dev.fakes.twilio_rooms import Conference

__all__ = ["Call", "Conference", "FakeTwilioRest"]
