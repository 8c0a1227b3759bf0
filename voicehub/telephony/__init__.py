"""Phone lines: every carrier's webhooks, media streams and call control, in one place.

A carrier is three things here: a sans-I/O codec for its media stream
(`voicehub.transports.twilio`, `.telnyx`, `.plivo`, `.vonage`, all under the one
`voicehub.transports.phone.PhoneStreamTransport` and its `SendQueue` pump), a webhook
verifier (`<carrier>/verify.py`, or Twilio's `RequestValidator` in `twilio/webhooks.py`),
and its call control (`<carrier>/control.py`; Twilio's transfers, keypad tones, call-backs
and take-over in `twilio/`). What they share:

- `line.PhoneLine`: the server's phone side (switchboard, settings, tokens, number key);
- `answer.answer_call`: which conversation a call joins, and whether one coming back goes on;
- `stream_tokens`: the one-use tokens that let a media stream in;
- `media_stream.run_media_stream`: one stream on the server, whatever the carrier;
- `keypad.Keypad`: key presses as caller turns or desk actions;
- `livekit_sip`: transfers and keypad tones for callers brought in by LiveKit SIP.

The server mounts the routes (`voicehub.server.telephony`); the LiveKit worker uses
`livekit_sip`. Carrier SDKs are imported lazily, each behind its extra.
"""
